import type { Clock } from '../domain/clock.ts';
import { canSee, type Viewer } from '../domain/visibility.ts';
import type { EventLogRepository, LogHorizon, LoggedEvent } from '../db/event-log-repository.ts';
import type { Logger } from '../logging/create-logger.ts';
import { loadVisible, type LoadDeps } from './load-handoff.ts';
import { resolveProject } from './resolve-project.ts';
import { advanceSafeHorizon, EMPTY_HORIZON, type SafeHorizon } from './safe-horizon.ts';
import { EVENT_FEED_DEFAULTS } from '../config/component-defaults.ts';

/** What wakes the feed: the event stream's reader (libs/queue/event-stream.ts). */
export interface FeedWakeups {
  start(onWake: (top: bigint) => void): void;
  close(): void;
}

export interface EventFeedOptions {
  readonly log: Pick<EventLogRepository, 'horizon' | 'between' | 'visibleBetween'>;
  /** Opened on the first follower, closed by close(): the process's one stream reader. */
  readonly wakeups: () => FeedWakeups;
  readonly clock: Clock;
  readonly logger: Logger;
  /**
   * How long an id below the log's top may stay invisible before it is taken as never coming:
   * past Postgres's statement_timeout every writer's statement has ended (default 10 s, twice
   * the default BATON_DB_QUERY_TIMEOUT_MS). Only matters when an unrelated transaction of the
   * cluster stays open that long.
   */
  readonly finalAfterMs?: number;
  /** How often the log is checked although no append arrived (a lost XADD), while anyone follows. */
  readonly checkEveryMs?: number;
  /** How soon the horizon is checked again while a transaction it waits for may still commit. */
  readonly recheckMs?: number;
}

/** One follower: what it may see, and where it stands. */
export interface FollowRequest {
  readonly projectId: string;
  readonly viewer: Viewer;
  /** Only this handoff's events; null: every event the viewer may see. */
  readonly handoffId: string | null;
  /** The last event id the follower has (Last-Event-ID); 0: from the start of the log. null: from now. */
  readonly after: bigint | null;
  /** Called with the follower's next events, in id order, each exactly once. */
  readonly deliver: (events: readonly LoggedEvent[]) => void;
  /** Called if the feed cannot serve the follower any more (Postgres failed while catching up, or closing). */
  readonly end: (err?: unknown) => void;
  /**
   * Back-pressure while catching up: resolves when the follower can take the next page (its
   * client has read enough of the last). Absent: pages follow each other at once.
   */
  readonly ready?: () => Promise<void>;
}

export interface Following {
  /** The follower gets the events after this id (its `after`, or the log's final top when it asked for "from now"). */
  readonly after: bigint;
  stop(): void;
}

interface Follower {
  readonly req: FollowRequest;
  /** Every event with id <= through that the follower may see has been delivered. */
  through: bigint;
  live: boolean;
  stopped: boolean;
}

/**
 * The one place an API process follows the event log for `GET /v1/events`. Postgres is the
 * truth: events are read from handoff_events by id; the Redis Stream only says when to look.
 *
 * Ids are assigned when written, not when committed, so a reader may see id 11 before 10
 * commits. The feed therefore serves only up to a *safe* id: the highest id visible at a
 * moment after which every transaction then writing events has ended (LogHorizon). Every follower
 * gets each event it may see once, in id order, with no gap, also across reconnects
 * (`after`) and restarts, and whether or not the stream kept the append.
 *
 * One shared tail reads each new range once for all live followers and filters it with
 * `canSee` (the same rule as the SQL); a follower that starts behind the tail (a resume)
 * first catches up with its own reads, filtered by visibility in SQL, then joins the tail.
 */
export class EventFeed {
  private readonly followers = new Set<Follower>();
  private wakeups: FeedWakeups | null = null;
  private ready: Promise<void> | null = null;
  private horizon: SafeHorizon = EMPTY_HORIZON;
  /** The tail has read and handed out everything up to here. */
  private tail = 0n;
  private advancing = false;
  private again = false;
  private recheck: NodeJS.Timeout | null = null;
  private periodic: NodeJS.Timeout | null = null;
  private closed = false;
  private readonly finalAfterMs: number;
  private readonly checkEveryMs: number;
  private readonly recheckMs: number;

  constructor(private readonly opts: EventFeedOptions) {
    this.finalAfterMs = opts.finalAfterMs ?? EVENT_FEED_DEFAULTS.finalAfterMs;
    this.checkEveryMs = opts.checkEveryMs ?? EVENT_FEED_DEFAULTS.checkEveryMs;
    this.recheckMs = opts.recheckMs ?? EVENT_FEED_DEFAULTS.recheckMs;
  }

  /** Followers now served (for tests and shutdown). */
  get size(): number {
    return this.followers.size;
  }

  /**
   * Starts following. The follower first gets every visible event after `after` from Postgres,
   * then live ones. Resolves once it is registered; events arrive through `deliver`.
   */
  async follow(req: FollowRequest): Promise<Following> {
    if (this.closed) throw new Error('the event feed is closed');
    await this.start();
    if (req.after === null && this.followers.size === 0 && !this.advancing) {
      // Nobody followed, so the tail stood still: "from now" starts at the log's final top.
      await this.settleTop();
      if (this.followers.size === 0 && !this.advancing && this.safe > this.tail) this.tail = this.safe;
    }
    const f: Follower = { req, through: req.after ?? this.tail, live: false, stopped: false };
    this.followers.add(f);
    void this.catchUp(f);
    // The tail stands still while nobody follows: bring it up to date rather than wait for the next append.
    this.advance();
    return {
      after: f.through,
      stop: () => {
        f.stopped = true;
        this.followers.delete(f);
      },
    };
  }

