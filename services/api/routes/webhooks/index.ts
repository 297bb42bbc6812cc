import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import { TIMESTAMP_HEADER, SIGNATURE_HEADER } from '../../../../libs/adapters/webhook/webhook-signature.ts';
import { BatonError } from '../../../../libs/domain/errors.ts';
import { nestedTooDeepAt } from '../../../../libs/domain/json-depth.ts';
import { LIMITS } from '../../../../libs/domain/limits.ts';
import { TURN_REPORT_STATUSES } from '../../../../libs/domain/turn-report.ts';
import { recordTurnReport, type TurnReportDeps } from '../../../../libs/handoffs/record-turn-report.ts';
import { ErrorBody } from '../../schemas/common.ts';
import { tagRoutes } from '../../plugins/openapi.ts';

const CallbackBody = Type.Object(
  {
    requestId: Type.String({ minLength: 1, maxLength: 64 }),
    status: Type.Union(TURN_REPORT_STATUSES.map((s) => Type.Literal(s))),
    summary: Type.Optional(Type.String({ maxLength: LIMITS.contextSummary })),
    output: Type.Optional(Type.Unknown()),
    error: Type.Optional(Type.String({ maxLength: LIMITS.focus })),
    /** What the turn used, with a final status (checked by libs/domain/turn-usage.ts: 400 validation_failed). */
    usage: Type.Optional(Type.Unknown()),
  },
  { additionalProperties: false },
);

const CallbackJson = Type.Object({
  requestId: Type.String(),
  status: Type.String(),
  outcome: Type.Union([Type.Literal('recorded'), Type.Literal('repeated'), Type.Literal('stale')]),
});

const header = (request: FastifyRequest, name: string): string | undefined => {
  const value = request.headers[name];
  return typeof value === 'string' ? value : undefined;
};

/**
 * `POST /v1/webhooks/callback`: a webhook agent reports a turn's progress or end. Registered
 * outside the bearer-token scope: the signature (Baton-Timestamp, Baton-Signature with the
 * recipient agent's secret) is the only credential, over the body's exact bytes, which this
 * scope's JSON parser keeps for it.
 */
const webhookRoutes: FastifyPluginAsyncTypebox<{ deps: TurnReportDeps }> = async (app, opts) => {
  tagRoutes(app, 'webhooks');
  const rawBodies = new WeakMap<FastifyRequest, string>();
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser<string>('application/json', { parseAs: 'string' }, (request, body, done) => {
    rawBodies.set(request, body);
    // Fastify's default JSON parser answers through `done`; its type also admits a promise-returning parser.
    void parseJson(request, body, (err: Error | null, value?: unknown) => {
      if (err) return done(err, undefined);
      if (nestedTooDeepAt(value, LIMITS.jsonDepth) !== null) {
        return done(
          new BatonError('too_deeply_nested', `body nests objects and arrays more than ${LIMITS.jsonDepth} levels deep`),
          undefined,
        );
      }
      done(null, value);
    });
  });

  app.post(
    '/v1/webhooks/callback',
    { schema: { body: CallbackBody, response: { 200: CallbackJson, '4xx': ErrorBody } } },
    async (request) => {
      const { report, outcome } = await recordTurnReport(opts.deps, {
        rawBody: rawBodies.get(request) ?? '',
        timestamp: header(request, TIMESTAMP_HEADER),
        signature: header(request, SIGNATURE_HEADER),
        report: request.body,
      });
      return { requestId: report.requestId, status: report.status, outcome };
    },
  );
};

export default webhookRoutes;
