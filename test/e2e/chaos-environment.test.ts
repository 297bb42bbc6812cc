import { chmodSync } from 'node:fs';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ChaosEnvironment } from '../../services/chaos/chaos-environment.ts';
import { scratchDir } from '../support/scratch-dir.ts';

/**
 * The chaos run's harness: an API's port is picked free when its slot is made, well before the
 * API binds it, and anything that opens a connection in between may get it as its local port.
 * A start that finds it taken moves the API to another port instead of failing the run.
 */

const tmp = scratchDir('baton-chaos-env-test-');
chmodSync(tmp, 0o755);
const savedTmp = process.env['TMPDIR'];
let env: ChaosEnvironment;

beforeAll(async () => {
  process.env['TMPDIR'] = tmp;
  env = await ChaosEnvironment.start({ apis: 1, workers: 0 });
}, 120_000);

afterAll(async () => {
  await env?.close();
  if (savedTmp === undefined) delete process.env['TMPDIR'];
  else process.env['TMPDIR'] = savedTmp;
});

describe('chaos environment', () => {
  it('starts an API whose port was taken after its slot was made on another port, and it serves there', async () => {
    const slot = env.apis[0]!;
    const first = slot.apiUrl!;
    const squatter = net.createServer();
    await new Promise<void>((resolve, reject) => {
      squatter.once('error', reject);
      squatter.listen(Number(new URL(first).port), '127.0.0.1', resolve);
    });
    try {
      await env.start(slot, true);
    } finally {
      squatter.close();
    }
    expect(slot.apiUrl).not.toBe(first);
    const res = await fetch(`${slot.apiUrl}/healthz`);
    expect(res.status).toBe(200);
    // The exit it made is on the record, as every exit the run did not cause.
    expect(env.unexpectedExits.map((e) => [e.slot, e.wasServing, /already in use/.test(e.reason)])).toEqual([['api-1', false, true]]);
  }, 120_000);
});
