import type { FastifyBodyParser, FastifyInstance } from 'fastify';
import { BatonError } from '../../../libs/domain/errors.ts';
import { nestedTooDeepAt } from '../../../libs/domain/json-depth.ts';
import { LIMITS } from '../../../libs/domain/limits.ts';

/**
 * Fastify's own JSON parser (empty bodies, syntax errors and `__proto__`/`constructor` keys are
 * refused as before) followed by the depth bound: a body nested more than LIMITS.jsonDepth
 * levels is refused with 400 `too_deeply_nested` as it is parsed. JSON.parse and the poisoning
 * scan are iterative, but what comes after them (the text guard, schema validation,
 * JSON.stringify, Postgres jsonb) recurses and must never see such a body. For a scope that
 * needs a parser of its own (to keep the raw body, say), wrap this one rather than Fastify's.
 */
export function boundedJsonParser(app: FastifyInstance): FastifyBodyParser<string> {
  const parseJson = app.getDefaultJsonParser('error', 'error');
  return (request, body, done) => {
    // Fastify's default JSON parser answers through `done`; its type also admits a promise-returning parser.
    void parseJson(request, body, (err: Error | null, value?: unknown) => {
      if (err) return done(err, undefined);
      const at = nestedTooDeepAt(value, LIMITS.jsonDepth);
      if (at !== null) {
        return done(
          new BatonError(
            'too_deeply_nested',
            `body${at === '/' ? '' : at} nests objects and arrays more than ${LIMITS.jsonDepth} levels deep`,
          ),
          undefined,
        );
      }
      done(null, value);
    });
  };
}

/**
 * Bodies are JSON and nothing else: Fastify's text/plain parser is removed, so a body of any
 * other media type (or of none) is refused with 415 `unsupported_media_type`; a string body would
 * otherwise reach the schema and come back as a misleading `validation_failed`. JSON bodies go
 * through `boundedJsonParser`.
 */
export function installJsonBody(app: FastifyInstance): void {
  const parser = boundedJsonParser(app);
  app.removeContentTypeParser(['application/json', 'text/plain']);
  app.addContentTypeParser<string>('application/json', { parseAs: 'string' }, parser);
}
