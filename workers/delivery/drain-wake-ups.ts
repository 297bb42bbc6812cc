import type { Logger } from '../../libs/logging/create-logger.ts';
import { DELIVERY_WORKER_DEFAULTS } from '../../libs/config/component-defaults.ts';

/**
 * A queue's dispatch-run slots in one process, shared by the wake jobs it takes: at most `limit`
 * runs at once, of which at most `working` are at work; a run that follows a turn running in its
 * session (`following`) holds a slot but is not at work. A drainer that finds them full pauses
 * the process's consumer of the queue (BullMQ's local pause: it takes no more jobs of the queue)
 * and leaves the rest to a new wake job, which a process with free slots takes; it goes on
 * taking agents itself as its runs end, and resumes the consumer when it stops taking.
 */
export class QueueSlots {
  readonly running = new Set<Promise<void>>();
  private paused = false;
  /** Runs that only follow a turn now (see following). */
  private followers = 0;
  /** Who waits for the next run to end (runEnded). */
  private waiting: Array<() => void> = [];

  constructor(
    readonly limit: number,
    private readonly consumer: { pause(): void; resume(): void },
    readonly working = limit,
  ) {}

  /** How many more runs may start: within the slots, and within the runs at work. */
  get free(): number {
    return Math.max(0, Math.min(this.limit - this.running.size, this.working - (this.running.size - this.followers)));
  }

  /** Runs that follow a turn now, holding a slot but not at work. */
  get following(): number {
    return this.followers;
  }

  track(run: Promise<void>): void {
    const tracked: Promise<void> = run.finally(() => {
      this.running.delete(tracked);
      this.wakeWaiters();
    });
    this.running.add(tracked);
  }

  /**
   * Runs `wait` (a run of this queue following a turn in its session) as not at work: while it
   * waits, another run may start in its place, within the slots' limit.
   */
  async follow<T>(wait: () => Promise<T>): Promise<T> {
    this.followers++;
    this.wakeWaiters();
    try {
      return await wait();
    } finally {
      this.followers--;
    }
  }

  private wakeWaiters(): void {
    const waiting = this.waiting;
    this.waiting = [];
    for (const wake of waiting) wake();
  }

  /**
   * Resolves when a run of the queue ends or starts following a turn (at once when none runs),
   * or after `ms` if given. A waiter list, not Promise.race over the runs: a race leaves a
   * reaction on every run still going, so at a few hundred runs each one's end paid for every
   * race made during its life.
   */
  runEnded(ms?: number): Promise<void> {
    if (this.running.size === 0) return Promise.resolve();
    return new Promise<void>((resolve) => {
      let timer: NodeJS.Timeout | undefined;
      const wake = () => {
        clearTimeout(timer);
        resolve();
      };
      this.waiting.push(wake);
      if (ms !== undefined) {
        timer = setTimeout(() => {
          this.waiting = this.waiting.filter((w) => w !== wake);
          resolve();
        }, ms);
      }
    });
  }

  /** Pauses the consumer; false when it already was (another drainer paused it). */
  pause(): boolean {
    if (this.paused) return false;
    this.paused = true;
    this.consumer.pause();
    return true;
  }

  resume(): void {
    if (!this.paused) return;
    this.paused = false;
    this.consumer.resume();
  }
}

export interface WakeDrain {
  /** The queue whose wake-up set this job drains. */
  readonly queue: string;
  /** This process's slots for the queue's dispatch runs. */
  readonly slots: QueueSlots;
  /**
   * Takes up to `count` agents, oldest first. Empty: the set was empty; the queue's scheduled
   * flag is then cleared unless `lingering` (it stays set: this drainer looks again soon).
   */
  take(count: number, lingering: boolean): Promise<string[]>;
  /** Adds a wake job for the queue: another worker (or a later start) takes the rest. */
  addWakeJob(): Promise<void>;
  /** One agent's dispatch run (dispatchAgent under its turn lock). */
  dispatch(agentId: string): Promise<unknown>;
  /** When a run fails outright: wake the agent again later (a delayed job). */
  retryLater(agentId: string): Promise<void>;
  /** Stop taking agents (shutdown has begun). */
  readonly draining: AbortSignal;
  readonly logger: Logger;
}

