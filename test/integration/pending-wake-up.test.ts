import { randomUUID } from 'node:crypto';
import { Queue } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { registerAgent } from '../../libs/handoffs/manage-agents.ts';
import { sendHandoff } from '../../libs/handoffs/send-handoff.ts';
import { dispatchAgent } from '../../libs/handoffs/dispatch-agent.ts';
import type { DispatchDeps, TurnLockHandle } from '../../libs/handoffs/dispatch-deps.ts';
import type { ProviderAdapter, TurnObservation } from '../../libs/adapters/provider-adapter.ts';
import type { LockRelease } from '../../libs/locks/turn-locks.ts';
import { DeliveryQueues } from '../../libs/queue/delivery-queues.ts';
import { RedisNames } from '../../libs/queue/redis-names.ts';
import type { RunningDeliveryWorker } from '../../workers/delivery/start-delivery-worker.ts';
import { eventually } from '../support/eventually.ts';
import { startTestBaton, type TestBaton } from '../support/test-baton.ts';

/**
 * After its turns, a dispatch run asks Postgres again only when it must: when someone committed
 * work for the agent while its turn lock was held and found the lock taken (the pending wake-up
 * the holder takes on release), when it lost the lock, or when it was stopped. A run that
 * released cleanly with no pending wake-up queues nothing and asks nothing. The worker here serves another
 * pool, so only the runs the test starts touch the agent, and no reconciler runs: whatever is
 * delivered, the run's own follow-up delivered it.
 */
let baton: TestBaton;
let worker: RunningDeliveryWorker;
let names: RedisNames;
/** As the API adds wake-ups: none for an agent whose turn is held, which gets a pending wake-up instead. */
let apiQueues: DeliveryQueues;
let n = 0;

beforeAll(async () => {
  baton = await startTestBaton({ queueShards: 1 });
  names = new RedisNames(baton.prefix);
  worker = baton.startWorker({ pools: ['elsewhere'] });
  apiQueues = new DeliveryQueues({
    connection: baton.redis,
    names,
    shards: 1,
    logger: baton.logger,
    heldLocks: (ids) => worker.locks.wakeHolderIfHeld(ids),
  });
  await registerAgent(baton.core, { project: 'default', handle: 'sender', provider: 'demo' });
});

afterAll(async () => {
  await apiQueues?.close();
  await baton?.stop();
});

const signals = () => ({ draining: new AbortController().signal, stopFollowing: new AbortController().signal });

async function recipient(): Promise<{ handle: string; agentId: string }> {
  const handle = `r${++n}`;
  const agent = await registerAgent(baton.core, { project: 'default', handle, provider: 'demo', providerSettings: { thinkMs: 0 } });
  return { handle, agentId: agent.id };
}

/** The worker's dependencies, with a turn lock that runs `beforeRelease` while still held and records how the release went. */
function withLockHook(beforeRelease: () => Promise<void>, releases: LockRelease[], lost?: AbortController): DispatchDeps {
  const deps = worker.deps;
  return {
    ...deps,
    locks: {
      ...deps.locks,
      backOff: (id, ms) => deps.locks.backOff(id, ms),
      acquire: async (agentId) => {
        const attempt = await deps.locks.acquire(agentId);
        if (!attempt.acquired) return attempt;
        const lock: TurnLockHandle = {
          token: attempt.lock.token,
          fence: attempt.lock.fence,
          // `lost`: the test takes the lock away (the holder's signal aborts, proofs fail).
          signal: lost ? AbortSignal.any([attempt.lock.signal, lost.signal]) : attempt.lock.signal,
          stillHeld: async () => !lost?.signal.aborted && (await attempt.lock.stillHeld()),
          release: async () => {
            await beforeRelease();
            const r = await attempt.lock.release();
            releases.push(r);
            return r;
          },
        };
        return { acquired: true, lock };
      },
    },
  };
}

/** The worker's repository, running `then` right after a statement ended a turn and reserved the next head. */
function afterReservingEnd(deps: DispatchDeps, then: () => void): DispatchDeps['handoffs'] {
  return new Proxy(deps.handoffs, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver);
      if (typeof value !== 'function') return value;
      if (prop !== 'transition') return value.bind(target);
      return async (...args: unknown[]) => {
        const written = await value.apply(target, args);
        if (written?.nextWork?.reserved) then();
        return written;
      };
    },
  });
}

