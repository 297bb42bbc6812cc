import type { DestinationStream } from 'pino';

const LEVELS: Record<number, string> = { 10: 'TRACE', 20: 'DEBUG', 30: 'INFO', 40: 'WARN', 50: 'ERROR', 60: 'FATAL' };
/** Fields every line has, shown in the line's head rather than as key=value. */
const HEAD = new Set(['level', 'time', 'pid', 'hostname', 'name', 'msg']);

function value(v: unknown): string {
  if (typeof v === 'string') return /^[^\s"=]+$/.test(v) ? v : JSON.stringify(v);
  return JSON.stringify(v) ?? String(v);
}

/**
 * One pino JSON line as a line for a person: `12:00:01.123 INFO  baton-serve: api listening
 * url=http://…`, and an error's stack indented below it. The JSON went through pino's
 * redaction first, so nothing hidden there shows here.
 */
export function formatLogLine(line: string): string {
  let rec: Record<string, unknown>;
  try {
    rec = JSON.parse(line) as Record<string, unknown>;
  } catch {
    return line;
  }
  const time = typeof rec['time'] === 'number' ? new Date(rec['time']).toISOString().slice(11, 23) : '';
  const level = (LEVELS[rec['level'] as number] ?? String(rec['level'])).padEnd(5);
  const fields = Object.entries(rec)
    .filter(([k]) => !HEAD.has(k) && k !== 'err')
    .map(([k, v]) => `${k}=${value(v)}`);
  const err = rec['err'] as { type?: string; message?: string; code?: string; stack?: string } | undefined;
  if (err && typeof err === 'object')
    fields.push(`err=${value(`${err.type ?? 'Error'}${err.code ? ` ${err.code}` : ''}: ${err.message ?? ''}`)}`);
  const head = `${time} ${level} ${rec['name'] ? `${String(rec['name'])}: ` : ''}${String(rec['msg'] ?? '')}`;
  const stack = err?.stack
    ? `\n${err.stack
        .split('\n')
        .slice(1)
        .map((l) => `    ${l.trim()}`)
        .join('\n')}`
    : '';
  return `${[head, ...fields].join(' ')}${stack}\n`;
}

/**
 * A pino destination that writes human-readable lines to `out` (a terminal): what createLogger
 * uses when standard output is a terminal; anything else (a pipe, a file, a log collector) gets
 * pino's JSON lines unchanged.
 */
export function prettyDestination(out: { write(s: string): unknown } = process.stdout): DestinationStream {
  return {
    write(chunk: string) {
      for (const line of chunk.split('\n')) if (line !== '') out.write(formatLogLine(line));
    },
  };
}
