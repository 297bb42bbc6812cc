import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, promises as fs } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCommandAdapter, inheritedEnv, type CommandAdapterOptions } from '../../libs/adapters/command/create-command-adapter.ts';
import { createRecord, pidAlive, recordDir } from '../../libs/adapters/command/run-record.ts';
import type { DeliveryTarget, ProviderAdapter, TurnRequest } from '../../libs/adapters/provider-adapter.ts';
import { eventually } from '../support/eventually.ts';

/**
 * The command adapter against real processes: every program is a small Node script written to a
 * temporary directory and run with this Node binary, under the adapter's real supervisor.
 */

const ADAPTER_MODULE = fileURLToPath(new URL('../../libs/adapters/command/create-command-adapter.ts', import.meta.url));
const PROJECT_ROOT = fileURLToPath(new URL('../../', import.meta.url));

let work: string;
let runDir: string;
const opened: ProviderAdapter[] = [];

function adapter(extra: Partial<CommandAdapterOptions> = {}): ProviderAdapter {
  const a = createCommandAdapter({ runDir, baseEnv: inheritedEnv(process.env), pollMs: 50, killGraceMs: 1_000, ...extra });
  opened.push(a);
  return a;
}

/** Writes a Node program to the work directory; returns its path. */
async function program(name: string, source: string): Promise<string> {
  const path = join(work, `${name}-${randomUUID().slice(0, 8)}.mjs`);
  await fs.writeFile(path, source);
  return path;
}

function target(script: string, settings: Record<string, unknown> = {}, agentId: string = randomUUID()): DeliveryTarget {
  return { agentId, handle: 'eng', target: null, settings: { argv: [process.execPath, script], ...settings } };
}

function turn(extra: Partial<TurnRequest> = {}): TurnRequest {
  return {
    requestId: randomUUID(),
    handoffId: randomUUID(),
    attempt: 1,
    from: 'planner',
    title: 'Login form',
    message: 'Add a login form',
    focus: null,
    doneWhen: null,
    context: { summary: null, openQuestions: [], nextSteps: [] },
    packet: '<context>\nsummary: none\n</context>',
    ...extra,
  };
}

const never = () => new AbortController().signal;

const alive = pidAlive;

async function follow(a: ProviderAdapter, t: DeliveryTarget, requestId: string) {
  let running = 0;
  const end = await a.waitForTurn(t, requestId, { onRunning: async () => void running++ }, never());
  return { end, running };
}

/** A program that waits until `gate` exists, printing `text` and exiting with `code` then. */
const gated = (gate: string, text: string, code = 0) => `
import { existsSync } from 'node:fs';
const t = setInterval(() => {
  if (existsSync(${JSON.stringify(gate)})) { clearInterval(t); process.stdout.write(${JSON.stringify(text)}); process.exitCode = ${code}; }
}, 20);
`;

beforeAll(async () => {
  work = await fs.mkdtemp(join(tmpdir(), 'baton-command-'));
  runDir = join(work, 'runs');
});

/** Stops every program a failed test left running (only the ones these tests started, by their recorded pids). */
async function stopLeftovers(): Promise<void> {
  for (const agent of await fs.readdir(runDir).catch(() => [] as string[])) {
    for (const request of await fs.readdir(join(runDir, agent)).catch(() => [] as string[])) {
      const dir = join(runDir, agent, request);
      if (existsSync(join(dir, 'exit.json'))) continue;
      for (const [file, field, group] of [
        ['started.json', 'programPid', true],
        ['claim', 'pid', false],
      ] as const) {
        try {
          const record = JSON.parse(await fs.readFile(join(dir, file), 'utf8')) as Record<string, unknown>;
          const pid = record[field];
          // An abandoned claim names the process that abandoned it (this one), not a supervisor.
          if (typeof pid === 'number' && pid > 0 && record['by'] !== 'abandoned') process.kill(group ? -pid : pid, 'SIGKILL');
        } catch {
          // Not started, or already gone.
        }
      }
    }
  }
}