  /** Ends every follower, stops the stream reader and the timers. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    for (const f of this.followers) f.req.end();
    this.followers.clear();
    if (this.recheck) clearTimeout(this.recheck);
    if (this.periodic) clearInterval(this.periodic);
    this.wakeups?.close();
  }

  private start(): Promise<void> {
    this.ready ??= (async () => {
      // Where the tail starts: the log's top once it is final. Until then nobody is served, so
      // waiting here (a few milliseconds) is what keeps "from now" gap-free.
      await this.settleTop();
      this.tail = this.safe;
      this.wakeups = this.opts.wakeups();
      this.wakeups.start((top) => {
        if (top === 0n || top > this.tail) this.advance();
      });
      this.periodic = setInterval(() => this.advance(), this.checkEveryMs);
      this.periodic.unref();
    })().catch((err: unknown) => {
      this.ready = null;
      throw err;
    });
    return this.ready;
  }

  /** Waits until the log's top as of now is final (usually at once; else a few milliseconds). */
  private async settleTop(): Promise<void> {
    this.promote(await this.opts.log.horizon());
    while (this.horizon.pending.length > 0 && !this.closed) {
      await new Promise((resolve) => setTimeout(resolve, this.recheckMs));
      this.promote(await this.opts.log.horizon());
    }
  }

  /** Moves `safe` past every pending top none of whose writers is still writing (safe-horizon.ts). */
  private promote(now: LogHorizon): void {
    this.horizon = advanceSafeHorizon(this.horizon, now, this.opts.clock.now().getTime(), this.finalAfterMs);
  }

  /** Every id <= safe is final (no transaction can still commit a smaller one). */
  private get safe(): bigint {
    return this.horizon.safe;
  }

  /** Reads the horizon and hands out whatever became safe; one pass at a time, coalescing wake-ups. */
  private advance(): void {
    if (this.closed || this.followers.size === 0) return;
    if (this.advancing) {
      this.again = true;
      return;
    }
    this.advancing = true;
    void (async () => {
      try {
        do {
          this.again = false;
          this.promote(await this.opts.log.horizon());
          await this.readTail();
        } while (this.again && !this.closed);
      } catch (err) {
        this.opts.logger.warn({ err }, 'event feed could not read the event log; retrying on the next wake-up');
      } finally {
        this.advancing = false;
      }
      if (this.horizon.pending.length > 0 && !this.closed && !this.recheck) {
        this.recheck = setTimeout(() => {
          this.recheck = null;
          this.advance();
        }, this.recheckMs);
        this.recheck.unref();
      }
    })();
  }

  /** Reads (tail, safe] once, page by page, and hands each page to the live followers it concerns. */
  private async readTail(): Promise<void> {
    while (this.tail < this.safe && !this.closed) {
      const from = this.tail;
      const page = await this.opts.log.between(from, this.safe, EVENT_FEED_DEFAULTS.pageSize);
      const to = page.length === EVENT_FEED_DEFAULTS.pageSize ? page[page.length - 1]!.id : this.safe;
      for (const f of this.followers) {
        if (!f.live || f.through < from || f.through > to) continue;
        const mine = page.filter((e) => e.id > f.through && this.concerns(f.req, e));
        f.through = to;
        if (mine.length > 0) f.req.deliver(mine);
      }
      this.tail = to;
    }
  }

  /** A follower behind the tail reads its own way up to it (visibility in SQL), then joins it. */
  private async catchUp(f: Follower): Promise<void> {
    try {
      while (!f.stopped && f.through < this.tail) {
        // Never read further ahead than the follower's client reads: a resume from 0 over a long log
        // is paged into the socket as it drains, not into memory.
        if (f.req.ready) await f.req.ready();
        if (f.stopped) return;
        const upTo = this.tail;
        const page = await this.opts.log.visibleBetween(
          f.req.projectId,
          f.req.viewer,
          f.req.handoffId,
          f.through,
          upTo,
          EVENT_FEED_DEFAULTS.pageSize,
        );
        if (f.stopped) return;
        f.through = page.length === EVENT_FEED_DEFAULTS.pageSize ? page[page.length - 1]!.id : upTo;
        if (page.length > 0) f.req.deliver(page);
      }
      // No await between the check above and this: the tail cannot move in between.
      f.live = true;
    } catch (err) {
      if (f.stopped) return;
      this.followers.delete(f);
      f.stopped = true;
      f.req.end(err);
    }
  }

  private concerns(req: FollowRequest, e: LoggedEvent): boolean {
    return e.projectId === req.projectId && (req.handoffId === null || e.handoffId === req.handoffId) && canSee(e, req.viewer);
  }
}

/**
 * `GET /v1/events` for one caller: the events of the project's handoffs the viewer may see
 * (one handoff's, with `handoffId`), after `after`, then live.
 * @throws BatonError project_not_found, handoff_not_found (also for a handoff the viewer may not see)
 */
export async function followEvents(
  deps: LoadDeps,
  feed: EventFeed,
  input: { projectSlug: string; viewer: Viewer; handoffId: string | null; after: bigint | null } & Pick<
    FollowRequest,
    'deliver' | 'end' | 'ready'
  >,
): Promise<Following> {
  const project = await resolveProject(deps, input.projectSlug);
  if (input.handoffId !== null) await loadVisible(deps, input.projectSlug, input.handoffId, input.viewer);
  return feed.follow({
    projectId: project.id,
    viewer: input.viewer,
    handoffId: input.handoffId,
    after: input.after,
    deliver: input.deliver,
    end: input.end,
    ...(input.ready ? { ready: input.ready } : {}),
  });
}
