import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { transcriptPath } from '../../libs/adapters/claude-code/transcript.ts';
import { agentCli } from '../support/agent-clis.ts';
import { eventually } from '../support/eventually.ts';
import { anthropicProtocol } from '../support/fake-models/anthropic.ts';
import { startEgressTripwire, type EgressTripwire } from '../support/fake-models/egress-tripwire.ts';
import { startFakeModelServer, type FakeModelServer } from '../support/fake-models/fake-model-server.ts';
import { spawnBaton, type BatonProcess } from '../support/spawn-baton.ts';
import { startTestBaton, type TestBaton } from '../support/test-baton.ts';
import { waitForState } from '../support/wait-for-state.ts';

/**
 * kill -9 of a real `baton worker` in the middle of a real Claude Code turn: the claude process
 * outlives the worker under its supervisor, and the next worker observes the turn to its end
 * from the run record. The session receives the turn once; the model's answer is the summary.
 */

let baton: TestBaton;
let root: string;
let fake: FakeModelServer;
let tripwire: EgressTripwire;
const workers: BatonProcess[] = [];
const MARKER = /^baton-request-id: (\S+)\s*$/m;

function startWorker(): BatonProcess {
  const w = spawnBaton(['worker'], {
    DATABASE_URL: baton.databaseUrl,
    REDIS_URL: process.env['TEST_REDIS_URL'] ?? 'redis://127.0.0.1:6379',
    BATON_REDIS_PREFIX: baton.prefix,
    BATON_QUEUE_SHARDS: '2',
    BATON_WORKER_PROVIDERS: 'claude_code',
    BATON_CLAUDE_CODE_RUN_DIR: join(root, 'runs'),
    BATON_LOG_LEVEL: 'warn',
    BATON_TURN_LOCK_TTL_MS: '1000',
    BATON_JOB_LOCK_MS: '1000',
    BATON_STALLED_INTERVAL_MS: '300',
    BATON_RECONCILE_INTERVAL_MS: '300',
  });
  workers.push(w);
  return w;
}

beforeAll(async () => {
  baton = await startTestBaton({ queueShards: 2 });
  root = mkdtempSync(join(tmpdir(), 'baton-claude-restart-'));
  fake = await startFakeModelServer([anthropicProtocol]);
  tripwire = await startEgressTripwire();
  expect((await baton.post('/v1/agents', { id: 'lead', provider: 'manual' })).status).toBe(201);
});

afterAll(async () => {
  await Promise.all(workers.map((w) => w.stop('SIGKILL')));
  await baton?.stop();
  await fake?.close();
  await tripwire?.close();
  rmSync(root, { recursive: true, force: true });
});

describe('a worker killed in the middle of a Claude Code turn', () => {
  it('kill -9: the next worker observes the running claude turn to its end; the session gets it once and the answer is the summary', async () => {
    let release = () => undefined as void;
    const held = new Promise<void>((resolve) => (release = resolve));
    fake.script(() => ({ kind: 'reply', text: 'finished after the worker died', until: held }));
    const cwd = join(root, 'work');
    mkdirSync(cwd, { recursive: true });
    mkdirSync(join(root, 'home'), { recursive: true });
    const settings = {
      cwd,
      binary: agentCli('claude'),
      configDir: join(root, 'claude-config'),
      apiKey: 'fake',
      env: { ANTHROPIC_BASE_URL: fake.url, CLAUDE_CODE_MAX_RETRIES: '0', HOME: join(root, 'home'), ...tripwire.env() },
    };
    expect((await baton.post('/v1/agents', { id: 'coder', provider: 'claude_code', settings })).status).toBe(201);
    const first = startWorker();
    const sent = await baton.post('/v1/handoffs', { from: 'lead', to: 'coder', title: 'a long turn', message: 'take your time' });
    expect(sent.status).toBe(201);
    const id = sent.body.id as string;
    const running = await waitForState(baton, id, 'RUNNING', 30_000);
    const requestId = running.attempts.at(-1).requestId as string;
    // Mid-turn: claude is at the model (held there) when the worker dies.
    await eventually(() => expect(fake.exchanges).toHaveLength(1), { what: 'the turn at the model', timeoutMs: 30_000 });
    await first.stop('SIGKILL');
    const groups = readdirSync(join(root, 'runs'));
    const started = JSON.parse(readFileSync(join(root, 'runs', groups[0]!, requestId, 'started.json'), 'utf8')) as { programPid: number };
    expect(() => process.kill(started.programPid, 0), 'claude outlives the killed worker').not.toThrow();
    startWorker();
    release();
    const h = await waitForState(baton, id, 'RETURNED', 60_000);
    expect(
      h.attempts.filter((a: any) => a.status !== 'not_sent').map((a: any) => a.requestId),
      JSON.stringify(h.events.map((e: any) => [e.event, e.reason])),
    ).toEqual([requestId]);
    expect(h.resultSummary ?? h.result?.summary).toBe('finished after the worker died');
    // Written once: one model request with the marker, one prompt in the session's transcript.
    expect(fake.exchanges.map((ex) => MARKER.exec(ex.prompt)?.[1])).toEqual([requestId]);
    const sessionId = String(fake.exchanges[0]!.headers['x-claude-code-session-id']);
    const transcript = readFileSync(transcriptPath(settings.configDir, cwd, sessionId), 'utf8');
    expect(transcript.split('\n').filter((l) => l.includes('"type":"user"') && l.includes(`baton-request-id: ${requestId}`))).toHaveLength(
      1,
    );
    expect(tripwire.attempts).toEqual([]);
  }, 120_000);
});
