import type { FastifyInstance } from 'fastify';
import { BatonError } from '../../../libs/domain/errors.ts';

/**
 * Once the app starts closing, a request that still arrives (pipelined, or on a keep-alive
 * connection that was busy) is refused with 503 `shutting_down` through the error handler, so it
 * has the catalog's shape, `Retry-After` and `Cache-Control` like every other answer. Fastify's
 * own `return503OnClosing` answer has none of them, so app.ts turns it off. Requests already
 * past this hook finish normally: that is the drain.
 */
export function installClosingRefusal(app: FastifyInstance): void {
  let closing = false;
  app.addHook('preClose', async () => {
    closing = true;
  });
  app.addHook('onRequest', async () => {
    if (closing) throw new BatonError('shutting_down', 'this API process is shutting down; retry');
  });
}
