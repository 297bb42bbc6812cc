import { pino, type Logger, type LoggerOptions } from 'pino';

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

/**
 * Standard field names, so every process logs the same thing the same way. Untrusted
 * payloads go under `payload`, errors under `err`.
 */
export const LOG_FIELDS = {
  handoffId: 'handoffId',
  agentId: 'agentId',
  attemptId: 'attemptId',
  requestId: 'requestId',
  jobId: 'jobId',
  queue: 'queue',
  workerId: 'workerId',
  payload: 'payload',
} as const;

/** A pino logger with Baton's redaction list; `destination` lets tests capture lines. */
export function createLogger(
  opts: { level: LoggerOptions['level']; name: string },
  destination?: pino.DestinationStream,
): Logger {
  const options: LoggerOptions = {
    level: opts.level ?? 'info',
    name: opts.name,
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    base: { pid: process.pid },
  };
  return destination ? pino(options, destination) : pino(options);
}
