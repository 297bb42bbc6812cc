import type { FastifyInstance } from 'fastify';

/** What every response of the API says about caching: it depends on who asks, so never store it. */
export const NO_STORE = 'private, no-store';

/**
 * Every response, from any route, the 404 handler or the error handler, refusals and 5xx
 * included, carries `Cache-Control: private, no-store`. The hook is installed on the root
 * instance so it runs before authentication can refuse a call; the answers that never reach a
 * hook (router errors, malformed HTTP) set the same header themselves (app.ts, client-errors.ts).
 */
export function installNoStore(app: FastifyInstance): void {
  app.addHook('onRequest', async (_request, reply) => {
    reply.header('cache-control', NO_STORE);
  });
}
