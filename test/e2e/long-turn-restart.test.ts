import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SPAWNED_FIRST_TURN_MS, spawnBaton, type BatonProcess } from '../support/spawn-baton.ts';
import { startTestBaton, type TestBaton } from '../support/test-baton.ts';
import { waitForState } from '../support/wait-for-state.ts';

/**
 * A worker restarted in the middle of a long turn must not start it again: the next worker
 * follows the running program to its end from its run record. Real worker processes, a real
 * program under the command adapter's supervisor; the worker is killed (SIGKILL) or stopped
 * with a grace shorter than the turn (SIGTERM).
 */

const AGENT = `
import { appendFileSync } from 'node:fs';
appendFileSync(process.argv[2], 'start ' + process.env.BATON_REQUEST_ID + '\\n');
setTimeout(() => {
  appendFileSync(process.argv[2], 'end ' + process.env.BATON_REQUEST_ID + '\\n');
  process.stdout.write('finished the long turn');
}, Number(process.argv[3]));
`;

let baton: TestBaton;
let root: string;
const workers: BatonProcess[] = [];

function startWorker(graceMs = 5_000): BatonProcess {
  const w = spawnBaton(['worker'], {
    DATABASE_URL: baton.databaseUrl,
    REDIS_URL: process.env['TEST_REDIS_URL'] ?? 'redis://127.0.0.1:6379',
    BATON_REDIS_PREFIX: baton.prefix,
    BATON_QUEUE_SHARDS: '2',
    BATON_WORKER_PROVIDERS: 'command',
    BATON_COMMAND_RUN_DIR: join(root, 'runs'),
    BATON_LOG_LEVEL: 'warn',
    BATON_TURN_LOCK_TTL_MS: '1000',
    BATON_JOB_LOCK_MS: '1000',
    BATON_STALLED_INTERVAL_MS: '300',
    BATON_RECONCILE_INTERVAL_MS: '300',
    BATON_SHUTDOWN_GRACE_MS: String(graceMs),
  });
  workers.push(w);
  return w;
}

beforeAll(async () => {
  baton = await startTestBaton({ queueShards: 2 });
  root = mkdtempSync(join(tmpdir(), 'baton-long-turn-'));
  writeFileSync(join(root, 'agent.mjs'), AGENT);
  expect((await baton.post('/v1/agents', { id: 'lead', provider: 'manual' })).status).toBe(201);
});

afterAll(async () => {
  await Promise.all(workers.map((w) => w.stop('SIGKILL')));
  await baton?.stop();
  rmSync(root, { recursive: true, force: true });
});

async function longTurn(handle: string, ms: number): Promise<{ id: string; ledger: string }> {
  const ledger = join(root, `${handle}.log`);
  writeFileSync(ledger, '');
  const agent = await baton.post('/v1/agents', {
    id: handle,
    provider: 'command',
    settings: { argv: [process.execPath, join(root, 'agent.mjs'), ledger, String(ms)] },
  });
  expect(agent.status, JSON.stringify(agent.body)).toBe(201);
  const sent = await baton.post('/v1/handoffs', { from: 'lead', to: handle, title: 'a long turn', message: 'take your time' });
  expect(sent.status).toBe(201);
  return { id: sent.body.id as string, ledger };
}

const starts = (ledger: string) =>
  readFileSync(ledger, 'utf8')
    .split('\n')
    .filter((l) => l.startsWith('start '));

/**
 * The attempts that reached the program. (A worker starved of CPU may fail to prove its lock
 * within the bounded check before a write: that attempt is `not_sent`, `lock_lost`, and never
 * reached anything; it is no resend.)
 */
const written = (h: any): string[] => h.attempts.filter((a: any) => a.status !== 'not_sent').map((a: any) => a.requestId);
const live = (h: any): string => h.attempts[h.attempts.length - 1].requestId;

describe('a worker restarted in the middle of a long turn', () => {
  it(
    'killed with SIGKILL: the next worker observes the running program to its end and never starts it again',
    async () => {
      const first = startWorker();
      const { id, ledger } = await longTurn('killed', 4_000);
      const running = await waitForState(baton, id, 'RUNNING', SPAWNED_FIRST_TURN_MS);
      await first.stop('SIGKILL');
      startWorker();
      const h = await waitForState(baton, id, 'RETURNED', SPAWNED_FIRST_TURN_MS);
      expect(written(h), JSON.stringify(h.events.map((e: any) => [e.event, e.reason]))).toEqual([live(running)]);
      expect(h.resultSummary ?? h.result?.summary ?? JSON.stringify(h)).toContain('finished the long turn');
      expect(starts(ledger)).toEqual([`start ${live(running)}`]);
    },
    3 * SPAWNED_FIRST_TURN_MS,
  );

  it(
    'stopped with SIGTERM and a grace shorter than the turn: handed back, then followed to its end, never resent',
    async () => {
      const first = startWorker(300);
      const { id, ledger } = await longTurn('handed-back', 4_000);
      const running = await waitForState(baton, id, 'RUNNING', SPAWNED_FIRST_TURN_MS);
      await first.stop('SIGTERM');
      expect(first.child.exitCode !== null || first.child.signalCode !== null).toBe(true);
      startWorker();
      const h = await waitForState(baton, id, 'RETURNED', SPAWNED_FIRST_TURN_MS);
      expect(written(h), JSON.stringify(h.events.map((e: any) => [e.event, e.reason]))).toEqual([live(running)]);
      expect(starts(ledger)).toEqual([`start ${live(running)}`]);
    },
    3 * SPAWNED_FIRST_TURN_MS,
  );
});
