import type { Clock } from '../domain/clock.ts';
import { assertNever } from '../domain/errors.ts';
import { canSee } from '../domain/visibility.ts';
import { retryDelayMs, verdictOf } from '../domain/subscription-policy.ts';
import type { EventLogRepository, LogHorizon, LoggedEvent } from '../db/event-log-repository.ts';
import type { SubscriptionRecord, SubscriptionRepository } from '../db/subscription-repository.ts';
import type { SignedPoster } from '../adapters/webhook/signed-post.ts';
import type { HandoffRepository } from '../db/handoff-repository.ts';
import { isDatabaseUnavailable } from '../db/classify-error.ts';
import type { Logger } from '../logging/create-logger.ts';
import type { FeedWakeups } from './event-feed.ts';
import { advanceSafeHorizon, EMPTY_HORIZON, type SafeHorizon } from './safe-horizon.ts';
import { SUBSCRIPTION_DEFAULTS } from '../config/component-defaults.ts';

/** The header a receiver deduplicates on: `<subscription id>:<event id>`, the same on every attempt and replay. */
export const DELIVERY_ID_HEADER = 'baton-delivery-id';

/** What the dispatcher counts (the worker's /metrics: libs/metrics/baton-metrics.ts). */
export interface SubscriptionCounters {
  delivered(): void;
  retried(): void;
  deadLettered(): void;
  paused(): void;
}

/** One request for one event: what a kind of target sends. Subscriptions POST `subscriptionRequest`. */
export interface TargetRequest {
  readonly url: string;
  readonly secret: string;
  readonly body: string;
  readonly headers: Record<string, string>;
}

export interface SubscriptionDispatcherDeps {
  readonly log: Pick<EventLogRepository, 'horizon' | 'between'>;
  readonly subscriptions: Pick<SubscriptionRepository, 'anyActive' | 'lease' | 'advance' | 'failed' | 'deadLetter' | 'pause' | 'release'>;
  readonly poster: Pick<SignedPoster, 'post'>;
  /** Reads the task an A2A push notification carries. */
  readonly handoffs: Pick<HandoffRepository, 'findView'>;
  readonly clock: Clock;
  readonly logger: Logger;
  /** This process's id: the lease holder. */
  readonly workerId: string;
  readonly counters?: SubscriptionCounters | undefined;
  /** [0, 1): the back-off's jitter (tests pass a fixed one). */
  readonly random?: () => number;
  /** Overrides of SUBSCRIPTION_DEFAULTS (tests shorten the back-off and the pause). */
  readonly tunables?: Partial<typeof SUBSCRIPTION_DEFAULTS>;
}

/** How an event becomes a request; null: nothing to send for it (its handoff is gone). */
type Encoder = (s: SubscriptionRecord, e: LoggedEvent) => Promise<TargetRequest | null>;

/** Whether a subscription wants an event: its project, what its owner may see, and its filter. */
export function subscriptionMatches(s: SubscriptionRecord, e: LoggedEvent): boolean {
  if (e.projectId !== s.projectId) return false;
  if (s.ownerAgentId !== null && !canSee(e, { agentId: s.ownerAgentId, tokenId: null, allOwners: false })) return false;
  const f = s.filter;
  if (f.handoffId !== undefined && f.handoffId !== e.handoffId) return false;
  if (f.agents !== undefined && !f.agents.some((a) => a === e.senderHandle || a === e.recipientHandle)) return false;
  if (f.states !== undefined && !f.states.includes(e.toState)) return false;
  if (f.events !== undefined && !f.events.includes(e.event)) return false;
  return true;
}

/** The JSON body and headers of one event's delivery (docs: README, "Subscribe to outcomes"). */
export function subscriptionRequest(s: SubscriptionRecord, e: LoggedEvent): TargetRequest {
  const deliveryId = `${s.id}:${e.id}`;
  const body = JSON.stringify({
    deliveryId,
    subscriptionId: s.id,
    event: {
      id: e.id.toString(),
      handoffId: e.handoffId,
      event: e.event,
      fromState: e.fromState,
      toState: e.toState,
      workFromState: e.workFromState,
      workToState: e.workToState,
      actor: { kind: e.actorKind, id: e.actorId },
      reason: e.reason,
      at: e.createdAt.toISOString(),
      handoff: { title: e.title, sender: e.senderHandle, recipient: e.recipientHandle },
    },
  });
  return { url: s.url, secret: s.secret, body, headers: { [DELIVERY_ID_HEADER]: deliveryId } };
}

/**
 * An A2A push notification for one event of its task: the task as it is now (libs/a2a, loaded
 * by the first one, so a worker that never pushes never loads the A2A SDK), under the same
 * delivery id header as every subscription.
 */
