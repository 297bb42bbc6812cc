import { randomInt } from 'node:crypto';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import os from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runBaton, spawnBaton } from '../support/spawn-baton.ts';

/**
 * The short chaos run (`baton chaos --short`, the compiled CLI as `npm run chaos` runs it): its
 * own Postgres, Redis, 2 API and 3 worker processes behind fault proxies, 60 demo agents, 400
 * handoffs sent while workers are SIGKILLed and restarted, Redis and Postgres restarted, and
 * the proxies add latency, stall and drop connections. Every invariant must hold, and every
 * kind of fault must actually have been injected, so the run cannot pass by breaking nothing.
 * The seed is random (the plan and the fault schedule differ per run); a failure prints it and
 * `baton chaos --short --seed <seed>` replays the same plan.
 */

const INVARIANTS = [
  'every handoff in a final state',
  'no request id written twice',
  'no two turns of one agent overlapping',
  'each push handoff written once, as its state says',
  'per-agent order kept',
  'no send answered 201 lost',
  'no claim held by two agents',
  'last fault to all final',
  'no Baton process exited unplanned',
];
const FAULT_KINDS = ['worker_kill', 'api_kill', 'redis_restart', 'postgres_restart', 'proxy_latency', 'proxy_stall', 'proxy_drop'];

// The run's temp directories (its BATON_HOME, the embedded Postgres) go under a TMPDIR of this
// test's own, readable by the postgres user as /tmp is, so the clean-up check sees only them.
const tmp = mkdtempSync(join(os.tmpdir(), 'baton-chaos-test-'));
chmodSync(tmp, 0o755);

// A failed run keeps its processes' logs there (the failure names the directory): keep those.
afterAll(async () => {
  if (!(await readdir(tmp)).some((d) => d.startsWith('baton-chaos-logs-'))) rmSync(tmp, { recursive: true, force: true });
});

/** Processes still running whose command line or environment names the run's TMPDIR (Postgres, Baton). */
async function leftovers(): Promise<string[]> {
  const found: string[] = [];
  for (const pid of (await readdir('/proc')).filter((d) => /^\d+$/.test(d))) {
    const [cmdline, environ] = await Promise.all([
      readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => ''),
      readFile(`/proc/${pid}/environ`, 'utf8').catch(() => ''),
    ]);
    if (cmdline.includes(tmp) || environ.includes(tmp)) found.push(`${pid}: ${cmdline.replaceAll('\0', ' ').trim()}`);
  }
  return found;
}

describe('baton chaos --short', () => {
  it('keeps every invariant under every kind of fault, and cleans up after itself', async () => {
    const seed = randomInt(2 ** 31 - 1);
    const started = Date.now();
    const { code, output } = await runBaton(['chaos', '--short', '--json', '--seed', String(seed)], { TMPDIR: tmp }, 280_000);
    const seconds = (Date.now() - started) / 1000;
    const start = output.indexOf('{\n');
    const end = output.indexOf('\n}', start);
    expect(start, `no JSON result (seed ${seed}):\n${output.slice(-4000)}`).toBeGreaterThanOrEqual(0);
    const r = JSON.parse(output.slice(start, end + 2));
    const why = `seed ${seed}, ${seconds.toFixed(0)} s:\n${output.slice(-6000)}`;

    expect(
      r.invariants.map((i: { name: string }) => i.name),
      why,
    ).toEqual(INVARIANTS);
    for (const i of r.invariants) expect(i.violations, `${i.name}: ${i.checked}\n${i.details.join('\n')}\n${why}`).toBe(0);
    for (const kind of FAULT_KINDS) {
      const f = r.faults.find((x: { kind: string }) => x.kind === kind);
      expect(f?.count, `fault ${kind} injected at least once (${why})`).toBeGreaterThanOrEqual(1);
    }
    // The load was the one asked for: every send answered, turns written, work claimed.
    expect(r.traffic.sends).toBe(400);
    expect(r.traffic.answered).toBe(400);
    expect(r.traffic.turnsLanded, why).toBeGreaterThan(300);
    expect(r.traffic.claims.claims, why).toBeGreaterThan(0);
    expect(r.traffic.workerProcessesStarted, 'killed workers were replaced').toBeGreaterThan(3);
    expect(r.ok).toBe(true);
    expect(code, why).toBe(0);
    // Cleaned up: no process of the run left, no temp directory, no logs kept for a passing run.
    expect(r.logs).toBeNull();
    expect(await leftovers(), 'processes of the run still running').toEqual([]);
    expect(await readdir(tmp), 'temp directories of the run left behind').toEqual([]);
  }, 300_000);

  it('--starved: the busy processes it spins beside Baton end with the run, also when it is interrupted (SIGINT)', async () => {
    const p = spawnBaton(['chaos', '--short', '--starved'], { TMPDIR: tmp });
    try {
      await p.waitFor(/chaos: starved: \d+ busy processes/, 240_000);
      const busy = (await leftovers()).filter((l) => l.includes('deadline = Number'));
      expect(busy.length, `busy processes running:\n${p.output().slice(-2_000)}`).toBeGreaterThanOrEqual(os.availableParallelism());
      p.child.kill('SIGINT');
      expect(await p.exited(), p.output().slice(-4_000)).toBe(130);
    } finally {
      await p.stop('SIGKILL');
    }
    expect(await leftovers(), 'processes of the run still running').toEqual([]);
    expect(await readdir(tmp), 'temp directories of the run left behind').toEqual([]);
  }, 300_000);
});
