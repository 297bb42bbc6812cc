import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { createAdapters } from '../../libs/adapters/create-adapters.ts';
import { AdapterRegistry } from '../../libs/adapters/adapter-registry.ts';
import { DemoAgentHost } from '../../libs/adapters/demo/demo-agent-host.ts';
import type { ProviderAdapter } from '../../libs/adapters/provider-adapter.ts';
import { createProviderStatusCheck } from '../../libs/adapters/provider-status.ts';
import { systemClock } from '../../libs/domain/clock.ts';
import { registerAgent } from '../../libs/handoffs/manage-agents.ts';
import { openRedis } from '../../libs/queue/open-redis.ts';
import { freePort, startPrivateRedis, type Started } from '../../libs/processes/embedded-infra.ts';
import { startDeliveryWorker, type RunningDeliveryWorker } from '../../workers/delivery/start-delivery-worker.ts';
import { startReconciler } from '../../workers/timers/start-reconciler.ts';
import { TEST_REDIS_URL } from '../support/env.ts';
import { eventually } from '../support/eventually.ts';
import { spawnBaton, type BatonProcess } from '../support/spawn-baton.ts';
import { startTestBaton, type TestBaton } from '../support/test-baton.ts';
import { waitForState } from '../support/wait-for-state.ts';

