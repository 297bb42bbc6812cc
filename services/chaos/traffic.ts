import { setTimeout as sleep } from 'node:timers/promises';
import type pg from 'pg';
import { SETTLED_STATES, type DeliveryState } from '../../libs/domain/delivery-states.ts';
import type { ClaimCall, SendRecord } from './invariants.ts';
import type { Random } from './random.ts';

/** The agent every chaos send comes from: pull-only, so nothing is ever delivered to it. */
export const SENDER = 'chaos-sender';
const PROJECT = '@project';

/** An HTTP answer, or why there was none (a refused or broken connection, a time-out). */
export type Answer = { status: number; body: any } | { status: 0; error: string };

/** Calls the API processes with the admin token; every call has a time-out. */
export class ApiCaller {
  constructor(
    /** The APIs' URLs now (a restarted API may have moved to another port). */
    private readonly urls: () => readonly string[],
    private readonly token: string,
  ) {}

  async call(api: number, method: 'GET' | 'POST', path: string, body?: unknown, timeoutMs = 8_000): Promise<Answer> {
    const urls = this.urls();
    const url = `${urls[api % urls.length]}${path}`;
    try {
      const res = await fetch(url, {
        method,
        headers: { authorization: `Bearer ${this.token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        signal: AbortSignal.timeout(timeoutMs),
      });
      const text = await res.text();
      return { status: res.status, body: text ? JSON.parse(text) : null };
    } catch (err) {
      return { status: 0, error: (err as Error).message };
    }
  }
}

/** Worth another try with the same request: no answer, the database or Redis away, or too many requests. */
const retryable = (a: Answer) => a.status === 0 || a.status >= 500 || a.status === 429;

export interface DemoAgent {
  readonly handle: string;
  readonly thinkMs: number;
}

export interface PlannedSend {
  readonly index: number;
  /** A demo agent, a manual agent (owned work) or `@project` (work any manual agent may claim). */
  readonly to: string;
  readonly title: string | null;
  readonly message: string;
  readonly idempotencyKey: string;
  /** Pull work and who may claim it (null: any manual agent), or not pull work. */
  readonly pull: { owner: string | null } | null;
}

export interface TrafficPlan {
  readonly demoAgents: readonly DemoAgent[];
  readonly manualAgents: readonly string[];
  readonly sends: readonly PlannedSend[];
}

/**
 * What the run sends: `agents` demo agents whose turns take from no time to a few seconds (a
 * third quick, half medium, a fifth long), `manualAgents` pull-only agents, and `handoffs`
 * sends: a tenth pull work (half owned by one manual agent, half to the project), the rest to
 * demo agents at random, half of them work (a title), half plain messages.
 */
export function planTraffic(rng: Random, opts: { agents: number; handoffs: number; manualAgents: number; runId: string }): TrafficPlan {
  const demoAgents: DemoAgent[] = Array.from({ length: opts.agents }, (_, i) => {
    const r = rng.next();
    const thinkMs = r < 0.3 ? rng.int(0, 50) : r < 0.8 ? rng.int(100, 800) : rng.int(1_500, 4_000);
    return { handle: `agent-${i + 1}`, thinkMs };
  });
  const manualAgents = Array.from({ length: opts.manualAgents }, (_, i) => `claimer-${i + 1}`);
  const sends: PlannedSend[] = [];
  for (let index = 0; index < opts.handoffs; index++) {
    const pull = manualAgents.length > 0 && rng.chance(0.1);
    const owner = pull && rng.chance(0.5) ? rng.pick(manualAgents) : null;
    const to = pull ? (owner ?? PROJECT) : rng.pick(demoAgents).handle;
    const title = pull || rng.chance(0.5) ? `chaos task ${index + 1}` : null;
    sends.push({
      index,
      to,
      title,
      message: `chaos ${opts.runId} send #${index + 1} to ${to}`,
      idempotencyKey: `chaos-${opts.runId}-${index + 1}`,
      pull: pull ? { owner } : null,
    });
  }
  return { demoAgents, manualAgents, sends };
}

/**
 * Sends the plan through the API processes at `perSecond`, from `lanes` concurrent clients.
 * Sends to one recipient go through one lane, one at a time (the next only after the previous
 * was answered with its handoff), so their order is the send order the order invariant holds
 * Baton to. A send that gets no answer, a 5xx or a 429 is repeated with the same idempotency
 * key, through the other API process, until it is answered (or `signal` aborts).
 */
export class Sender {
  readonly records: SendRecord[];
  /** The handoff ids the sends were answered with, in the order the answers came. */
  readonly ids: string[] = [];
  private answeredCount = 0;

  constructor(
    private readonly api: ApiCaller,
    private readonly plan: TrafficPlan,
    private readonly onAnswered: (send: PlannedSend, id: string) => void,
  ) {
    this.records = plan.sends.map((s) => ({ index: s.index, to: s.to, status: null, id: null, tries: 0 }));
  }

  get answered(): number {
    return this.answeredCount;
  }

  get done(): boolean {
    return this.answeredCount === this.plan.sends.length;
  }

  async run(perSecond: number, lanes: number, signal: AbortSignal): Promise<void> {
    const laneOf = new Map<string, number>();
    const queues: PlannedSend[][] = Array.from({ length: lanes }, () => []);
    for (const s of this.plan.sends) {
      if (!laneOf.has(s.to)) laneOf.set(s.to, laneOf.size % lanes);
      queues[laneOf.get(s.to)!]!.push(s);
    }
    const t0 = Date.now();
    await Promise.all(
      queues.map(async (queue) => {
        for (const s of queue) {
          const due = t0 + (s.index * 1000) / perSecond;
          // An abort only ends the wait early; the loop checks the signal.
          if (due > Date.now()) await sleep(due - Date.now(), undefined, { signal }).catch(() => undefined);
          if (signal.aborted) return;
          await this.send(s, signal);
        }
      }),
    );
  }

  private async send(s: PlannedSend, signal: AbortSignal): Promise<void> {
    const body = { from: SENDER, to: s.to, message: s.message, idempotencyKey: s.idempotencyKey, ...(s.title ? { title: s.title } : {}) };
    const rec = this.records[s.index] as { -readonly [K in keyof SendRecord]: SendRecord[K] };
    for (let attempt = 0; !signal.aborted; attempt++) {
      rec.tries++;
      const a = await this.api.call(s.index + attempt, 'POST', '/v1/handoffs', body);
      if ((a.status === 201 || a.status === 200) && 'body' in a && typeof a.body?.id === 'string') {
        rec.status = a.status;
        rec.id = a.body.id as string;
        this.answeredCount++;
        this.ids.push(rec.id);
        this.onAnswered(s, rec.id);
        return;
      }
      if (!retryable(a)) {
        // A refusal no fault explains (a 4xx): the send is left unanswered and the run fails on it.
        rec.status = null;
        return;
      }
      // An abort only ends the wait early; the loop checks the signal.
      await sleep(Math.min(2_000, 100 * 2 ** Math.min(attempt, 5)) * (0.5 + Math.random() / 2), undefined, { signal }).catch(
        () => undefined,
      );
    }
  }
}

interface BoardItem {
  readonly owner: string | null;
  /** As far as the run knows: claimable (work open, delivery not settled). */
  open: boolean;
}

/**
 * Manual agents doing pull work through the API while the faults go on, the way a person or a
 * script follows the work contract: each loop claims an item it may claim (its own, or the
 * project's, which every loop competes for) with a 2-second lease, heartbeats it a few times,
 * and returns it; now and then it gives the work back as failed, or walks away without a word
 * (the lease runs out and the work returns to the inbox). Every call that the API answered as
 * the claim holder's is recorded for the claim invariant. After a claim each reads the work's
 * context packet, as an agent reads what to do.
 */
export class Claimers {
  readonly calls: ClaimCall[] = [];
  private readonly board = new Map<string, BoardItem>();
  private counts = { claims: 0, heartbeats: 0, returns: 0, abandoned: 0, lost: 0, packets: 0 };

  constructor(
    private readonly api: ApiCaller,
    private readonly agents: readonly string[],
    private readonly rng: Random,
  ) {}

  add(id: string, owner: string | null): void {
    this.board.set(id, { owner, open: true });
  }

  get stats() {
    return { ...this.counts, outstanding: this.board.size };
  }

  /** Re-reads the board's items from Postgres: settled ones leave it, the rest say whether they are open. */
  async refresh(pool: pg.Pool): Promise<void> {
    if (this.board.size === 0) return;
    try {
      const { rows } = await pool.query<{ id: string; state: DeliveryState; work: string | null }>(
        'SELECT id, delivery_state AS state, work_state::text AS work FROM handoffs WHERE id = ANY($1::uuid[])',
        [[...this.board.keys()]],
      );
      for (const r of rows) {
        const item = this.board.get(r.id);
        if (!item) continue;
        if (SETTLED_STATES.has(r.state)) this.board.delete(r.id);
        else item.open = r.work === 'open';
      }
    } catch {
      // Postgres is being restarted: the next refresh will do.
    }
  }

  async run(signal: AbortSignal): Promise<void> {
    await Promise.all(this.agents.map((agent, i) => this.loop(agent, i, signal)));
  }

  private async loop(agent: string, api: number, signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      const mine = [...this.board].filter(([, item]) => item.open && (item.owner === agent || item.owner === null));
      if (mine.length === 0) {
        // An abort only ends the wait early; the loop checks the signal.
        await sleep(150, undefined, { signal }).catch(() => undefined);
        continue;
      }
      const [id, item] = this.rng.pick(mine);
      await this.work(agent, api++, id, item, signal);
    }
  }

  private async work(agent: string, api: number, id: string, item: BoardItem, signal: AbortSignal): Promise<void> {
    const timed = async (path: string, body: Record<string, unknown>) => {
      const sentAt = Date.now();
      const a = await this.api.call(api, 'POST', path, body, 5_000);
      return { a, sentAt, answeredAt: Date.now() };
    };
    const claim = await timed(`/v1/handoffs/${id}/accept`, { as: agent, leaseSeconds: 2 });
    if (claim.a.status !== 200 || !('body' in claim.a)) {
      if (claim.a.status === 409) item.open = false;
      // An abort only ends the wait early; the loop checks the signal.
      await sleep(50, undefined, { signal }).catch(() => undefined);
      return;
    }
    this.counts.claims++;
    this.calls.push({ agent, handoffId: id, op: 'accept', sentAt: claim.sentAt, answeredAt: claim.answeredAt, held: true });
    const token = claim.a.body.claim.token as string;
    // What to do: the work's context packet (the handoff and its timeline, read in one snapshot).
    const packet = await this.api.call(api, 'GET', `/v1/handoffs/${id}/packet?as=${encodeURIComponent(agent)}`, undefined, 5_000);
    if (packet.status === 200) this.counts.packets++;
    const beats = this.rng.int(0, 3);
    for (let b = 0; b < beats; b++) {
      // An abort only ends the wait early; the loop checks the signal.
      await sleep(this.rng.int(300, 800), undefined, { signal }).catch(() => undefined);
      const hb = await timed(`/v1/handoffs/${id}/heartbeat`, { as: agent, claimToken: token, leaseSeconds: 2 });
      if (hb.a.status === 200) {
        this.counts.heartbeats++;
        this.calls.push({ agent, handoffId: id, op: 'heartbeat', sentAt: hb.sentAt, answeredAt: hb.answeredAt, held: true });
      } else if (hb.a.status === 409) {
        this.counts.lost++;
        return;
      }
    }
    if (signal.aborted) return;
    if (this.rng.chance(0.08)) {
      this.counts.abandoned++;
      return;
    }
    const outcome = this.rng.chance(0.05) ? 'failed' : 'succeeded';
    const body = {
      as: agent,
      claimToken: token,
      summary: `${agent} ${outcome === 'failed' ? 'could not finish' : 'finished'} ${id}`,
      outcome,
    };
    for (let attempt = 0; attempt < 6 && !signal.aborted; attempt++) {
      const r = await timed(`/v1/handoffs/${id}/return`, body);
      if (r.a.status === 200 && 'body' in r.a) {
        this.counts.returns++;
        this.calls.push({
          agent,
          handoffId: id,
          op: 'return',
          sentAt: r.sentAt,
          answeredAt: r.answeredAt,
          held: r.a.body.recovered !== true,
        });
        if (outcome === 'succeeded') this.board.delete(id);
        return;
      }
      if (r.a.status === 409) {
        this.counts.lost++;
        return;
      }
      // An abort only ends the wait early; the loop checks the signal.
      await sleep(200 * (attempt + 1), undefined, { signal }).catch(() => undefined);
    }
  }
}

/**
 * People and agents looking at handoffs while the faults go on: `lanes` loops, each reading one
 * of the handoffs the sender was given (GET /v1/handoffs/:id: the handoff, its attempts and its
 * timeline, read in one snapshot) every 100–300 ms, through the API processes in turn. A read
 * may fail (503 while Postgres is away, no answer while an API restarts); the API that served
 * it must still be there afterwards (the run's exit invariant).
 */
export class Readers {
  readonly stats = { reads: 0, ok: 0, unavailable: 0, unanswered: 0 };

  constructor(
    private readonly api: ApiCaller,
    /** The ids the sender was given so far. */
    private readonly ids: () => readonly string[],
    private readonly rng: Random,
  ) {}

  async run(lanes: number, signal: AbortSignal): Promise<void> {
    await Promise.all(
      Array.from({ length: lanes }, async (_, lane) => {
        for (let api = lane; !signal.aborted; api++) {
          // An abort only ends the wait early; the loop checks the signal.
          await sleep(this.rng.int(100, 300), undefined, { signal }).catch(() => undefined);
          const ids = this.ids();
          if (signal.aborted || ids.length === 0) continue;
          const a = await this.api.call(api, 'GET', `/v1/handoffs/${this.rng.pick(ids)}`, undefined, 5_000);
          this.stats.reads++;
          if (a.status === 200) this.stats.ok++;
          else if (a.status === 0) this.stats.unanswered++;
          else if (a.status >= 500) this.stats.unavailable++;
        }
      }),
    );
  }
}
