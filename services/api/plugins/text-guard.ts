import type { FastifyInstance } from 'fastify';
import { BatonError } from '../../../libs/domain/errors.ts';
import { unstorableTextAt } from '../../../libs/domain/storable-text.ts';

/**
 * Refuses, before validation, any body, query or path text that Postgres could not store as
 * sent (NUL, unpaired surrogates): agents' text is kept byte for byte or refused with
 * `invalid_text`, never silently altered or turned into a 500. It looks at every level the body
 * parser accepted (json-body.ts bounds that at LIMITS.jsonDepth); it has no cutoff of its own.
 */
export function installTextGuard(app: FastifyInstance): void {
  app.addHook('preValidation', async (request) => {
    for (const [where, value] of [
      ['body', request.body],
      ['querystring', request.query],
      ['params', request.params],
    ] as const) {
      const at = unstorableTextAt(value);
      if (at !== null)
        throw new BatonError('invalid_text', `${where}${at === '/' ? '' : at} holds a NUL character or an unpaired surrogate`);
    }
  });
}