async function pushRequest(handoffs: Pick<HandoffRepository, 'findView'>, s: SubscriptionRecord, e: LoggedEvent) {
  const [{ pushNotification }, h] = await Promise.all([import('../a2a/push-notification.ts'), handoffs.findView(s.projectId, e.handoffId)]);
  if (h === null || s.push === null) return null;
  const { body, headers } = pushNotification(s.push, h);
  const deliveryId = `${s.id}:${e.id}`;
  return { url: s.url, secret: s.secret, body, headers: { ...headers, [DELIVERY_ID_HEADER]: deliveryId } };
}

/**
 * Delivers the event log to subscriptions, in every worker process. Postgres is the truth: the
 * events are read from handoff_events through EventLogRepository (`horizon`, `between`) and
 * only up to a safe id, as the event feed does (libs/handoffs/event-feed.ts: an id whose
 * transaction has not committed yet is never passed over); the Redis event stream only says
 * when to look, and a periodic look covers a lost append.
 *
 * Each subscription is delivered by one worker at a time (a lease on its row, taken with
 * `FOR UPDATE SKIP LOCKED`), one event at a time in id order, so each handoff's events arrive in
 * order. Its position moves past an event only after a 2xx (or after giving up on it: a dead
 * letter), in Postgres, so a restart or a Redis loss loses nothing and delivers at most the
 * event in flight again, under the same delivery id.
 */
export class SubscriptionDispatcher {
  private readonly t: typeof SUBSCRIPTION_DEFAULTS;
  private readonly encode: Encoder;
  private horizon: SafeHorizon = EMPTY_HORIZON;
  private running: Promise<void> | null = null;
  private again = false;
  private stopped = false;
  private timer: NodeJS.Timeout | null = null;
  private recheck: NodeJS.Timeout | null = null;
  private wakeups: FeedWakeups | null = null;
  private failures = 0;
  /** Whether any subscription was active when last asked, and when (asked at most every checkEveryMs). */
  private active: { any: boolean; atMs: number } | null = null;
  private lastPassEndMs = 0;
  private gapTimer: NodeJS.Timeout | null = null;

  constructor(private readonly deps: SubscriptionDispatcherDeps) {
    this.t = { ...SUBSCRIPTION_DEFAULTS, ...deps.tunables };
    this.encode = (s, e) => {
      switch (s.kind) {
        case 'webhook':
          return Promise.resolve(subscriptionRequest(s, e));
        case 'a2a_push':
          return pushRequest(deps.handoffs, s, e);
        default:
          return assertNever(s.kind, 'subscription kind');
      }
    };
  }

  /** Looks every checkEveryMs and whenever `wakeups` (the event stream's reader) says the log grew. */
  start(wakeups?: FeedWakeups): void {
    this.timer = setInterval(() => this.wake(), this.t.checkEveryMs);
    this.timer.unref();
    if (wakeups) {
      this.wakeups = wakeups;
      wakeups.start(() => this.wake());
    }
    this.wake();
  }

  /**
   * Starts a pass, or asks the running one to go round again. Passes start at most every
   * minPassGapMs, so a busy log (an append per turn of the event loop) costs a few passes a
   * second, not one per append.
   */
  wake(): void {
    if (this.stopped || this.gapTimer) return;
    const waitMs = this.lastPassEndMs + this.t.minPassGapMs - Date.now();
    if (waitMs > 0 && !this.running) {
      this.gapTimer = setTimeout(() => {
        this.gapTimer = null;
        this.wake();
      }, waitMs);
      this.gapTimer.unref();
      return;
    }
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = (async () => {
      do {
        this.again = false;
        try {
          await this.passOnce();
          this.failures = 0;
        } catch (err) {
          // The next wake-up or tick tries again. Postgres being away is reported once by the
          // process's DatabaseLink: debug here; anything else a warning, then every 20th.
          this.failures++;
          if (isDatabaseUnavailable(err)) this.deps.logger.debug({ err, failures: this.failures }, 'subscription pass failed');
          else if (this.failures % 20 === 1) this.deps.logger.warn({ err, failures: this.failures }, 'subscription pass failed');
        }
      } while (this.again && !this.stopped);
    })().finally(() => {
      this.running = null;
      this.lastPassEndMs = Date.now();
    });
  }

  /** Resolves when no pass is running (tests). */
  async idle(): Promise<void> {
    while (this.running) await this.running;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    if (this.recheck) clearTimeout(this.recheck);
    if (this.gapTimer) clearTimeout(this.gapTimer);
    this.wakeups?.close();
    await this.idle();
  }

