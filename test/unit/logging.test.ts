import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createLogger, serializeError } from '../../libs/logging/create-logger.ts';
import { prettyDestination } from '../../libs/logging/pretty-destination.ts';

function capture() {
  const lines: Array<Record<string, unknown>> = [];
  const stream = new Writable({
    write(chunk, _enc, done) {
      for (const line of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  return { lines, logger: createLogger({ level: 'info', name: 'test' }, stream) };
}

describe('logging', () => {
  it('redacts authorization headers, tokens, secrets and connection strings', () => {
    const { lines, logger } = capture();
    logger.info(
      {
        req: { headers: { authorization: 'Bearer s3cr3t', cookie: 'sid=1' } },
        token: 'tok_123',
        payload: { token: 'nested', secret: 'x' },
        config: { databaseUrl: 'postgresql://u:pw@h/db' },
      },
      'request',
    );
    const text = JSON.stringify(lines[0]);
    for (const secret of ['s3cr3t', 'sid=1', 'tok_123', 'nested', 'pw@h']) expect(text).not.toContain(secret);
    expect(text).toContain('[redacted]');
  });

  it('logs errors as type, message, code, stack and cause only (never a driver client)', () => {
    const inner = Object.assign(new Error('connect ECONNREFUSED'), {
      code: 'ECONNREFUSED',
      client: { password: 'pw', huge: 'x'.repeat(10_000) },
    });
    const outer = new Error('query failed', { cause: inner });
    const out = serializeError(outer) as Record<string, any>;
    expect(Object.keys(out).sort()).toEqual(['cause', 'message', 'stack', 'type']);
    expect(out['cause']).toMatchObject({ type: 'Error', message: 'connect ECONNREFUSED', code: 'ECONNREFUSED' });
    expect(JSON.stringify(out)).not.toContain('pw');
    const { lines, logger } = capture();
    logger.warn({ err: inner }, 'failed');
    expect(JSON.stringify(lines[0]).length).toBeLessThan(3_000);
  });

  it('writes human-readable lines for a terminal: level, name, message, fields, the error and its stack, still redacted', () => {
    let text = '';
    const logger = createLogger({ level: 'info', name: 'baton-serve' }, prettyDestination({ write: (s: string) => (text += s) }));
    logger.info({ url: 'http://127.0.0.1:8787', token: 'tok_123' }, 'api listening');
    logger.error({ err: new Error('boom') }, 'turn failed');
    const [first, second] = text.split('\n');
    expect(first).toMatch(/^\d\d:\d\d:\d\d\.\d{3} INFO {2}baton-serve: api listening url=http:\/\/127\.0\.0\.1:8787 token=\[redacted\]$/);
    expect(second).toMatch(/ERROR baton-serve: turn failed err="Error: boom"$/);
    expect(text).toMatch(/\n {4}at /);
    expect(text).not.toContain('tok_123');
    expect(text).not.toContain('{"level"');
  });
});
