import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AdapterRegistry } from '../../libs/adapters/adapter-registry.ts';
import type { AdapterDeadlines } from '../../libs/adapters/provider-spec.ts';
import { DEFAULT_DELIVERY_WINDOWS } from '../../libs/domain/delivery-policy.ts';
import type { WorkerHooks } from '../../libs/handoffs/dispatch-deps.ts';
import { RedisNames } from '../../libs/queue/redis-names.ts';
import { eventually } from '../support/eventually.ts';
import { startTestBaton, type TestBaton } from '../support/test-baton.ts';
import { waitForState } from '../support/wait-for-state.ts';

/**
 * What a recipient can be told to do with its next turn, whatever the provider:
 * - ok: take the turn, work briefly, return a result;
 * - busy: answer "busy, nothing done";
 * - refuse: refuse the turn (nothing done);
 * - fail: take the turn and end it in error;
 * - lose_reply: take the turn and run it, but the answer to the write never reaches Baton;
 * - hang_write: take the turn but answer the write only after far longer than the write deadline;
 * - slow: take the turn and keep working until the harness's `finish` (or a long time).
 */
export type ConformanceBehavior = 'ok' | 'busy' | 'refuse' | 'fail' | 'lose_reply' | 'hang_write' | 'slow';

/** One write as the recipient saw it, whatever it answered. */
export interface RecipientWrite {
  readonly requestId: string;
  readonly handoffId: string;
  /** Arrival time, ms since the epoch. */
  readonly at: number;
  /** The request id of a turn of the same recipient still live when this write arrived, or null. */
  readonly liveTurn: string | null;
  /** What the recipient did with it. */
  readonly answer: 'accepted' | 'busy' | 'refused' | 'other';
}

/**
 * One provider's side of the conformance suite: real processes or servers standing in for the
 * recipient (demo host, a program, an HTTP server, a real CLI), scripted per turn, and a ledger
 * of every write they received. The suite drives Baton's real engine (API, Postgres, Redis,
 * delivery worker) against it.
 */
export interface ConformanceHarness {
  readonly provider: string;
  /**
   * Set by a harness whose recipient cannot hold back its answer to a write (a program is
   * started, or not): the suite then loses the reply, or overruns the write's deadline, by giving
   * the real write this (tiny) deadline instead.
   */
  readonly lostWriteDeadlineMs?: number;
  /** The adapters a worker runs, with these deadlines for the provider. */
  adapters(deadlines: Partial<AdapterDeadlines>): AdapterRegistry;
  /** Settings (and target) to register a fresh agent whose next turns follow `script`, then `ok`. */
  agent(handle: string, script: readonly ConformanceBehavior[]): Promise<{ settings: Record<string, unknown>; target?: string }>;
  /** Every write the recipient received for that agent, in arrival order. */
  writes(handle: string): Promise<RecipientWrite[]>;
  /** Ends the agent's live `slow` turn now, with a result. */
  finish(handle: string): Promise<void>;
  close(): Promise<void>;
}

/** What a harness proves about writes: never two live turns at once, never a request id twice. */
export function writeViolations(writes: readonly RecipientWrite[]): string[] {
  const problems: string[] = [];
  const seen = new Map<string, number>();
  for (const w of writes) {
    if (w.liveTurn !== null && w.liveTurn !== w.requestId) problems.push(`write ${w.requestId} arrived while turn ${w.liveTurn} was live`);
    seen.set(w.requestId, (seen.get(w.requestId) ?? 0) + 1);
  }
  for (const [requestId, n] of seen) if (n > 1) problems.push(`request id ${requestId} was written ${n} times`);
  return problems;
}

/**
 * The one behavioural suite every provider adapter must pass, through the same harness shape
 * and Baton's real delivery engine. Registers a describe block for `harness`.
 */