/**
 * How a drainer lingers once it finds the set empty while runs it started are still going: it
 * looks again when one of them ends, or every `pollMs`, for up to `totalMs`, keeping the queue
 * scheduled, so wake-ups that arrive meanwhile need no new job: under a backlog, a job per few
 * agents would cost more Redis work than the handoffs themselves.
 */
export const WAKE_LINGER = { totalMs: DELIVERY_WORKER_DEFAULTS.wakeLingerMs, pollMs: DELIVERY_WORKER_DEFAULTS.wakeLingerPollMs } as const;

/**
 * How a drainer whose slots were full takes agents again: once `batch` slots are free, or
 * `waitMs` after the first one freed, whichever comes first. Under a backlog the slots stay
 * full either way; this only makes each take (a script call on the wake-up set) start several
 * runs instead of one per run that ended.
 */
export const WAKE_REFILL = { batch: DELIVERY_WORKER_DEFAULTS.wakeRefillBatch, waitMs: DELIVERY_WORKER_DEFAULTS.wakeRefillWaitMs } as const;

/**
 * Runs a wake job: takes the agents of the queue's wake-up set, oldest first, as many as the
 * process has free slots, and starts each one's dispatch run. When it finds the set empty it
 * lingers while its runs are going (WAKE_LINGER), then takes once more clearing the queue's scheduled flag: a
 * wake-up added after that sets it again and adds a new job, so none is left without one. Then
 * it waits for the runs it started. When the process's slots for the queue are full it leaves the
 * rest to a new wake job, once, which another process takes (this one takes no jobs of the
 * queue meanwhile: QueueSlots), and goes on taking as its runs end. On shutdown it takes nothing
 * more and leaves the rest to a new wake job. A run that throws (Postgres unreachable) gets a delayed wake-up
 * of its own; one lost with a killed process is re-queued by the reconciler's sweep, as a lost
 * job is.
 * @returns how many runs this job started
 */
export async function drainWakeUps(
  d: WakeDrain,
  linger: { totalMs: number; pollMs: number } = WAKE_LINGER,
  refill: { batch: number; waitMs: number } = WAKE_REFILL,
): Promise<number> {
  const mine = new Set<Promise<void>>();
  let started = 0;
  // When the set was first found empty since this job last took agents.
  let emptySince: number | null = null;
  let paused = false;
  try {
    for (;;) {
      if (d.draining.aborted) {
        await d.addWakeJob();
        break;
      }
      if (d.slots.free <= 0) {
        // Full: let a process with free slots help (once), and take more here as runs end.
        if (d.slots.pause()) {
          paused = true;
          await d.addWakeJob();
        }
        await d.slots.runEnded();
        const until = Date.now() + refill.waitMs;
        const batch = Math.min(refill.batch, d.slots.limit, d.slots.working);
        while (d.slots.free < batch && Date.now() < until && !d.draining.aborted) await d.slots.runEnded(until - Date.now());
        continue;
      }
      const lingering = mine.size > 0 && linger.totalMs > 0 && (emptySince === null || Date.now() - emptySince < linger.totalMs);
      const agents = await d.take(d.slots.free, lingering);
      if (agents.length === 0) {
        if (!lingering) break;
        emptySince ??= Date.now();
        await d.slots.runEnded(Math.min(linger.pollMs, Math.max(0, emptySince + linger.totalMs - Date.now())));
        continue;
      }
      emptySince = null;
      for (const agentId of agents) {
        const run: Promise<void> = d
          .dispatch(agentId)
          .then(
            () => undefined,
            async (err: unknown) => {
              d.logger.warn({ err, agentId, queue: d.queue }, 'dispatch run failed; waking the agent again later');
              await d
                .retryLater(agentId)
                .catch((e: unknown) => d.logger.warn({ err: e, agentId }, 'could not schedule the retry; the reconciler will'));
            },
          )
          .finally(() => mine.delete(run));
        d.slots.track(run);
        mine.add(run);
        started++;
      }
    }
  } finally {
    if (paused) d.slots.resume();
    await Promise.all(mine);
  }
  return started;
}