afterAll(async () => {
  await stopLeftovers();
  await Promise.all(opened.map((a) => a.close()));
  await fs.rm(work, { recursive: true, force: true });
});

describe('command adapter: a turn is one program run', () => {
  it('exit 0 returns the standard output as the summary, after reporting the turn running once', async () => {
    const a = adapter();
    const t = target(await program('ok', `process.stdout.write('implemented the form\\n');`));
    const r = turn();
    expect(await a.sendTurn(t, r, never())).toMatchObject({ outcome: 'accepted' });
    const { end, running } = await follow(a, t, r.requestId);
    expect(end).toMatchObject({ status: 'returned', result: { summary: 'implemented the form', output: { exitCode: 0 } } });
    expect(running).toBe(1);
    expect(await a.observeTurn(t, r.requestId, never())).toMatchObject({
      found: true,
      status: 'returned',
      result: { summary: 'implemented the form' },
    });
    expect((await fs.stat(runDir)).mode & 0o777).toBe(0o700);
  });

  it('gives the program the configured and BATON_* variables, a minimal worker environment, the cwd, and the turn on stdin', async () => {
    process.env['WORKER_ONLY_SECRET'] = 'must-not-leak';
    try {
      const a = adapter();
      const cwd = await fs.mkdtemp(join(work, 'cwd-'));
      const script = await program(
        'env',
        `let input = '';
process.stdin.setEncoding('utf8');
for await (const chunk of process.stdin) input += chunk;
process.stdout.write(JSON.stringify({ env: process.env, cwd: process.cwd(), input }));`,
      );
      const t = target(script, { cwd, env: { MODEL: 'small', API_KEY: { value: 's3cret', secret: true } } });
      const r = turn({ attempt: 2, title: null });
      expect(await a.sendTurn(t, r, never())).toMatchObject({ outcome: 'accepted' });
      const { end } = await follow(a, t, r.requestId);
      expect(end.status).toBe('returned');
      const seen = JSON.parse(end.status === 'returned' ? end.result.summary : '{}') as {
        env: Record<string, string>;
        cwd: string;
        input: string;
      };
      expect(seen.env).toMatchObject({
        MODEL: 'small',
        API_KEY: 's3cret',
        BATON_HANDOFF_ID: r.handoffId,
        BATON_REQUEST_ID: r.requestId,
        BATON_ATTEMPT: '2',
        BATON_FROM: 'planner',
        BATON_TITLE: '',
        PATH: process.env['PATH'],
      });
      expect(seen.env['WORKER_ONLY_SECRET']).toBeUndefined();
      expect(await fs.realpath(seen.cwd)).toBe(await fs.realpath(cwd));
      expect(seen.input).toBe(`Add a login form\n\n<context>\nsummary: none\n</context>\n\nbaton-request-id: ${r.requestId}\n`);
    } finally {
      delete process.env['WORKER_ONLY_SECRET'];
    }
  });

  it('the busy exit code (75 by default, or the configured one) is a busy turn that did nothing', async () => {
    const a = adapter();
    const script = await program('busy', `process.stderr.write('still on the last task'); process.exit(Number(process.argv[2] ?? 75));`);
    const t = target(script);
    const r = turn();
    await a.sendTurn(t, r, never());
    expect((await follow(a, t, r.requestId)).end).toEqual({
      status: 'busy',
      detail: 'exit code 75 (busy, nothing done): still on the last task',
    });
    expect(await a.observeTurn(t, r.requestId, never())).toMatchObject({ found: true, status: 'busy' });

    const custom = target(script, { argv: [process.execPath, script, '9'], busyExitCode: 9 });
    const r2 = turn();
    await a.sendTurn(custom, r2, never());
    expect((await follow(a, custom, r2.requestId)).end).toMatchObject({ status: 'busy' });
  });

  it("the refused exit code (77 by default) is a refusal with the program's reason", async () => {
    const a = adapter();
    const t = target(await program('refuse', `process.stderr.write('not my repository'); process.exit(77);`));
    const r = turn();
    await a.sendTurn(t, r, never());
    expect((await follow(a, t, r.requestId)).end).toEqual({ status: 'rejected', reason: 'exit code 77 (refused): not my repository' });
    expect(await a.observeTurn(t, r.requestId, never())).toMatchObject({ found: true, status: 'rejected' });
  });

  it('any other exit is a failed turn carrying the bounded standard error', async () => {
    const a = adapter();
    const t = target(await program('fail', `process.stderr.write('x'.repeat(5000) + 'TAIL: tests failed'); process.exit(3);`), {
      maxOutputBytes: 256,
    });
    const r = turn();
    await a.sendTurn(t, r, never());
    const { end } = await follow(a, t, r.requestId);
    expect(end.status).toBe('failed');
    const error = end.status === 'failed' ? end.error : '';
    expect(error).toMatch(/^exit code 3: \[first \d+ bytes cut\]\n/);
    expect(error).toMatch(/TAIL: tests failed$/);
    expect(error.length).toBeLessThan(400);
  });

  it('the deadline kills the whole process group, a child of the program too, and fails the turn', async () => {
    const a = adapter();
    const pids = join(work, `pids-${randomUUID()}.json`);
    const script = await program(
      'hang',
      `import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
const child = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' });
writeFileSync(${JSON.stringify(pids)}, JSON.stringify({ program: process.pid, child: child.pid }));
setInterval(() => {}, 1000);`,
    );
    const t = target(script, { timeoutMs: 1_000 });
    const r = turn();
    await a.sendTurn(t, r, never());
    const started = await eventually(async () => JSON.parse(await fs.readFile(pids, 'utf8')) as { program: number; child: number }, {
      what: 'the program and its child started',
    });
    const { end } = await follow(a, t, r.requestId);
    expect(end).toMatchObject({ status: 'failed', error: expect.stringMatching(/^deadline exceeded \(1000 ms\): killed by SIGTERM/) });
    await eventually(() => !alive(started.program) && !alive(started.child), { what: 'the program and its child are gone' });
  });

  it('a second write of the same request id starts nothing and answers from the run record, even when both race', async () => {
    const runs = join(work, `runs-${randomUUID()}.log`);
    const gate = join(work, `gate-${randomUUID()}`);
    const t = target(
      await program(
        'count',
        `import { appendFileSync } from 'node:fs';
appendFileSync(${JSON.stringify(runs)}, 'run\\n');
${gated(gate, 'counted')}`,
      ),
    );
    const r = turn();
    // Two workers' adapters write the same request id at the same moment.
    const [first, second] = await Promise.all([adapter().sendTurn(t, r, never()), adapter().sendTurn(t, r, never())]);
    expect([first.outcome, second.outcome]).toEqual(['accepted', 'accepted']);
    const again = await adapter().sendTurn(t, r, never());
    expect(again).toMatchObject({ outcome: 'accepted', seen: { found: true } });
    await fs.writeFile(gate, '');
    expect((await follow(adapter(), t, r.requestId)).end).toMatchObject({ status: 'returned', result: { summary: 'counted' } });
    expect(await adapter().sendTurn(t, r, never())).toMatchObject({ outcome: 'accepted', seen: { found: true, status: 'returned' } });
    expect(await fs.readFile(runs, 'utf8')).toBe('run\n');
  });

  it('kill -9 of the supervisor mid-turn is observed as interrupted, and the orphaned program is stopped', async () => {
    const a = adapter();
    const pidFile = join(work, `pid-${randomUUID()}`);
    const t = target(
      await program(
        'long',
        `import { writeFileSync } from 'node:fs'; writeFileSync(${JSON.stringify(pidFile)}, String(process.pid)); setInterval(() => {}, 1000);`,
      ),
    );
    const r = turn();
    expect(await a.sendTurn(t, r, never())).toMatchObject({ outcome: 'accepted', seen: { status: 'running' } });
    const programPid = await eventually(
      async () => {
        const pid = Number(await fs.readFile(pidFile, 'utf8'));
        if (!(pid > 0)) throw new Error('no pid yet');
        return pid;
      },
      { what: 'the program wrote its pid' },
    );
    const claim = JSON.parse(await fs.readFile(join(recordDir(runDir, t.agentId, r.requestId), 'claim'), 'utf8')) as { pid: number };
    expect(await a.isBusy(t, never())).toBe(true);
    process.kill(claim.pid, 'SIGKILL');
    await eventually(() => !alive(claim.pid), { what: 'the supervisor is gone' });
    const seen = await adapter().observeTurn(t, r.requestId, never());
    expect(seen).toMatchObject({ found: true, status: 'interrupted', error: expect.stringMatching(/supervisor died/) });
    await eventually(() => !alive(programPid), { what: 'the orphaned program was stopped' });
    expect((await follow(a, t, r.requestId)).end).toMatchObject({ status: 'interrupted' });
    expect(await a.isBusy(t, never())).toBe(false);
  });

  it('a turn outlives the worker that wrote it: a new adapter in another process sees it busy and follows it to its end from the record', async () => {
    const gate = join(work, `gate-${randomUUID()}`);
    const t = target(await program('outlive', gated(gate, 'finished after the restart')));
    const r = turn();
    // A real worker process writes the turn and then dies by SIGKILL, as a crashed worker would.
    const worker = await program(
      'worker',
      `const { createCommandAdapter, inheritedEnv } = await import(${JSON.stringify(ADAPTER_MODULE)});
const a = createCommandAdapter({ runDir: ${JSON.stringify(runDir)}, baseEnv: inheritedEnv(process.env) });
const sent = await a.sendTurn(${JSON.stringify(t)}, ${JSON.stringify(r)}, new AbortController().signal);
process.stdout.write(JSON.stringify(sent));
process.kill(process.pid, 'SIGKILL');`,
    );
    const out = await new Promise<{ stdout: string; signal: string | null }>((resolve, reject) => {
      const child = spawn(process.execPath, ['--import', 'tsx', worker], { cwd: PROJECT_ROOT, stdio: ['ignore', 'pipe', 'inherit'] });
      let stdout = '';
      child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
      child.once('error', reject);
      child.once('close', (_code, signal) => resolve({ stdout, signal }));
    });
    expect(out.signal).toBe('SIGKILL');
    expect(JSON.parse(out.stdout)).toMatchObject({ outcome: 'accepted' });

    const next = adapter();
    expect(await next.isBusy(t, never())).toBe(true);
    expect(await next.observeTurn(t, r.requestId, never())).toEqual({ found: true, status: 'running' });
    // The same turn is never started again, and another turn for the agent is busy: nothing starts.
    expect(await next.sendTurn(t, r, never())).toMatchObject({ outcome: 'accepted', seen: { status: 'running' } });
    const other = turn();
    expect(await next.sendTurn(t, other, never())).toEqual({ outcome: 'busy', detail: 'a turn of this agent is still running' });
    expect(existsSync(recordDir(runDir, t.agentId, other.requestId))).toBe(false);
    const following = follow(next, t, r.requestId);
    await fs.writeFile(gate, '');
    const { end, running } = await following;
    expect(end).toMatchObject({ status: 'returned', result: { summary: 'finished after the restart' } });
    expect(running).toBe(1);
    expect(await next.isBusy(t, never())).toBe(false);
  });

  it("waitForTurn rejects with the signal's reason on abort while the program keeps running", async () => {
    const a = adapter();
    const gate = join(work, `gate-${randomUUID()}`);
    const t = target(await program('abort', gated(gate, 'done anyway')));
    const r = turn();
    await a.sendTurn(t, r, never());
    const ctl = new AbortController();
    let running = false;
    const waiting = a.waitForTurn(t, r.requestId, { onRunning: async () => void (running = true) }, ctl.signal);
    await eventually(() => running, { what: 'the turn seen running' });
    const reason = new Error('lock lost');
    ctl.abort(reason);
    await expect(waiting).rejects.toBe(reason);
    expect(await a.observeTurn(t, r.requestId, never())).toEqual({ found: true, status: 'running' });
    await fs.writeFile(gate, '');
    expect((await follow(a, t, r.requestId)).end).toMatchObject({ status: 'returned', result: { summary: 'done anyway' } });
  });
});

