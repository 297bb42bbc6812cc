import type { ProviderAdapter } from '../adapters/provider-adapter.ts';
import type { DeliveryWindows } from '../domain/delivery-policy.ts';
import type { OutageGuardSpec, RuntimeSettings } from '../domain/runtime-settings.ts';
import type { LockRelease } from '../locks/turn-locks.ts';
import type { CoreDeps } from './ports.ts';
import type { UnwrittenReservations } from './unwritten-reservations.ts';
import type { BudgetGate } from './budget-gate.ts';

/*
 * What a delivery run is given: the dependencies, the turn lock and the scheduler's signals.
 * Types only, in a module of their own so that dispatch-agent.ts, deliver-turn.ts and
 * reserve-head.ts all import them from here and none imports another for a type (no import
 * cycles in libs/: test/unit/architecture.test.ts).
 */

/** A held per-agent turn lock; `signal` aborts when ownership is lost. */
export interface TurnLockHandle {
  readonly token: string;
  /** The acquisition's fencing number: recorded with the attempt; an older one is refused. */
  readonly fence: bigint;
  readonly signal: AbortSignal;
  /** Proves ownership within a bounded time; false means: do not write. */
  stillHeld(): Promise<boolean>;
  /** `recheck`: the release took a pending wake-up: while the lock was held, work was committed that this run may not have seen. */
  release(): Promise<LockRelease>;
}

/**
 * Fault-injection points for tests (the conformance suite loses a lock exactly between the
 * reservation and the write). Empty in production.
 */
export interface WorkerHooks {
  /** Runs right before the lock check that precedes every adapter write. */
  beforeWrite?: ((agentId: string) => Promise<void>) | undefined;
}

export type LockAttempt =
  | { readonly acquired: true; readonly lock: TurnLockHandle }
  | { readonly acquired: false; readonly holder: string | null; readonly retryInMs: number };

export interface DispatchDeps extends CoreDeps {
  readonly locks: { acquire(agentId: string): Promise<LockAttempt>; backOff(agentId: string, ms: number): Promise<void> };
  readonly adapters: { get(provider: string): ProviderAdapter | undefined };
  readonly settingsReader: { get(): Promise<RuntimeSettings> };
  /** Whether a budget holds a new turn to an agent (budget-gate.ts; the worker's one gate). */
  readonly budgetGate: Pick<BudgetGate, 'covers' | 'holdFor'>;
  readonly outage: { check(provider: string, spec: OutageGuardSpec | undefined): Promise<{ down: boolean; detail: string | null }> };
  readonly workerId: string;
  /** The reconciliation windows (unobservable turn, interrupted resend, absence scans). */
  readonly windows: DeliveryWindows;
  /** This process's reserved-but-never-written request ids (one instance per worker process). */
  readonly unwritten: UnwrittenReservations;
  readonly hooks?: WorkerHooks;
  /**
   * The providers and worker pools this process serves: the reconciler observes only their
   * sessions (another pool's sessions live on another host). Absent: every one.
   */
  readonly scope?: { readonly providers: readonly string[]; readonly pools: readonly string[] };
  readonly timing: {
    /** Back-off before asking a busy session again. */
    readonly busyRetryMs: number;
    /** Back-off after the provider could not be reached. */
    readonly unreachableRetryMs: number;
    /** Back-off while the provider's outage guard says it is down. */
    readonly outageRetryMs: number;
    /** How often a watcher re-reads its handoff, to notice a release by a person. */
    readonly recheckMs: number;
  };
}

export interface DispatchSignals {
  /** Stop starting new turns (shutdown has begun). */
  readonly draining: AbortSignal;
  /** Stop following live turns, recording nothing: the next lock holder takes them up (the shutdown grace ran out). */
  readonly stopFollowing: AbortSignal;
}

/**
 * What the process's scheduler lends a run: `follow` runs a wait for a turn that is running in
 * its session as not at work (the worker's QueueSlots let another run start meanwhile).
 */
export interface RunSlot {
  readonly follow?: <T>(wait: () => Promise<T>) => Promise<T>;
}
