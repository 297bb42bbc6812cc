import { execFile } from 'node:child_process';
import { chmodSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import { promisify } from 'node:util';
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

const ID = '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}';
/** A settled handoff's line: time, id, from -> to, "title", outcome and how long it took. */
const SETTLED_LINE = new RegExp(
  `^\\d\\d:\\d\\d:\\d\\d  (${ID})  \\w+ -> \\w+ +"[^"]+" +(RETURNED|FAILED|CANCELLED|UNAVAILABLE|ACKNOWLEDGED|DUPLICATE) in \\d`,
);
const SUMMARY_LINE = /^ +-- settled \d+( \([A-Z]+ \d+(, [A-Z]+ \d+)*\))?, in flight \d+$/;

describe('baton demo on a fresh machine (no DATABASE_URL, no REDIS_URL)', () => {
  it('starts embedded Postgres and a private Redis, shows (--verbose) handoffs moving WAITING -> SENDING -> ACCEPTED -> RUNNING -> RETURNED, each line with its id, and cleans up on Ctrl+C', async () => {
    const before = await demoDirs();
    const demo = spawnBaton(['demo', '--verbose', '--think-ms', '150'], { TMPDIR: tmp });
    await demo.waitFor(/API: http:\/\/127\.0\.0\.1:\d+/, 60_000);
    expect(await demoDirs(), 'the embedded Postgres lives under TMPDIR while the demo runs').toHaveLength(1);
    for (const step of [
      /new\s+-> WAITING/,
      /WAITING\s+-> SENDING/,
      /SENDING\s+-> ACCEPTED/,
      /ACCEPTED\s+-> RUNNING/,
      /RUNNING\s+-> RETURNED/,
    ]) {
      // Every transition line names its handoff, so what is seen can be looked up.
      await demo.waitFor(new RegExp(`^\\d\\d:\\d\\d:\\d\\d  ${ID}  .*${step.source}`, 'm'), 30_000);
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

describe('baton demo without --verbose', () => {
  it('prints how to look a handoff up, then one line per settled handoff whose id the printed `show` command finds, summaries, and a last summary', async () => {
    const demo = spawnBaton(['demo', '--think-ms', '100'], {
      DATABASE_URL: TEST_PG_ADMIN_URL,
      REDIS_URL: TEST_REDIS_URL,
      BATON_LOG_LEVEL: 'silent',
    });
    const lookup = (await demo.waitFor(/^ +BATON_URL=\S+ BATON_TOKEN=\S+ BATON_PROJECT=demo-\w+ \S+ show <id>$/m, 60_000)).trim();
    // The summary line comes every 5 s: by then several handoffs have settled.
    await demo.waitFor(/^ +-- settled [1-9]/m, 60_000);
    const id = demo
      .output()
      .split('\n')
      .map((l) => SETTLED_LINE.exec(l)?.[1])
      .find((x) => x !== undefined);
    expect(id, demo.output()).toBeDefined();
    // The command works as printed: it names the API, token and project itself, whatever the
    // shell says (here: another URL and project, and a BATON_HOME with no profile).
    const shown = await promisify(execFile)('/bin/sh', ['-c', lookup.replace('<id>', id!)], {
      env: {
        PATH: process.env['PATH'],
        HOME: process.env['HOME'],
        BATON_HOME: scratchDir('baton-demo-show-'),
        BATON_URL: 'http://127.0.0.1:9',
        BATON_PROJECT: 'elsewhere',
      },
    });
    expect(shown.stdout).toContain(`handoff ${id}`);
    expect(shown.stdout).toMatch(/state\s+RETURNED/);
    const code = await demo.stop('SIGINT', 30_000);
    expect(code, demo.output()).toBe(0);

    const lines = demo.output().split('\n');
    const header = lines.findIndex((l) => /^time +handoff +from -> to +title +outcome$/.test(l));
    const last = lines.findIndex((l) => l.startsWith('demo summary: '));
    expect(header, demo.output()).toBeGreaterThan(0);
    expect(last, demo.output()).toBeGreaterThan(header);
    const body = lines.slice(header + 1, last);
    // At most one line per handoff, plus the summaries: no transitions without --verbose.
    const other = body.filter((l) => !SETTLED_LINE.test(l) && !SUMMARY_LINE.test(l));
    expect(other, 'every line is a settled handoff or a summary').toEqual([]);
    const ids = body.map((l) => SETTLED_LINE.exec(l)?.[1]).filter((x) => x !== undefined);
    expect(new Set(ids).size, 'each handoff has exactly one line').toBe(ids.length);
    expect(ids.length).toBeGreaterThanOrEqual(3);
    expect(body.filter((l) => SUMMARY_LINE.test(l)).length).toBeGreaterThanOrEqual(1);
    expect(lines[last], 'the last summary counts the lines printed').toMatch(
      new RegExp(`^demo summary: \\d+ handoffs sent in .+; settled ${ids.length} \\(RETURNED \\d+`),
    );
    expect(demo.output()).toContain('Live page: http://127.0.0.1:');
    expect(demo.output()).toContain('Ctrl+C stops everything');
    expect(demo.output()).toContain('demo data deleted');
  }, 120_000);
});

describe('baton demo --json', () => {
  it('prints one JSON object per line: started, the four agents, transitions to RETURNED, and stopped', async () => {
    const demo = spawnBaton(['demo', '--json', '--think-ms', '100', '--duration', '6'], {
      DATABASE_URL: TEST_PG_ADMIN_URL,
      REDIS_URL: TEST_REDIS_URL,
      BATON_LOG_LEVEL: 'silent',
    });
    const code = await demo.exited();
    expect(code, demo.output()).toBe(0);
    const lines = demo
      .output()
      .split('\n')
      .filter((l) => l.trim() !== '');
    const records = lines.map((l) => JSON.parse(l) as { type: string; [k: string]: unknown });
    expect(records[0]).toMatchObject({
      type: 'started',
      api: expect.stringMatching(/^http:\/\/127\.0\.0\.1:\d+$/),
      livePage: expect.stringContaining('/ui/'),
    });
    expect(records.filter((r) => r.type === 'agent_registered').map((r) => r['name'])).toEqual([
      'Planner',
      'Engineer',
      'Reviewer',
      'Writer',
    ]);
    const transitions = records.filter((r) => r.type === 'transition') as unknown as Array<{
      state: { from: string | null; to: string };
      handoff: string;
    }>;
    expect(transitions.some((t) => t.state.to === 'RETURNED')).toBe(true);
    // One `settled` object per handoff that settled, naming a handoff whose transitions were printed.
    const settled = records.filter((r) => r.type === 'settled') as unknown as Array<{ handoff: string; outcome: string; tookMs: number }>;
    expect(settled.length).toBeGreaterThan(0);
    expect(new Set(settled.map((s) => s.handoff)).size).toBe(settled.length);
    for (const s of settled) expect(transitions.some((t) => t.handoff === s.handoff && t.state.to === s.outcome)).toBe(true);
    expect(records.find((r) => r.type === 'stopping')).toMatchObject({
      settled: settled.length,
      outcomes: expect.objectContaining({ RETURNED: expect.any(Number) }),
    });
    expect(records.at(-1)).toEqual({ type: 'stopped' });
  }, 120_000);
});