describe('command adapter: what is provably never started', () => {
  it('a missing program or working directory is a refusal, and nothing runs', async () => {
    const a = adapter();
    const missing = target(join(work, 'no-such-program'), { argv: [join(work, 'no-such-program')] });
    const r = turn();
    expect(await a.sendTurn(missing, r, never())).toMatchObject({
      outcome: 'rejected',
      reason: expect.stringMatching(/cannot start .*no-such-program/),
    });
    expect(await a.observeTurn(missing, r.requestId, never())).toMatchObject({ found: true, status: 'rejected' });

    const noCwd = target(await program('ok', `process.stdout.write('ran');`), { cwd: join(work, 'no-such-dir') });
    expect(await a.sendTurn(noCwd, turn(), never())).toMatchObject({
      outcome: 'rejected',
      reason: expect.stringMatching(/working directory .* does not exist/),
    });
    expect(await a.isBusy(noCwd, never())).toBe(false);
  });

  it('settings that are not valid are refused at the write, and nothing runs', async () => {
    const a = adapter();
    const t: DeliveryTarget = { agentId: randomUUID(), handle: 'eng', target: null, settings: { argv: [], shell: true } };
    expect(await a.sendTurn(t, turn(), never())).toMatchObject({
      outcome: 'rejected',
      reason: expect.stringMatching(/settings are not valid/),
    });
    expect(existsSync(join(runDir, t.agentId))).toBe(false);
  });

  it('a request with no run record is absent from a complete history', async () => {
    const a = adapter();
    expect(await a.observeTurn(target('/bin/true'), randomUUID(), never())).toEqual({ found: false, complete: true });
  });

  it('a reservation whose worker died before starting the supervisor reads as never started, and a late supervisor starts nothing', async () => {
    const marker = join(work, `ran-${randomUUID()}`);
    const t = target(await program('late', `import { writeFileSync } from 'node:fs'; writeFileSync(${JSON.stringify(marker)}, 'ran');`));
    const r = turn();
    const dead = spawn(process.execPath, ['-e', '']);
    const deadPid = dead.pid as number;
    await new Promise((resolve) => dead.once('exit', resolve));
    await fs.mkdir(runDir, { recursive: true, mode: 0o700 });
    const dir = recordDir(runDir, t.agentId, r.requestId);
    await createRecord(
      runDir,
      {
        requestId: r.requestId,
        agentId: t.agentId,
        handoffId: r.handoffId,
        attempt: 1,
        reservedAt: Date.now(),
        reserverPid: deadPid,
        argv: t.settings['argv'] as string[],
        cwd: null,
        timeoutMs: 60_000,
        maxOutputBytes: 1024,
        busyExitCode: 75,
        refusedExitCode: 77,
      },
      'late turn',
    );
    const a = adapter();
    expect(await a.isBusy(t, never())).toBe(false);
    expect(await a.observeTurn(t, r.requestId, never())).toEqual({ found: false, complete: true });
    // The supervisor of that dead worker arrives only now: the start was abandoned, so it does nothing.
    const supervisor = spawn(
      process.execPath,
      [fileURLToPath(new URL('../../libs/adapters/command/command-supervisor.mjs', import.meta.url)), dir],
      { stdio: ['pipe', 'ignore', 'inherit'] },
    );
    supervisor.stdin.end(JSON.stringify({ argv: t.settings['argv'], cwd: null, env: {}, timeoutMs: 60_000, killGraceMs: 1_000 }));
    const code = await new Promise((resolve) => supervisor.once('exit', resolve));
    expect(code).toBe(0);
    expect(existsSync(join(dir, 'started.json'))).toBe(false);
    expect(existsSync(marker)).toBe(false);
    expect(await a.sendTurn(t, r, never())).toMatchObject({ outcome: 'not_sent' });
  });
});
