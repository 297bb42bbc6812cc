import { BatonError } from '../domain/errors.ts';

// Postgres SQLSTATE classes and node errnos that mean "the database is not there right now".
// 57014 (query_canceled) is how Postgres ends a statement past the statement timeout.
const UNAVAILABLE_SQLSTATES = new Set(['57P01', '57P02', '57P03', '57014', '53300', '08000', '08001', '08003', '08004', '08006']);
const UNAVAILABLE_ERRNOS = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EHOSTUNREACH', 'EAI_AGAIN']);
const UNAVAILABLE_MESSAGES = [
  'Connection terminated',
  'timeout exceeded when trying to connect',
  // pg's query_timeout: the statement's reply did not come in time (libs/db/open-database.ts).
  'Query read timeout',
  'Client has encountered a connection error',
  'Cannot use a pool after calling end',
  'DatabaseNotReachable',
  "Can't reach database server",
];
const UNAVAILABLE_PRISMA_CODES = new Set(['P1001', 'P1002', 'P1008', 'P1017', 'P2024']);

function* causes(err: unknown): Generator<Record<string, unknown>> {
  let current: unknown = err;
  for (let depth = 0; depth < 8 && typeof current === 'object' && current !== null; depth++) {
    yield current as Record<string, unknown>;
    const next = (current as { cause?: unknown }).cause;
    if (next === current) break;
    current = next;
  }
}

/**
 * True when `err` (or any error in its cause chain) says Postgres cannot be reached, also when
 * it already is the catalog's `database_unavailable` (a batched call past its deadline,
 * libs/db/group-commit.ts).
 */
export function isDatabaseUnavailable(err: unknown): boolean {
  for (const e of causes(err)) {
    const code = e['code'];
    if (code === 'database_unavailable') return true;
    if (
      typeof code === 'string' &&
      (UNAVAILABLE_SQLSTATES.has(code) || UNAVAILABLE_ERRNOS.has(code) || UNAVAILABLE_PRISMA_CODES.has(code))
    ) {
      return true;
    }
    const original = e['originalCode'];
    if (typeof original === 'string' && UNAVAILABLE_SQLSTATES.has(original)) return true;
    const kind = e['kind'];
    if (kind === 'DatabaseNotReachable' || kind === 'ConnectionClosed' || kind === 'SocketTimeout') return true;
    const message = e['message'];
    if (typeof message === 'string' && UNAVAILABLE_MESSAGES.some((m) => message.includes(m))) return true;
    if (Array.isArray(e['errors']) && (e['errors'] as unknown[]).some((inner) => isDatabaseUnavailable(inner))) return true;
  }
  return false;
}

/** The SQLSTATE of a Postgres error anywhere in the cause chain (e.g. '23505'). */
export function sqlState(err: unknown): string | undefined {
  for (const e of causes(err)) {
    const code = e['code'];
    if (typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code)) return code;
    const original = e['originalCode'];
    if (typeof original === 'string') return original;
  }
  return undefined;
}

/**
 * Turns infrastructure failures into catalog errors; returns the error unchanged otherwise.
 * Callers wrap database calls with it at the edges (API error handler, worker loop).
 * `database_unavailable` does not say whether a write happened: its reply may be what was lost.
 */
export function classifyDatabaseError(err: unknown): unknown {
  if (err instanceof BatonError) return err;
  if (isDatabaseUnavailable(err)) {
    return new BatonError(
      'database_unavailable',
      'the database did not answer in time; a write may or may not have been recorded',
      undefined,
      { cause: err },
    );
  }
  return err;
}
