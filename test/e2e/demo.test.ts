import { chmodSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { spawnBaton } from '../support/spawn-baton.ts';
import { TEST_PG_ADMIN_URL, TEST_REDIS_URL } from '../support/env.ts';
import { scratchDir } from '../support/scratch-dir.ts';

// The demo's temp files go under a TMPDIR of this test's own (readable by the postgres user, as
// /tmp is): another test running a demo at the same time cannot make this one's check lie.
const tmp = scratchDir('baton-demo-test-');
chmodSync(tmp, 0o755);

async function demoDirs(): Promise<string[]> {
  return (await readdir(tmp)).filter((d) => d.startsWith('baton-demo-pg-'));
}

describe('baton demo on a fresh machine (no DATABASE_URL, no REDIS_URL)', () => {
  it('starts embedded Postgres and a private Redis, shows handoffs moving WAITING -> SENDING -> ACCEPTED -> RUNNING -> RETURNED, and cleans up on Ctrl+C', async () => {
    const before = await demoDirs();
    const demo = spawnBaton(['demo', '--think-ms', '150'], { TMPDIR: tmp });
    await demo.waitFor(/API: http:\/\/127\.0\.0\.1:\d+/, 60_000);
    expect(await demoDirs(), 'the embedded Postgres lives under TMPDIR while the demo runs').toHaveLength(1);
    for (const step of [/new\s+-> WAITING/, /WAITING\s+-> SENDING/, /SENDING\s+-> ACCEPTED/, /ACCEPTED\s+-> RUNNING/, /RUNNING\s+-> RETURNED/]) {
      await demo.waitFor(step, 30_000);
    }
    for (const agent of ['Planner', 'Engineer', 'Reviewer', 'Writer']) expect(demo.output()).toContain(agent);
    // Work events move the work, not the delivery state: they read `work claimed -> returned`.
    await demo.waitFor(/work \w+ -> returned/, 30_000);
    expect(demo.output(), 'no transition line from a state to itself').not.toMatch(/\b([A-Z_]+)\s+-> \1\b/);
    const t0 = Date.now();
    const code = await demo.stop('SIGINT', 30_000);
    expect(code, demo.output()).toBe(0);
    // Nothing left waiting (it took ~11 s: the embedded servers' stop timers were never cleared).
    expect(Date.now() - t0, 'Ctrl+C to exit').toBeLessThan(6_000);
    expect(demo.output()).toContain('demo data deleted');
    expect(before).toEqual([]);
    expect(await demoDirs()).toEqual(before);
  }, 120_000);
});

describe('baton demo --json', () => {
  it('prints one JSON object per line: started, the four agents, transitions to RETURNED, and stopped', async () => {
    const demo = spawnBaton(['demo', '--json', '--think-ms', '100', '--duration', '6'], { DATABASE_URL: TEST_PG_ADMIN_URL, REDIS_URL: TEST_REDIS_URL, BATON_LOG_LEVEL: 'silent' });
    const code = await demo.exited();
    expect(code, demo.output()).toBe(0);
    const lines = demo.output().split('\n').filter((l) => l.trim() !== '');
    const records = lines.map((l) => JSON.parse(l) as { type: string; [k: string]: unknown });
    expect(records[0]).toMatchObject({ type: 'started', api: expect.stringMatching(/^http:\/\/127\.0\.0\.1:\d+$/), livePage: expect.stringContaining('/ui/') });
    expect(records.filter((r) => r.type === 'agent_registered').map((r) => r['name'])).toEqual(['Planner', 'Engineer', 'Reviewer', 'Writer']);
    const transitions = records.filter((r) => r.type === 'transition') as unknown as Array<{ state: { from: string | null; to: string }; handoff: string }>;
    expect(transitions.some((t) => t.state.to === 'RETURNED')).toBe(true);
    expect(records.at(-1)).toEqual({ type: 'stopped' });
  }, 120_000);
});
