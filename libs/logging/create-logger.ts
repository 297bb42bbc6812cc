import { pino, type Logger, type LoggerOptions } from 'pino';
import { prettyDestination } from './pretty-destination.ts';

export type { Logger } from 'pino';

/**
 * Paths pino replaces with "[redacted]". Tokens, authorization headers and connection
 * strings (which carry passwords) never reach a log line.
 */
export const REDACT_PATHS = [
  'req.headers.authorization',
  'req.headers.cookie',
  'headers.authorization',
  'authorization',
  'token',
  '*.token',
  'secret',
  '*.secret',
  'password',
  '*.password',
  'databaseUrl',
  '*.databaseUrl',
  'redisUrl',
  '*.redisUrl',
];

/*
 * Standard field names, used the same way in every process: handoffId, agentId, attemptId,
 * requestId, jobId, queue, workerId. Errors go under `err`; untrusted payloads under `payload`.
 */

/**
 * Errors are logged as type, message, code, stack and cause only: driver errors carry their
 * whole client (connection settings, buffers) as enumerable fields, which must not reach logs.
 */
export function serializeError(err: unknown, depth = 0): unknown {
  if (!(err instanceof Error) || depth > 3) return err;
  const e = err as Error & { code?: unknown; cause?: unknown };
  const out: Record<string, unknown> = { type: e.name, message: e.message };
  if (typeof e.code === 'string' || typeof e.code === 'number') out['code'] = e.code;
  if (e.stack) out['stack'] = e.stack;
  if (e.cause !== undefined) out['cause'] = serializeError(e.cause, depth + 1);
  return out;
}

/**
 * An error as an `err` field without its stack or cause: type, the first line of its message,
 * code. For an outage (Redis or Postgres away), which is the setup's, not a bug: one short line.
 */
export function briefError(err: unknown): { type: string; message: string; code?: string } {
  const e = err as { name?: unknown; message?: unknown; code?: unknown } | undefined;
  return {
    type: typeof e?.name === 'string' ? e.name : 'Error',
    message: typeof e?.message === 'string' ? (e.message.split('\n')[0] ?? '') : String(err),
    ...(typeof e?.code === 'string' ? { code: e.code } : {}),
  };
}

/**
 * A pino logger with Baton's redaction list; `destination` lets tests capture lines. Without
 * one it writes to standard output: human-readable lines on a terminal, JSON lines otherwise.
 */
export function createLogger(
  /** `json`: JSON lines even on a terminal (the process commands' `--json`). */
  opts: { level: LoggerOptions['level']; name: string; json?: boolean },
  destination?: pino.DestinationStream,
): Logger {
  const options: LoggerOptions = {
    level: opts.level ?? 'info',
    name: opts.name,
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    serializers: { err: serializeError },
    base: { pid: process.pid },
  };
  if (destination) return pino(options, destination);
  return process.stdout.isTTY && opts.json !== true ? pino(options, prettyDestination()) : pino(options);
}