async function stateOf(id: string): Promise<string> {
  return (await baton.repos.handoffs.findById(id))!.deliveryState;
}

async function jobIds(): Promise<string[]> {
  const q = new Queue(apiQueues.queueName('demo', 'x'), { connection: baton.redis, prefix: names.bullPrefix });
  try {
    return (await q.getJobs(['wait', 'delayed', 'prioritized'])).map((j) => j.id ?? '');
  } finally {
    await q.close();
  }
}

/** The agents in the default pool's wake-up set (the worker here serves another pool: nobody takes them). */
async function woken(): Promise<string[]> {
  return apiQueues.waitingWakeUps(apiQueues.queueName('demo', 'x'));
}

/** Waits for the agent's wake-up from a send and removes it, so what follows starts with none. */
async function takeWakeUp(agentId: string): Promise<void> {
  await eventually(async () => (await woken()).includes(agentId), { what: 'the wake-up of the send' });
  await baton.redis.zrem(names.wakeUps(apiQueues.queueName('demo', 'x')), agentId);
}

describe('after a dispatch run', () => {
  it('a handoff committed WAITING after the holder last looked, while it still held the lock, gets its wake-up at once (no turn was in flight: nothing is asked of the lock)', async () => {
    const r = await recipient();
    const first = (await sendHandoff(baton.core, { project: 'default', from: 'sender', to: r.handle, message: 'one' })).handoff;
    await takeWakeUp(r.agentId);
    let second = '';
    let wokenWhileHeld: string[] = [];
    let notedWhileHeld = -1;
    const releases: LockRelease[] = [];
    const deps = withLockHook(async () => {
      if (second) return;
      const sent = (
        await sendHandoff({ ...baton.core, scheduler: apiQueues }, { project: 'default', from: 'sender', to: r.handle, message: 'two' })
      ).handoff;
      second = sent.id;
      expect(sent.deliveryState).toBe('WAITING');
      // The send answers before its wake-up goes out; the turn is held until that happened.
      await eventually(async () => (await woken()).includes(r.agentId), { what: 'the wake-up of the second send' });
      wokenWhileHeld = await woken();
      notedWhileHeld = await baton.redis.exists(names.pendingWakeUp(r.agentId));
    }, releases);
    const summary = await dispatchAgent(deps, { agentId: r.agentId, provider: 'demo', cause: 'sent' }, signals());
    expect(summary).toEqual({ outcome: 'idle', moved: 1 });
    expect(await stateOf(first.id)).toBe('RETURNED');
    // Committed after the run's last look: not delivered by it; its own wake-up went out while
    // the lock was held, and no pending wake-up was left for the holder.
    expect(await stateOf(second)).toBe('WAITING');
    expect(wokenWhileHeld).toContain(r.agentId);
    expect(notedWhileHeld).toBe(0);
    expect(releases).toEqual(['released']);
    // That wake-up's run delivers it.
    await dispatchAgent(worker.deps, { agentId: r.agentId, provider: 'demo', cause: 'wake' }, signals());
    expect(await stateOf(second)).toBe('RETURNED');
  });

  it('a handoff enrolled BUSY behind a turn in flight gets its wake-up too: the holder a pending wake-up while its lock is held, else a job', async () => {
    const r = await recipient();
    const live = (await sendHandoff(baton.core, { project: 'default', from: 'sender', to: r.handle, message: 'live' })).handoff;
    await takeWakeUp(r.agentId);
    await baton.db.pool.query(`UPDATE handoffs SET delivery_state = 'RUNNING', attempt_count = 1 WHERE id = $1`, [live.id]);
    const api = { ...baton.core, scheduler: apiQueues };
    const held = await worker.locks.acquire(r.agentId);
    if (!held.acquired) throw new Error('the test could not take the lock');
    const behind = (await sendHandoff(api, { project: 'default', from: 'sender', to: r.handle, message: 'behind the held turn' })).handoff;
    expect(await stateOf(behind.id)).toBe('BUSY');
    await eventually(async () => (await baton.redis.exists(names.pendingWakeUp(r.agentId))) === 1, { what: 'the pending wake-up' });
    expect(await woken()).not.toContain(r.agentId);
    expect(await held.lock.release()).toBe('recheck');
    const after = (
      await sendHandoff(api, { project: 'default', from: 'sender', to: r.handle, message: 'behind a turn whose lock is gone' })
    ).handoff;
    expect(await stateOf(after.id)).toBe('BUSY');
    await eventually(async () => (await woken()).includes(r.agentId), { what: 'the wake-up' });
    await baton.db.pool.query(`UPDATE handoffs SET delivery_state = 'CANCELLED', settled_at = now() WHERE recipient_id = $1`, [r.agentId]);
  });

  it('a wake-up that finds the lock held leaves the pending wake-up too, so its work is looked at after the release', async () => {
    const r = await recipient();
    await sendHandoff(baton.core, { project: 'default', from: 'sender', to: r.handle, message: 'one' });
    const releases: LockRelease[] = [];
    let lost: string | undefined;
    const deps = withLockHook(async () => {
      if (lost !== undefined) return;
      lost = (await dispatchAgent(worker.deps, { agentId: r.agentId, provider: 'demo', cause: 'due' }, signals())).outcome;
    }, releases);
    await dispatchAgent(deps, { agentId: r.agentId, provider: 'demo', cause: 'sent' }, signals());
    expect(lost).toBe('locked');
    expect(releases).toEqual(['recheck']);
  });

  it('a handoff the run made wait (an interrupted turn resent later) gets a wake-up for when it is due, without asking Postgres', async () => {
    const r = await recipient();
    baton.host.script(r.handle, ['interrupt']);
    const one = (await sendHandoff(baton.core, { project: 'default', from: 'sender', to: r.handle, message: 'interrupted once' })).handoff;
    const releases: LockRelease[] = [];
    const deps = { ...withLockHook(async () => undefined, releases), windows: { ...worker.deps.windows, interruptResendDelayMs: 60_000 } };
    const startedAt = Date.now();
    await dispatchAgent(deps, { agentId: r.agentId, provider: 'demo', cause: 'sent' }, signals());
    expect(releases).toEqual(['released']);
    const row = await baton.repos.handoffs.findById(one.id);
    expect(row?.deliveryState).toBe('WAITING');
    const due = (await jobIds()).filter((id) => id.startsWith(`due-${r.agentId}-`));
    expect(due).toHaveLength(1);
    const at = Number(due[0]!.split('-').at(-6));
    expect(at).toBeGreaterThanOrEqual(startedAt + 60_000);
    expect(Math.abs(at - row!.notBefore!.getTime())).toBeLessThan(1_000);
  });

  it('a due wake-up that runs before its handoff is due (BullMQ may run a delayed job a millisecond early) leaves a wake-up for when it is', async () => {
    const r = await recipient();
    const one = (await sendHandoff(baton.core, { project: 'default', from: 'sender', to: r.handle, message: 'not yet' })).handoff;
    // As a resend's back-off leaves it: WAITING, due a little later than the job that woke the run.
    await baton.db.pool.query(`UPDATE handoffs SET not_before = now() + interval '30 seconds' WHERE id = $1`, [one.id]);
    const releases: LockRelease[] = [];
    const deps = withLockHook(async () => undefined, releases);
    expect(await dispatchAgent(deps, { agentId: r.agentId, provider: 'demo', cause: 'due' }, signals())).toEqual({
      outcome: 'idle',
      moved: 0,
    });
    expect(releases).toEqual(['released']);
    const due = (await jobIds()).filter((id) => id.startsWith(`due-${r.agentId}-`));
    expect(due, 'a wake-up for when the handoff is due').toHaveLength(1);
  });

  it('a handoff resent twice in one run gets its wake-up for its last due time, not the first one (which found it not yet due)', async () => {
    const r = await recipient();
    // The session's turns fail: the first with no retry time (resent at once: errorResendDelayMs
    // 0), so the same run sends it again; the second with the runtime's retry time of a minute.
    const failures = [{ kind: 'transient' as const }, { kind: 'transient' as const, retryAfterMs: 60_000 }];
    const ended = (failure: (typeof failures)[number] | undefined): TurnObservation => ({
      found: true,
      status: 'failed',
      error: 'the model failed',
      ...(failure ? { failure } : {}),
    });
    const adapter: ProviderAdapter = {
      provider: 'demo',
      sendTurn: async () => ({ outcome: 'accepted', seen: ended(failures.shift()) }),
      observeTurn: async () => ({ found: false, complete: true }),
      isBusy: async () => false,
      waitForTurn: async () => ({ status: 'unobservable', error: 'not followed' }),
      close: async () => undefined,
    };
    const one = (await sendHandoff(baton.core, { project: 'default', from: 'sender', to: r.handle, message: 'fails twice' })).handoff;
    const deps: DispatchDeps = {
      ...withLockHook(async () => undefined, []),
      adapters: { get: () => adapter },
      windows: { ...worker.deps.windows, errorResendDelayMs: 0 },
    };
    await dispatchAgent(deps, { agentId: r.agentId, provider: 'demo', cause: 'sent' }, signals());
    const row = await baton.repos.handoffs.findById(one.id);
    expect(row?.deliveryState).toBe('WAITING');
    expect(row?.attemptCount).toBe(2);
    const due = (await jobIds()).filter((id) => id.startsWith(`due-${r.agentId}-`));
    expect(due, 'one wake-up, when the second resend is due').toHaveLength(1);
    const at = Number(due[0]!.split('-').at(-6));
    expect(at).toBeGreaterThanOrEqual(row!.notBefore!.getTime());
  });

  it('a backlog costs one look-up per run and one statement per turn: the end of each turn reserves the next', async () => {
    const r = await recipient();
    const ids: string[] = [];
    for (const m of ['one', 'two', 'three'])
      ids.push((await sendHandoff(baton.core, { project: 'default', from: 'sender', to: r.handle, message: m })).handoff.id);
    const calls: Record<string, number> = {};
    const reserving: boolean[] = [];
    const deps = withLockHook(async () => undefined, []);
    const counted: DispatchDeps = {
      ...deps,
      handoffs: new Proxy(deps.handoffs, {
        get(target, prop, receiver) {
          const value = Reflect.get(target, prop, receiver);
          if (typeof value !== 'function') return value;
          return (...args: unknown[]) => {
            calls[String(prop)] = (calls[String(prop)] ?? 0) + 1;
            if (prop === 'nextWork') reserving.push(args[3] !== undefined);
            if (prop === 'transition')
              reserving.push((args[0] as { thenNextWork?: { reserve?: unknown } }).thenNextWork?.reserve !== undefined);
            return value.apply(target, args);
          };
        },
      }),
    };
    expect(await dispatchAgent(counted, { agentId: r.agentId, provider: 'demo', cause: 'sent' }, signals())).toEqual({
      outcome: 'idle',
      moved: 3,
    });
    for (const id of ids) expect(await stateOf(id)).toBe('RETURNED');
    expect(calls).toEqual({ nextWork: 1, transition: 3 });
    expect(reserving).toEqual([true, true, true, true]);
    const { rows } = await baton.db.pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM delivery_attempts WHERE handoff_id = ANY($1::uuid[])`,
      [ids],
    );
    expect(rows[0]!.n).toBe(3);
    expect(baton.host.writesByHandoff().get(ids[2]!)).toHaveLength(1);
  });

  it('a run that stops right after the end of a turn reserved the next one still takes that attempt on: writes it while it holds the lock (a shutdown), never leaves it SENDING', async () => {
    const r = await recipient();
    const ids: string[] = [];
    for (const m of ['one', 'two', 'three'])
      ids.push((await sendHandoff(baton.core, { project: 'default', from: 'sender', to: r.handle, message: m })).handoff.id);
    const draining = new AbortController();
    const deps = withLockHook(async () => undefined, []);
    const stopping: DispatchDeps = { ...deps, handoffs: afterReservingEnd(deps, () => draining.abort()) };
    const summary = await dispatchAgent(
      stopping,
      { agentId: r.agentId, provider: 'demo', cause: 'sent' },
      { draining: draining.signal, stopFollowing: new AbortController().signal },
    );
    expect(summary.outcome).toBe('stopped');
    expect([await stateOf(ids[0]!), await stateOf(ids[1]!), await stateOf(ids[2]!)]).toEqual(['RETURNED', 'RETURNED', 'BUSY']);
    expect(baton.host.writesByHandoff().get(ids[1]!)).toHaveLength(1);
  });

  it('... and records that it never wrote it when the lock was lost meanwhile (lock_lost: WAITING again, the attempt not_sent)', async () => {
    const r = await recipient();
    const ids: string[] = [];
    for (const m of ['one', 'two'])
      ids.push((await sendHandoff(baton.core, { project: 'default', from: 'sender', to: r.handle, message: m })).handoff.id);
    const lost = new AbortController();
    const deps = withLockHook(async () => undefined, [], lost);
    const losing: DispatchDeps = { ...deps, handoffs: afterReservingEnd(deps, () => lost.abort()) };
    const summary = await dispatchAgent(losing, { agentId: r.agentId, provider: 'demo', cause: 'sent' }, signals());
    expect(summary.outcome).toBe('stopped');
    expect(await stateOf(ids[0]!)).toBe('RETURNED');
    expect(await stateOf(ids[1]!)).toBe('WAITING');
    const attempts = await baton.repos.handoffs.attempts(ids[1]!);
    expect(attempts.map((a) => a.status)).toEqual(['not_sent']);
    expect((await baton.repos.handoffs.events(ids[1]!)).map((e) => e.event)).toContain('lock_lost');
    expect(baton.host.writesByHandoff().get(ids[1]!)).toBeUndefined();
  });

  it('while another turn of the agent is UNCERTAIN (it may still be running), asks the session before writing: nothing arrives in the middle of that turn', async () => {
    const r = await recipient();
    const uncertain = (await sendHandoff(baton.core, { project: 'default', from: 'sender', to: r.handle, message: 'in doubt' })).handoff;
    // Its write landed and the session is still in that turn; Postgres only knows it may have.
    const turn = await baton.host.receiveTurn(
      r.handle,
      { requestId: randomUUID(), handoffId: uncertain.id, from: 'sender', title: null, message: 'in doubt' },
      { behavior: 'hang' },
    );
    expect(turn.status).toBe('accepted');
    await baton.db.pool.query(`UPDATE handoffs SET delivery_state = 'UNCERTAIN', attempt_count = 1 WHERE id = $1`, [uncertain.id]);
    const next = (await sendHandoff(baton.core, { project: 'default', from: 'sender', to: r.handle, message: 'after it' })).handoff;
    const overlapsBefore = baton.host.stats().find((st) => st.session === r.handle)?.overlapAttempts ?? 0;
    const summary = await dispatchAgent(worker.deps, { agentId: r.agentId, provider: 'demo', cause: 'sent' }, signals());
    expect(summary.outcome).toBe('paused');
    expect(await stateOf(next.id)).toBe('BUSY');
    expect(baton.host.stats().find((st) => st.session === r.handle)?.overlapAttempts ?? 0).toBe(overlapsBefore);
    expect(baton.host.writesByHandoff().get(next.id)).toBeUndefined();
    await baton.db.pool.query(`UPDATE handoffs SET delivery_state = 'CANCELLED', settled_at = now() WHERE recipient_id = $1`, [r.agentId]);
  });

  it('a run that released cleanly with nothing left queues nothing and asks Postgres nothing more', async () => {
    const r = await recipient();
    const one = (await sendHandoff(baton.core, { project: 'default', from: 'sender', to: r.handle, message: 'one' })).handoff;
    await takeWakeUp(r.agentId);
    const before = (await jobIds()).filter((id) => id.includes(r.agentId)).length;
    const releases: LockRelease[] = [];
    let asked = 0;
    const deps = withLockHook(async () => undefined, releases);
    const counted: DispatchDeps = {
      ...deps,
      handoffs: new Proxy(deps.handoffs, {
        get(target, prop, receiver) {
          const value = Reflect.get(target, prop, receiver);
          if (prop !== 'nextWorkAt' || typeof value !== 'function') return typeof value === 'function' ? value.bind(target) : value;
          return (...args: unknown[]) => {
            asked++;
            return value.apply(target, args);
          };
        },
      }),
    };
    expect(await dispatchAgent(counted, { agentId: r.agentId, provider: 'demo', cause: 'sent' }, signals())).toEqual({
      outcome: 'idle',
      moved: 1,
    });
    expect(await stateOf(one.id)).toBe('RETURNED');
    expect(releases).toEqual(['released']);
    expect(asked).toBe(0);
    expect((await jobIds()).filter((id) => id.includes(r.agentId)).length).toBe(before);
    expect(await woken()).not.toContain(r.agentId);
  });
});
