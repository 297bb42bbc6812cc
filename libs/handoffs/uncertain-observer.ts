import type { UncertainCandidate } from '../db/uncertain-due.ts';
import { observeUncertain, type ObserveDeps } from './observe-uncertain.ts';
import type { DispatchDeps } from './dispatch-deps.ts';
import { RECONCILER_DEFAULTS } from '../config/component-defaults.ts';

/**
 * Observations of UNCERTAIN handoffs one process runs at once, per provider, and as many again
 * for turns with a final report on record (a webhook's callback): observing those reads the
 * report, so looks that hang (a status URL that never answers) cannot hold them up. Each look is
 * bounded by its adapter's observe deadline (BATON_ADAPTER_DEADLINES `observeMs`; the webhook's
 * is 15 s), so at most this many looks of one provider wait on it at a time.
 */
export const OBSERVATIONS_PER_PROVIDER = RECONCILER_DEFAULTS.observationsPerProvider;

/** A look (no report on record when it began) or the observation of a reported turn. */
type Kind = 'look' | 'reported';

/** What the observer touches: the due handoffs of this deployment and scope, and what each observation does. */
export type ObserverDeps = ObserveDeps & Pick<DispatchDeps, 'uncertainDue' | 'deployment' | 'scope'>;

interface Running {
  readonly id: string;
  readonly kind: Kind;
}

/**
 * Observes UNCERTAIN handoffs with bounded concurrency: `fill()` reads the handoffs that are due
 * (UncertainDue: only this deployment's, of `deps.scope`) for the slots that are free and starts
 * observing them (observe-uncertain.ts), without waiting for any. A handoff being observed is
 * not offered again until its observation ended, except that one being looked at is observed
 * again in a reported slot once its final report is on record. The running reconciler keeps one
 * and fills it every interval; a reconcile pass (`once`) keeps one for the pass and never
 * observes a handoff twice in it. `signal` aborts the looks in flight: they write nothing.
 */
export class UncertainObserver {
  private readonly inFlight = new Map<string, Running>();
  private readonly used = new Map<string, number>();
  private readonly everStarted = new Set<string>();
  private readonly waiters = new Set<() => void>();
  private readonly flights = new Set<Promise<void>>();
  private touched = 0;

  constructor(
    private readonly deps: ObserverDeps,
    private readonly signal: AbortSignal,
    private readonly opts: { readonly perProvider?: number; readonly once?: boolean } = {},
  ) {}

  /** Observations in flight. */
  get running(): number {
    return this.inFlight.size;
  }

  /**
   * Starts observing due handoffs in the free slots (one statement, none when every slot of the
   * served providers is taken). @returns how many observations it started.
   */
  async fill(): Promise<number> {
    if (this.signal.aborted) return 0;
    const per = this.opts.perProvider ?? OBSERVATIONS_PER_PROVIDER;
    const full = (kind: Kind) =>
      [...this.used].filter(([k, n]) => k.startsWith(`${kind}:`) && n >= per).map(([k]) => k.slice(kind.length + 1));
    const lookSlotsFull = full('look');
    const reportedSlotsFull = full('reported');
    const providers = this.deps.scope?.providers;
    let limit = RECONCILER_DEFAULTS.uncertainDuePage;
    if (providers) {
      limit = providers.reduce(
        (sum, p) => sum + Math.max(0, per - this.slotsUsed('look', p)) + Math.max(0, per - this.slotsUsed('reported', p)),
        0,
      );
      if (limit === 0) return 0;
    }
    const busy = [...this.inFlight.values()];
    const due = await this.deps.uncertainDue.due({
      now: this.deps.clock.now(),
      limit: Math.min(limit, RECONCILER_DEFAULTS.uncertainDuePage),
      deployment: this.deps.deployment,
      scope: this.deps.scope,
      observing: [...busy.filter((r) => r.kind === 'reported').map((r) => r.id), ...(this.opts.once ? this.everStarted : [])],
      looking: busy.filter((r) => r.kind === 'look').map((r) => r.id),
      lookSlotsFull,
      reportedSlotsFull,
    });
    let started = 0;
    for (const c of due) {
      const kind: Kind = c.reported ? 'reported' : 'look';
      const provider = c.handoff.provider ?? '';
      if (this.signal.aborted || this.slotsUsed(kind, provider) >= per || this.inFlight.has(`${kind}:${c.handoff.id}`)) continue;
      this.start(c, kind, provider);
      started++;
    }
    return started;
  }

  /** Resolves once an observation in flight ends (at once when none is). */
  next(): Promise<void> {
    if (this.inFlight.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.waiters.add(resolve));
  }

  /** Resolves once every observation started so far has ended. */
  async idle(): Promise<void> {
    while (this.flights.size > 0) await Promise.all([...this.flights]);
  }

  /** How many handoffs moved or had their scan recorded since the last call. */
  takeTouched(): number {
    const n = this.touched;
    this.touched = 0;
    return n;
  }

  private slotsUsed(kind: Kind, provider: string): number {
    return this.used.get(`${kind}:${provider}`) ?? 0;
  }

  private start(c: UncertainCandidate, kind: Kind, provider: string): void {
    const key = `${kind}:${c.handoff.id}`;
    const slot = `${kind}:${provider}`;
    this.inFlight.set(key, { id: c.handoff.id, kind });
    this.used.set(slot, this.slotsUsed(kind, provider) + 1);
    if (this.opts.once) this.everStarted.add(c.handoff.id);
    const flight: Promise<void> = observeUncertain(this.deps, c, this.signal)
      .then(
        (n) => void (this.touched += n),
        (err: unknown) =>
          this.deps.logger.warn({ err, handoffId: c.handoff.id }, 'could not record what a history scan saw; it is looked at again'),
      )
      .finally(() => {
        this.inFlight.delete(key);
        this.used.set(slot, this.slotsUsed(kind, provider) - 1);
        this.flights.delete(flight);
        for (const wake of this.waiters) wake();
        this.waiters.clear();
      });
    this.flights.add(flight);
  }
}