/**
 * Two deployments (two Redis prefixes, so two sets of queues and turn locks) on one database
 * never touch each other's agents. Deployment A has, at the same time, a handoff waiting for
 * a worker, a write held between its reservation and the adapter call (SENDING), a turn running,
 * a turn whose reply was lost (UNCERTAIN) and a handoff BUSY behind a live turn. The other
 * deployment's worker and reconciler run many passes meanwhile; none of A's turns may move
 * because of them, none may be observed or written by them. Then A's own worker delivers
 * every one, each with one write. The first test runs the other deployment in this process
 * with short intervals; the second is a real `baton demo` started with A's DATABASE_URL.
 */

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  // Teardown is best effort: each cleanup runs whatever the one before did.
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});
afterAll(async () => {
  // Teardown is best effort: each cleanup runs whatever the one before did.
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

/** A gate that holds an adapter write until `open()`. */
function gate() {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { opened, open };
}

/** Every adapter call, with the agent it was for: what a deployment did to which agents. */
function recording(adapters: AdapterRegistry, calls: Array<{ call: string; agentId: string }>): AdapterRegistry {
  const wrap = (a: ProviderAdapter): ProviderAdapter => ({
    provider: a.provider,
    ...(a.reportsBusyOnSend !== undefined ? { reportsBusyOnSend: a.reportsBusyOnSend } : {}),
    sendTurn: (t, turn, s) => (calls.push({ call: 'sendTurn', agentId: t.agentId }), a.sendTurn(t, turn, s)),
    observeTurn: (t, id, s) => (calls.push({ call: 'observeTurn', agentId: t.agentId }), a.observeTurn(t, id, s)),
    isBusy: (t, s) => (calls.push({ call: 'isBusy', agentId: t.agentId }), a.isBusy(t, s)),
    waitForTurn: (t, id, h, s) => (calls.push({ call: 'waitForTurn', agentId: t.agentId }), a.waitForTurn(t, id, h, s)),
    close: () => a.close(),
  });
  return new AdapterRegistry(adapters.providers().map((p) => wrap(adapters.get(p)!)));
}

interface InFlight {
  /** Agent ids of deployment A, by handle. */
  agents: Record<'idle' | 'sending' | 'running' | 'uncertain', string>;
  /** Handoff ids, by what they are doing. */
  handoffs: { waiting: string; sending: string; behindSending: string; running: string; uncertain: string };
  release: () => void;
}

/** Whether the agent waits in a wake-up set of `baton`'s deployment (any of its delivery queues). */
async function wokenOn(baton: TestBaton, agentId: string): Promise<boolean> {
  for (const key of await baton.redis.keys(`${baton.prefix}:*:wake-ups`)) {
    if ((await baton.redis.zscore(key, agentId)) !== null) return true;
  }
  return false;
}

/** Deployment A's agents (registered through A's API, so they belong to A). */
async function registerAgentsOfA(a: TestBaton): Promise<InFlight['agents']> {
  expect((await a.post('/v1/agents', { id: 'origin', provider: 'manual' })).status).toBe(201);
  const ids: Record<string, string> = {};
  for (const [handle, settings] of [
    ['idle', { thinkMs: 20 }],
    ['sending', { thinkMs: 20 }],
    ['running', { behavior: 'hang' }],
    ['uncertain', { behavior: 'hang' }],
  ] as const) {
    const res = await a.post('/v1/agents', { id: handle, provider: 'demo', settings });
    expect(res.status).toBe(201);
    expect(res.body.deployment, 'an agent belongs to the deployment of the API that registered it').toBe(a.prefix);
    ids[handle] = (await a.db.pool.query<{ id: string }>(`SELECT id FROM agents WHERE handle = $1`, [handle])).rows[0]!.id;
  }
  a.host.script('uncertain', ['lose_reply']);
  return ids;
}

async function send(a: TestBaton, to: string, title: string): Promise<string> {
  const res = await a.post('/v1/handoffs', { from: 'origin', to, title, message: title });
  expect(res.status).toBe(201);
  return res.body.id as string;
}

/** Starts A's worker and puts a turn in each live state; `release()` lets them all finish. */
async function putTurnsInFlight(a: TestBaton, agents: InFlight['agents'], waiting: string): Promise<InFlight> {
  const held = gate();
  a.startWorker({ hooks: { beforeWrite: async (agentId) => (agentId === agents.sending ? held.opened : undefined) } });
  await waitForState(a, waiting, 'RETURNED');
  const sending = await send(a, 'sending', 'held between reservation and write');
  await waitForState(a, sending, 'SENDING');
  const behindSending = await send(a, 'sending', 'queued behind the live turn');
  await waitForState(a, behindSending, 'BUSY');
  const running = await send(a, 'running', 'a long turn');
  await waitForState(a, running, 'RUNNING');
  const uncertain = await send(a, 'uncertain', 'a turn whose reply was lost');
  await waitForState(a, uncertain, 'UNCERTAIN');
  return {
    agents,
    handoffs: { waiting, sending, behindSending, running, uncertain },
    release: () => {
      held.open();
      for (const session of ['running', 'uncertain']) for (const t of a.host.history(session)) a.host.finish(session, t.requestId);
    },
  };
}

/** What deployment A's handoffs look like now: state, attempts and who caused each event. */
async function snapshot(a: TestBaton, ids: readonly string[]) {
  const { rows } = await a.db.pool.query<{ id: string; state: string; attempts: number; actors: string[]; workers: string[] }>(
    `SELECT h.id, h.delivery_state AS state, h.attempt_count AS attempts,
       ARRAY(SELECT DISTINCT coalesce(e.actor_id, '-') FROM handoff_events e WHERE e.handoff_id = h.id ORDER BY 1) AS actors,
       ARRAY(SELECT DISTINCT coalesce(d.worker_id, '-') FROM delivery_attempts d WHERE d.handoff_id = h.id ORDER BY 1) AS workers
     FROM handoffs h WHERE h.id = ANY($1::uuid[]) ORDER BY h.seq`,
    [ids],
  );
  return rows;
}

const agentRows = async (a: TestBaton) => (await a.db.pool.query(`SELECT * FROM agents ORDER BY handle`)).rows;

/** Lets A's worker finish everything and checks each of A's handoffs took exactly one write, all from A. */
async function expectDeliveredByAOnly(a: TestBaton, f: InFlight): Promise<void> {
  f.release();
  // A's own reconciler observes the lost reply (found running) and its worker follows it.
  await eventually(async () => {
    await a.reconcile();
    expect((await a.get(`/v1/handoffs/${f.handoffs.uncertain}`)).body.state).not.toBe('UNCERTAIN');
  });
  const all = Object.values(f.handoffs);
  for (const id of all) await waitForState(a, id, 'RETURNED');
  for (const h of await snapshot(a, all)) {
    expect(h.attempts, `handoff ${h.id}: one attempt`).toBe(1);
    expect(
      h.workers.every((w) => w.startsWith('test-worker-')),
      `handoff ${h.id} written by ${h.workers.join(', ')}`,
    ).toBe(true);
    expect(
      h.actors.every((x) => x === '-' || x === 'origin' || x.startsWith('test-worker-')),
      `handoff ${h.id} moved by ${h.actors.join(', ')}`,
    ).toBe(true);
  }
  const writes = a.host.writesByHandoff();
  for (const id of all) expect(writes.get(id), `writes of ${id} to A's sessions`).toHaveLength(1);
}

describe('a worker of another Redis prefix on the same database', () => {
  it('never sweeps, delivers, resumes, observes or writes deployment A\u2019s agents, while A\u2019s own worker delivers them all; and it delivers its own', async () => {
    const a = await startTestBaton();
    cleanups.push(() => a.stop());
    const agents = await registerAgentsOfA(a);
    const before = await agentRows(a);

    // Deployment B: the same database, its own prefix (queues, turn locks), its own sessions,
    // wired as `baton worker` wires it, with intervals far shorter than the defaults.
    const bPrefix = `${a.prefix}-b`;
    const bHost = new DemoAgentHost();
    const bCalls: Array<{ call: string; agentId: string }> = [];
    const bRedis = openRedis(TEST_REDIS_URL, 'worker', a.logger);
    cleanups.push(async () => {
      const keys = await bRedis.keys(`${bPrefix}:*`);
      if (keys.length > 0) await bRedis.del(...keys);
      await bRedis.quit();
    });
    const b: RunningDeliveryWorker = startDeliveryWorker({
      repos: a.repos,
      redis: bRedis,
      adapters: recording(createAdapters(['demo'], { demoHost: bHost }), bCalls),
      clock: systemClock,
      logger: a.logger,
      workerId: 'b-worker',
      redisPrefix: bPrefix,
      queueShards: 2,
      concurrency: 8,
      turnLockTtlMs: 600,
      jobLockMs: 1_000,
      stalledIntervalMs: 500,
      shutdownGraceMs: 500,
      busyRetryMs: 50,
      unreachableRetryMs: 50,
      outageRetryMs: 50,
      recheckMs: 50,
      settingsMaxAgeMs: 0,
      outage: createProviderStatusCheck({ cacheMs: 0 }),
      windows: {
        unobservableAfterMs: 100,
        interruptResendDelayMs: 0,
        errorResendDelayMs: 0,
        unreachableGiveUpMs: 1_000,
        absenceScans: 2,
        absenceWindowMs: 100,
        roleRerouteAfterMs: 60_000,
      },
    });
    let bPasses = 0;
    const bReconciler = startReconciler({ ...b.deps, locks: b.locks }, 50, 'demo@default', () => bPasses++);
    cleanups.push(async () => {
      await bReconciler.stop();
      await b.stop();
      bHost.close();
    });
    const passes = async (n: number) => {
      const target = bPasses + n;
      await eventually(() => bPasses >= target, { timeoutMs: 20_000, what: `${n} reconciler passes of deployment B` });
    };

    // B's own agent, registered by a process of B. A's API stores a handoff to it and leaves
    // the wake-up to B's sweep: B's worker delivers it, to B's sessions.
    const bAgent = await registerAgent(
      { ...a.core, deployment: bPrefix },
      { project: 'default', handle: 'b-agent', provider: 'demo', providerSettings: { thinkMs: 10 } },
    );
    const toB = await send(a, 'b-agent', 'for deployment B');
    await waitForState(a, toB, 'RETURNED');
    expect((await snapshot(a, [toB]))[0]).toMatchObject({ attempts: 1, workers: ['b-worker'] });
    expect(await wokenOn(a, bAgent.id), 'A’s API put no wake-up for B’s agent on A’s queues').toBe(false);
    expect(await a.redis.keys(`${a.prefix}:*${bAgent.id}*`), 'nor any job for it').toEqual([]);
    expect(bHost.writesByHandoff().get(toB)).toHaveLength(1);

    // A handoff of A with no worker of A running yet: B's sweep must not pick it up.
    const waiting = await send(a, 'idle', 'waits for a worker of its own deployment');
    // (Its wake-up is on A's queues: what the check on B's agent above looks for.)
    await eventually(async () => expect(await wokenOn(a, agents.idle)).toBe(true));
    await passes(20);
    expect((await snapshot(a, [waiting]))[0]).toMatchObject({ state: 'WAITING', attempts: 0 });

    const f = await putTurnsInFlight(a, agents, waiting);
    const during = await snapshot(a, Object.values(f.handoffs));
    await passes(30);
    expect(await snapshot(a, Object.values(f.handoffs)), 'nothing of A moved while B swept, reconciled and delivered').toEqual(during);
    expect(during.map((h) => h.state)).toEqual(['RETURNED', 'SENDING', 'BUSY', 'RUNNING', 'UNCERTAIN']);
    const ofA = new Set(Object.values(agents));
    expect(
      bCalls.filter((c) => ofA.has(c.agentId)),
      'B asked its adapter nothing about A\u2019s agents',
    ).toEqual([]);
    expect([...bHost.writesByHandoff().keys()], 'B wrote only its own handoff').toEqual([toB]);
    expect(await agentRows(a).then((rows) => rows.filter((r) => r.handle !== 'b-agent')), 'A\u2019s agent rows are untouched').toEqual(
      before,
    );

    await expectDeliveredByAOnly(a, f);
    // A's reconciler never touched B's agent either.
    expect((await snapshot(a, [toB]))[0]!.actors.filter((x) => x.startsWith('test-worker-'))).toEqual([]);
  }, 60_000);
});

describe('baton demo started with DATABASE_URL (a private Redis of its own)', () => {
  it('runs as a deployment of its own: it never touches the agents of the real deployment (prefix `baton`), and the real one never touches the demo\u2019s', async () => {
    // The "real" deployment A: the default prefix, `baton`, on a Redis of its own.
    let redis: Started | undefined;
    try {
      redis = await startPrivateRedis();
    } catch (err) {
      throw new Error(`this test needs redis-server on PATH: ${(err as Error).message}`, { cause: err });
    }
    cleanups.push(() => redis.stop());
    const a = await startTestBaton({ redisUrl: redis.url, prefix: 'baton' });
    cleanups.push(() => a.stop());
    const agents = await registerAgentsOfA(a);
    const waiting = await send(a, 'idle', 'waits for a worker of its own deployment');

    const port = await freePort();
    const demo: BatonProcess = spawnBaton(['demo', '--json', '--think-ms', '30', '--chains', '2'], {
      DATABASE_URL: a.databaseUrl,
      BATON_API_PORT: String(port),
      BATON_RECONCILE_INTERVAL_MS: '100',
      BATON_UNOBSERVABLE_AFTER_MS: '200',
      BATON_UNCERTAIN_SCANS: '2',
      BATON_UNCERTAIN_SCAN_WINDOW_MS: '200',
      BATON_LOG_LEVEL: 'silent',
    });
    cleanups.push(() => demo.stop('SIGINT', 20_000));
    const startedLine = await demo.waitFor(/\{"type":"started"[^\n]*\}/, 60_000);
    const started = JSON.parse(startedLine) as { api: string; token: string; project: string };
    // The demo's reconciler passes, read from its own /metrics (its API and worker share a registry).
    const demoPasses = async () => {
      const res = await fetch(`${started.api}/metrics`, { headers: { authorization: `Bearer ${started.token}` } });
      const m = /^baton_reconciler_passes_total (\d+)/m.exec(await res.text());
      return Number(m?.[1] ?? 0);
    };
    const passes = async (n: number) => {
      const target = (await demoPasses()) + n;
      await eventually(async () => (await demoPasses()) >= target, {
        timeoutMs: 20_000,
        intervalMs: 100,
        what: `${n} reconciler passes of the demo`,
      });
    };
    await passes(15);
    expect((await snapshot(a, [waiting]))[0], 'the demo did not deliver the real deployment\u2019s waiting handoff').toMatchObject({
      state: 'WAITING',
      attempts: 0,
    });

    const f = await putTurnsInFlight(a, agents, waiting);
    const during = await snapshot(a, Object.values(f.handoffs));
    await passes(20);
    expect(await snapshot(a, Object.values(f.handoffs)), 'nothing of the real deployment moved while the demo ran').toEqual(during);
    expect(during.map((h) => h.state)).toEqual(['RETURNED', 'SENDING', 'BUSY', 'RUNNING', 'UNCERTAIN']);

    // The demo's agents belong to a deployment of its own, and its handoffs moved (the demo works).
    const demoAgents = await a.db.pool.query<{ deployment: string }>(
      `SELECT DISTINCT a.deployment FROM agents a JOIN projects p ON p.id = a.project_id WHERE p.slug = $1`,
      [started.project],
    );
    expect(demoAgents.rows.map((r) => r.deployment)).toEqual([expect.stringMatching(/^baton-demo-[0-9a-f]{6}$/)]);
    const demoHandoffs = await a.db.pool.query<{ id: string }>(
      `SELECT h.id FROM handoffs h JOIN projects p ON p.id = h.project_id WHERE p.slug = $1 AND h.delivery_state = 'RETURNED'`,
      [started.project],
    );
    expect(demoHandoffs.rows.length, 'the demo delivered its own handoffs').toBeGreaterThan(0);
    // A's reconciler, run here, leaves the demo's agents alone.
    await a.reconcile();
    const touched = await a.db.pool.query(
      `SELECT 1 FROM handoff_events e JOIN handoffs h ON h.id = e.handoff_id JOIN projects p ON p.id = h.project_id
       WHERE p.slug = $1 AND e.actor_id LIKE 'test-worker-%'`,
      [started.project],
    );
    expect(touched.rowCount, 'the real deployment moved none of the demo\u2019s handoffs').toBe(0);

    expect(await demo.stop('SIGINT', 20_000), demo.output().slice(-2000)).toBe(0);
    await expectDeliveredByAOnly(a, f);
  }, 120_000);
});