export function conformanceSuite(
  name: string,
  makeHarness: (baton: TestBaton) => Promise<ConformanceHarness>,
  opts: { writeDeadlineMs?: number; timeoutMs?: number } = {},
): void {
  // Generous for ordinary writes (a loaded CI machine must not turn them into lost ones); the
  // lost-write cases use a deadline of their own (losingWorker).
  const writeDeadlineMs = opts.writeDeadlineMs ?? 5_000;
  const timeoutMs = opts.timeoutMs ?? 20_000;

  // A test waits on a few settles of up to `timeoutMs` each: its own bound derives from that,
  // not from the suite's default (a real CLI's three turns on a busy machine take longer).
  describe(`adapter conformance: ${name}`, { timeout: 3 * timeoutMs }, () => {
    let baton: TestBaton;
    let harness: ConformanceHarness;
    let n = 0;

    beforeAll(async () => {
      baton = await startTestBaton();
      harness = await makeHarness(baton);
      expect((await baton.post('/v1/agents', { id: 'sender', provider: 'manual' })).status).toBe(201);
    });

    afterAll(async () => {
      await baton?.stop();
      await harness?.close();
    });

    /** A fresh recipient of the harness's provider whose next turns follow `script`. */
    async function recipient(script: readonly ConformanceBehavior[]): Promise<string> {
      const handle = `${harness.provider.replace(/_/g, '-')}-${++n}`;
      const { settings, target } = await harness.agent(handle, script);
      const res = await baton.post('/v1/agents', {
        id: handle,
        provider: harness.provider,
        settings,
        ...(target !== undefined ? { target } : {}),
      });
      expect(res.status, JSON.stringify(res.body)).toBe(201);
      return handle;
    }

    async function send(to: string, title = 'conformance turn'): Promise<string> {
      const res = await baton.post('/v1/handoffs', { from: 'sender', to, title, message: `please do: ${title}` });
      expect(res.status, JSON.stringify(res.body)).toBe(201);
      return res.body.id as string;
    }

    const hooks: WorkerHooks = {};
    const worker = (writeMs = writeDeadlineMs) => baton.startWorker({ adapters: harness.adapters({ writeMs }), hooks });
    /**
     * A worker for the lost-reply and write-deadline cases. Its reconciler proves absence in
     * two complete scans 50 ms apart (not three over an hour), so a write that never landed
     * settles within the test.
     */
    const losingWorker = () =>
      baton.startWorker({
        // A recipient that holds its answer 5 s (demo, webhook) overruns 600 ms for sure.
        adapters: harness.adapters({ writeMs: harness.lostWriteDeadlineMs ?? 600 }),
        hooks,
        windows: { ...DEFAULT_DELIVERY_WINDOWS, absenceScans: 2, absenceWindowMs: 50 },
      });
    const settle = (id: string, state: string) => waitForState(baton, id, state, timeoutMs);
    const detail = async (id: string) => (await baton.get(`/v1/handoffs/${id}`)).body;
    /**
     * The attempts that went to the adapter. An attempt the engine reserved but did not write
     * (`not_sent` after `lock_lost`: a worker that could not prove its lock in time, as a
     * starved CI machine may) reached nothing and is no resend.
     */
    const reached = (h: any): Array<{ requestId: string; status: string }> => h.attempts.filter((a: any) => a.status !== 'not_sent');
    const accepted = (writes: readonly RecipientWrite[]) => writes.filter((w) => w.answer === 'accepted');
    /** Runs reconciler passes (observation, sweeps) until the handoff is in one of `states`. */
    const reconcileUntil = (id: string, states: readonly string[], what: string) =>
      eventually(
        async () => {
          await baton.reconcile();
          const now = await detail(id);
          expect(states).toContain(now.state);
          return now;
        },
        { timeoutMs, what },
      );

    it('writes exactly one turn per attempt, in send order, never two at once', async () => {
      const w = worker();
      try {
        const to = await recipient(['ok', 'ok', 'ok']);
        const ids = [await send(to, 'first'), await send(to, 'second'), await send(to, 'third')];
        const done = await Promise.all(ids.map((id) => settle(id, 'RETURNED')));
        const writes = await harness.writes(to);
        expect(writeViolations(writes)).toEqual([]);
        // Each attempt's request id reached the recipient once, in send order.
        expect(writes.map((x) => x.requestId)).toEqual(done.map((h) => reached(h)[0]!.requestId));
        expect(done.map((h) => reached(h).length)).toEqual([1, 1, 1]);
        for (const h of done) expect(h.resultSummary ?? h.result?.summary ?? '').not.toBe('');
      } finally {
        await w.stop();
      }
    });

    it('treats busy as nothing written: the handoff waits as BUSY and is delivered once later', async () => {
      const w = worker();
      try {
        const to = await recipient(['busy', 'ok']);
        const id = await send(to);
        const h = await settle(id, 'RETURNED');
        expect(h.events.map((e: any) => e.to)).toContain('BUSY');
        const writes = await harness.writes(to);
        expect(writeViolations(writes)).toEqual([]);
        expect(accepted(writes)).toHaveLength(1);
        expect(h.attempts.filter((a: any) => a.status === 'returned')).toHaveLength(1);
      } finally {
        await w.stop();
      }
    });

    it('makes a lost reply UNCERTAIN, never resends it, and settles it by observation', async () => {
      const w = losingWorker();
      try {
        const to = await recipient(['lose_reply']);
        const id = await send(to);
        const uncertain = await settle(id, 'UNCERTAIN');
        expect(reached(uncertain)).toHaveLength(1);
        // Observation settles it by what the recipient has: the turn, followed to its end; or
        // (where the write was cut off before it landed) complete scans that prove it absent.
        const h = await reconcileUntil(id, ['RETURNED', 'CANCELLED'], 'the lost turn settled by observation');
        expect(reached(h)).toHaveLength(1);
        const writes = await harness.writes(to);
        expect(writeViolations(writes)).toEqual([]);
        if (h.state === 'RETURNED') expect(writes.map((x) => x.requestId)).toEqual([reached(uncertain)[0]!.requestId]);
        else expect(writes, 'proven absent: it never reached the recipient').toEqual([]);
        // A harness that can lose a reply by itself must show the turn that landed.
        if (harness.lostWriteDeadlineMs === undefined) expect(h.state).toBe('RETURNED');
      } finally {
        await w.stop();
      }
    });

    it('maps a write past its deadline to lost (UNCERTAIN), not to a resend', async () => {
      const w = losingWorker();
      try {
        const to = await recipient(['hang_write']);
        const id = await send(to);
        const h = await settle(id, 'UNCERTAIN');
        expect(reached(h)).toHaveLength(1);
        expect(reached(h)[0]!.status).toBe('lost');
        expect(JSON.stringify(h.events)).toMatch(/deadline/);
        // Never resent: at most the one write, under the attempt's request id.
        const writes = await harness.writes(to);
        expect(writes.length).toBeLessThanOrEqual(1);
        for (const x of writes) expect(x.requestId).toBe(reached(h)[0]!.requestId);
        if (harness.lostWriteDeadlineMs === undefined) expect(writes).toHaveLength(1);
      } finally {
        await w.stop();
      }
    });

    it('follows a turn a stopped worker left running by observation, never by a resend', async () => {
      const first = worker();
      const to = await recipient(['slow']);
      const id = await send(to);
      const running = await settle(id, 'RUNNING');
      // The worker goes away mid-turn without waiting for it (as a SIGKILL or a spent grace).
      first.forceStop();
      const second = worker();
      try {
        await harness.finish(to);
        const h = await reconcileUntil(id, ['RETURNED'], 'the running turn observed to its end by the next worker');
        expect(reached(h).map((a) => a.requestId)).toEqual([running.attempts.at(-1).requestId]);
        const writes = await harness.writes(to);
        expect(writeViolations(writes)).toEqual([]);
        expect(writes.map((x) => x.requestId)).toEqual([running.attempts.at(-1).requestId]);
      } finally {
        await second.stop();
      }
    });

    it('writes nothing when the turn lock is lost between the reservation and the write', async () => {
      const w = worker();
      try {
        const to = await recipient(['ok']);
        const { rows } = await baton.db.pool.query<{ id: string }>('SELECT id FROM agents WHERE handle = $1 AND removed_at IS NULL', [to]);
        const agentId = rows[0]!.id;
        hooks.beforeWrite = async (lockedAgent) => {
          // Another holder takes the agent's lock over, exactly between reservation and write.
          if (lockedAgent !== agentId) return;
          hooks.beforeWrite = undefined;
          await baton.redis.set(new RedisNames(baton.prefix).turnLock(agentId), 'someone-else', 'PX', 300);
        };
        const id = await send(to);
        // The lock's usurper never works: once it expires, a sweep hands the agent to a worker again.
        const h = await reconcileUntil(id, ['RETURNED'], 'delivered after the lost lock');
        const events = h.events.map((e: any) => e.event);
        expect(events).toContain('lock_lost');
        const writes = await harness.writes(to);
        expect(writes).toHaveLength(1);
        // The attempt that lost the lock never reached the recipient; the next one did.
        expect(writes[0]!.requestId).toBe(h.attempts[h.attempts.length - 1].requestId);
        expect(h.attempts[0].status).toBe('not_sent');
      } finally {
        await w.stop();
      }
    });

    it('retries a refusal exactly as the policy says: once, then FAILED', async () => {
      const w = worker();
      try {
        const to = await recipient(['refuse', 'refuse', 'ok']);
        const id = await send(to);
        const h = await settle(id, 'FAILED');
        expect(reached(h).map((a) => a.status)).toEqual(['rejected', 'rejected']);
        const writes = await harness.writes(to);
        expect(accepted(writes)).toEqual([]);
        expect(writes.length).toBeLessThanOrEqual(2);
      } finally {
        await w.stop();
      }
    });
  });
}
