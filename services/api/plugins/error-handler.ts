import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { BatonError, ERROR_CATALOG, type ErrorCode } from '../../../libs/domain/errors.ts';
import { classifyDatabaseError } from '../../../libs/db/classify-error.ts';
import { API_DEFAULTS } from '../../../libs/config/component-defaults.ts';

/** Fastify's own error codes mapped onto the catalog. */
const FASTIFY_CODES: Record<string, ErrorCode> = {
  FST_ERR_CTP_INVALID_JSON_BODY: 'invalid_json',
  FST_ERR_CTP_EMPTY_JSON_BODY: 'invalid_json',
  FST_ERR_CTP_BODY_TOO_LARGE: 'body_too_large',
  FST_ERR_CTP_INVALID_MEDIA_TYPE: 'unsupported_media_type',
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: 'validation_failed',
};

const LENGTH_KEYWORDS = new Set(['maxLength', 'maxItems', 'maxProperties']);

/** Any error a request met, as the catalog names it (the A2A gateway answers it in JSON-RPC). */
export function toBatonError(err: FastifyError | Error): BatonError {
  if (err instanceof BatonError) return err;
  const fe = err as FastifyError;
  if (fe.validation) {
    const first = fe.validation[0];
    const code: ErrorCode = first && LENGTH_KEYWORDS.has(first.keyword) ? 'field_too_long' : 'validation_failed';
    const where = fe.validationContext ?? 'body';
    const path = first?.instancePath ? first.instancePath : '';
    const extra =
      first?.keyword === 'additionalProperties' ? ` (${String((first.params as { additionalProperty?: string }).additionalProperty)})` : '';
    return new BatonError(code, `${where}${path} ${first?.message ?? 'is invalid'}${extra}`);
  }
  if (fe.code && FASTIFY_CODES[fe.code]) {
    const code = FASTIFY_CODES[fe.code] as ErrorCode;
    const message =
      code === 'invalid_json'
        ? 'the request body is not valid JSON'
        : code === 'unsupported_media_type'
          ? 'a request body must be application/json'
          : fe.message;
    return new BatonError(code, message);
  }
  if (err instanceof SyntaxError && (fe.statusCode === 400 || /JSON/.test(err.message))) {
    return new BatonError('invalid_json', 'the request body is not valid JSON');
  }
  const classified = classifyDatabaseError(err);
  if (classified instanceof BatonError) return classified;
  if (typeof fe.statusCode === 'number' && fe.statusCode >= 400 && fe.statusCode < 500) {
    return new BatonError('validation_failed', fe.message);
  }
  return new BatonError('internal_error', 'internal error', undefined, { cause: err });
}

/** What the process knows of its dependencies' outages (each reported once by its own link). */
export interface Outages {
  /** Postgres cannot be reached now (libs/db DatabaseLink): its 503s are logged at debug only. */
  databaseDown(): boolean;
}

/**
 * Every error leaves as `{ error: { code, message } }` with the catalog's status. 5xx
 * messages are generic; the cause is logged, never shown (at debug only for a
 * `database_unavailable` during an outage `outages` knows of). 503s and 429s carry Retry-After.
 */
export function installErrorHandler(app: FastifyInstance, outages?: Outages): void {
  app.setErrorHandler((err: FastifyError, request: FastifyRequest, reply: FastifyReply) => {
    const be = toBatonError(err);
    if (be.code === 'database_unavailable' && outages?.databaseDown()) {
      // An outage the process's DatabaseLink has reported, once (libs/db/database-link.ts).
      request.log.debug({ err: be.cause ?? err, code: be.code }, 'request failed');
    } else if (be.status >= 500) {
      request.log.error({ err: be.cause ?? err, code: be.code }, 'request failed');
    } else {
      request.log.info({ code: be.code }, 'request refused');
    }
    if (be.status === 503) reply.header('retry-after', String(API_DEFAULTS.unavailableRetryAfterSeconds));
    if (be.status === 429) reply.header('retry-after', String(be.details?.['retryAfterSeconds'] ?? 1));
    const message = be.status >= 500 ? ERROR_CATALOG[be.code].summary : be.message;
    const body: { error: { code: string; message: string; details?: unknown } } = { error: { code: be.code, message } };
    if (be.details && be.status < 500) body.error.details = be.details;
    void reply.status(be.status).send(body);
  });
  app.setNotFoundHandler((request, reply) => {
    void reply
      .status(404)
      .send({ error: { code: 'route_not_found', message: `no route for ${request.method} ${request.url.split('?')[0]}` } });
  });
}