  /** One pass: bring the safe id up to date, lease the subscriptions behind it and deliver each. */
  async passOnce(): Promise<void> {
    const nowMs = this.deps.clock.now().getTime();
    if (this.active === null || nowMs - this.active.atMs >= this.t.checkEveryMs)
      this.active = { any: await this.deps.subscriptions.anyActive(), atMs: nowMs };
    if (!this.active.any) return;
    this.promote(await this.deps.log.horizon());
    if (this.horizon.pending.length > 0 && !this.recheck && !this.stopped) {
      this.recheck = setTimeout(() => {
        this.recheck = null;
        this.wake();
      }, this.t.recheckMs);
      this.recheck.unref();
    }
    if (this.safe === 0n) return;
    const now = this.deps.clock.now();
    const leased = await this.deps.subscriptions.lease(this.deps.workerId, now, this.leaseEnd(), this.safe, this.t.leaseBatch);
    await Promise.all(leased.map((s) => this.deliver(s, this.safe)));
    if (leased.length === this.t.leaseBatch) this.again = true;
  }

  private leaseEnd(): Date {
    return new Date(this.deps.clock.now().getTime() + this.t.leaseMs);
  }

  /** As the event feed: `safe` moves past a top once none of the writers seen with it is writing (safe-horizon.ts). */
  private promote(now: LogHorizon): void {
    this.horizon = advanceSafeHorizon(this.horizon, now, this.deps.clock.now().getTime(), this.t.finalAfterMs);
  }

  private get safe(): bigint {
    return this.horizon.safe;
  }

  /** Delivers one leased subscription from its position up to `safe`, then lets the lease go. */
  private async deliver(s: SubscriptionRecord, safe: bigint): Promise<void> {
    const { subscriptions: repo, workerId: holder } = this.deps;
    let pos = s.position;
    let attempts = s.attempts;
    let failingSince = s.failingSince;
    try {
      while (pos < safe && !this.stopped) {
        // A subscription to one handoff (every A2A push config) reads only its events, on their index.
        const page = await this.deps.log.between(pos, safe, this.t.pageSize, s.filter.handoffId ?? null);
        const end = page.length === this.t.pageSize ? page[page.length - 1]!.id : safe;
        for (const e of page) {
          if (this.stopped) return;
          if (!subscriptionMatches(s, e)) continue;
          const req = await this.encode(s, e);
          if (req === null) continue;
          const nowMs = this.deps.clock.now().getTime();
          const answer = await this.deps.poster.post({ ...req, nowMs });
          const verdict = verdictOf(answer, nowMs);
          if (verdict.kind === 'delivered') {
            if (!(await repo.advance(s.id, holder, pos, e.id, this.leaseEnd(), true))) return;
            this.deps.counters?.delivered();
            pos = e.id;
            attempts = 0;
            failingSince = null;
            continue;
          }
          attempts++;
          const now = new Date(nowMs);
          failingSince ??= now;
          if (nowMs - failingSince.getTime() >= this.t.pauseAfterMs) {
            const reason = `failing since ${failingSince.toISOString()}: ${answer.error}`;
            if (await repo.pause(s.id, holder, reason)) {
              this.deps.counters?.paused();
              this.deps.logger.warn({ subscriptionId: s.id, eventId: e.id.toString(), error: answer.error }, 'subscription paused');
            }
            return;
          }
          if (verdict.kind === 'retry' && attempts < this.t.maxAttempts) {
            const delay = retryDelayMs(
              attempts,
              verdict.notBeforeMs,
              { baseMs: this.t.backoffBaseMs, maxMs: this.t.backoffMaxMs },
              this.random(),
            );
            if (await repo.failed(s.id, holder, pos, { attempts, error: answer.error, now, retryAt: new Date(nowMs + delay) }))
              this.deps.counters?.retried();
            return;
          }
          const dead = { eventId: e.id, error: answer.error, attempts, now, until: this.leaseEnd() };
          if (!(await repo.deadLetter(s.id, holder, pos, dead))) return;
          this.deps.counters?.deadLettered();
          this.deps.logger.info(
            { subscriptionId: s.id, eventId: e.id.toString(), error: answer.error },
            'subscription event dead-lettered',
          );
          pos = e.id;
          attempts = 0;
        }
        if (pos < end) {
          if (!(await repo.advance(s.id, holder, pos, end, this.leaseEnd(), false))) return;
          pos = end;
        }
      }
    } finally {
      await repo.release(s.id, holder);
    }
  }

  private random(): number {
    return (this.deps.random ?? Math.random)();
  }
}
