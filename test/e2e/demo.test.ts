import { readdir } from 'node:fs/promises';
import os from 'node:os';
import { describe, expect, it } from 'vitest';
import { spawnBaton } from '../support/spawn-baton.ts';

async function demoDirs(): Promise<string[]> {
  return (await readdir(os.tmpdir())).filter((d) => d.startsWith('baton-demo-pg-'));
}

describe('baton demo on a fresh machine (no DATABASE_URL, no REDIS_URL)', () => {
  it('starts embedded Postgres and a private Redis, shows handoffs moving WAITING -> SENDING -> ACCEPTED -> RUNNING -> RETURNED, and cleans up on Ctrl+C', async () => {
    const before = await demoDirs();
    const demo = spawnBaton(['demo', '--think-ms', '150'], {});
    await demo.waitFor(/API: http:\/\/127\.0\.0\.1:\d+/, 60_000);
    for (const step of [/new\s+-> WAITING/, /WAITING\s+-> SENDING/, /SENDING\s+-> ACCEPTED/, /ACCEPTED\s+-> RUNNING/, /RUNNING\s+-> RETURNED/]) {
      await demo.waitFor(step, 30_000);
    }
    for (const agent of ['Planner', 'Engineer', 'Reviewer', 'Writer']) expect(demo.output()).toContain(agent);
    const code = await demo.stop('SIGINT', 30_000);
    expect(code, demo.output()).toBe(0);
    expect(demo.output()).toContain('demo data deleted');
    expect(await demoDirs()).toEqual(before);
  }, 120_000);
});
