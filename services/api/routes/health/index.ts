import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { tagRoutes } from '../../plugins/openapi.ts';
import { API_DEFAULTS } from '../../../../libs/config/component-defaults.ts';

export interface HealthChecks {
  /** Resolves when the dependency answers; rejects otherwise. */
  readonly [name: string]: () => Promise<void>;
}

const CHECK_TIMEOUT_MS = API_DEFAULTS.healthCheckTimeoutMs;

function within<T>(promise: Promise<T>, ms: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error('timed out')), ms);
    promise.then(
      (v) => {
        clearTimeout(t);
        resolve(v);
      },
      (e: unknown) => {
        clearTimeout(t);
        reject(e);
      },
    );
  });
}

const ReadyJson = Type.Object({ ready: Type.Boolean(), checks: Type.Record(Type.String(), Type.String()) });

/** Liveness (the process answers) and readiness (Postgres and Redis answer). */
const healthRoutes: FastifyPluginAsyncTypebox<{ checks: HealthChecks }> = async (app, opts) => {
  tagRoutes(app, 'health');
  const live = async () => ({ ok: true });
  const ready = async (_request: unknown, reply: import('fastify').FastifyReply) => {
    const entries = await Promise.all(
      Object.entries(opts.checks).map(async ([name, check]) => {
        try {
          await within(check(), CHECK_TIMEOUT_MS);
          return [name, 'up'] as const;
        } catch {
          return [name, 'down'] as const;
        }
      }),
    );
    const isReady = entries.every(([, s]) => s === 'up');
    if (!isReady) reply.header('retry-after', '2');
    return reply.status(isReady ? 200 : 503).send({ ready: isReady, checks: Object.fromEntries(entries) });
  };
  const liveSchema = { schema: { response: { 200: Type.Object({ ok: Type.Boolean() }) } } };
  const readySchema = { schema: { response: { 200: ReadyJson, 503: ReadyJson } } };
  app.get('/v1/health', liveSchema, live);
  app.get('/healthz', liveSchema, live);
  app.get('/v1/ready', readySchema, ready);
  app.get('/readyz', readySchema, ready);
};

export default healthRoutes;
