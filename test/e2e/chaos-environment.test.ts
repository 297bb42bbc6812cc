import { chmodSync, readFileSync } from 'node:fs';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ChaosEnvironment } from '../../services/chaos/chaos-environment.ts';
import { checkNoUnplannedExits } from '../../services/chaos/run-invariants.ts';
import { eventually } from '../support/eventually.ts';
import { scratchDir } from '../support/scratch-dir.ts';

/**
 * The chaos run's harness: an API's port is picked free when its slot is made, well before the
 * API binds it, and anything that opens a connection in between may get it as its local port.
 * A start that finds it taken moves the API to another port instead of failing the run. And the
 * exits it records are exactly those it did not cause: the run fails on each of them.
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

  it('records an exit it did not cause (and starts the process again), not a kill of its own', async () => {
    const slot = env.apis[0]!;
    const before = env.unexpectedExits.length;
    await env.kill(slot);
    expect(env.killedOnPurpose).toBe(1);
    await env.start(slot, true);
    expect(env.unexpectedExits.length, 'a kill of the run is no unexpected exit').toBe(before);
    // Killed by someone else: as if it had crashed.
    process.kill(slot.process!.pid, 'SIGKILL');
    await eventually(() => env.unexpectedExits.length > before, { timeoutMs: 10_000, what: 'the exit recorded' });
    expect(env.unexpectedExits.slice(before)).toMatchObject([{ slot: 'api-1', code: null, signal: 'SIGKILL', wasServing: true }]);
    expect(await env.serving(slot, 60_000), 'started again, as a supervisor would').toBe(true);
    // The port-taken start above is not counted; the crash is.
    const row = checkNoUnplannedExits(
      env.unexpectedExits,
      { started: env.processesStarted, killedOnPurpose: env.killedOnPurpose },
      Date.now(),
    );
    expect(row.violations).toBe(1);
    expect(row.details[0]).toMatch(/^api-1 exited \(signal SIGKILL\) while serving/);
    // Every start's whole output is kept, in order, with how each ended.
    const [file] = (await env.writeLogs(tmp)).filter((f) => f.endsWith('api-1.log'));
    const log = readFileSync(file!, 'utf8');
    const starts = [...log.matchAll(/^===== api-1 start (\d+) \(pid \d+\) exited: (\S+) =====$/gm)].map((m) => [Number(m[1]), m[2]]);
    expect(starts.slice(-2)).toEqual([
      [env.apis[0]!.starts - 2, 'SIGKILL'],
      [env.apis[0]!.starts - 1, 'SIGKILL'],
    ]);
    expect(log.match(/Baton API on/g)?.length).toBe(env.apis[0]!.starts - 1);
  }, 120_000);
});
