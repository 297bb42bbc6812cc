import type { Clock } from '../domain/clock.ts';
import type { ActorKind } from '../domain/transitions.ts';
import type { AgentRepository } from '../db/agent-repository.ts';
import type { HandoffRepository } from '../db/handoff-repository.ts';
import type { SettingsRepository } from '../db/settings-repository.ts';
import type { BudgetRepository } from '../db/budget-repository.ts';
import type { SessionRepository } from '../db/session-repository.ts';
import type { WorkRepository } from '../db/work-repository.ts';
import type { TokenRepository } from '../db/token-repository.ts';
import type { TokenCache } from './token-cache.ts';
import type { AuditRepository } from '../db/audit-repository.ts';
import type { LiveViewRepository } from '../db/live-view-repository.ts';
import type { SessionTurnRepository } from '../db/session-turn-repository.ts';
import type { HeldHandoffs } from '../db/held-handoffs.ts';
import type { UncertainDue } from '../db/uncertain-due.ts';
import type { AttemptHistoryRepository } from '../db/attempt-history-repository.ts';
import type { Logger } from '../logging/create-logger.ts';
import type { DispatchJob } from '../queue/dispatch-job.ts';
import type { UsageRepository } from '../db/usage-repository.ts';
import type { SubscriptionRepository } from '../db/subscription-repository.ts';
import type { RoleRouting } from '../db/role-routing.ts';
import type { SubscriptionAddressPolicy } from '../domain/subscription-policy.ts';

/** Who is acting. `id` is an agent handle, a worker id, or a person; `tokenId` the token that proved it (none for Baton's own moves). */
export interface Actor {
  readonly kind: ActorKind;
  readonly id: string | null;
  readonly tokenId?: string | null;
}

export const SYSTEM_ACTOR: Actor = { kind: 'system', id: null };

/** Puts dispatch jobs on the delivery queues. Called only after the Postgres commit. */
export interface DispatchScheduler {
  enqueue(job: DispatchJob, jobId: string, delayMs?: number): Promise<void>;
  /**
   * Per route (agent, provider, pool), whether the queue its jobs go to has wake-ups waiting
   * to be taken and kept its keys since it was last asked (DeliveryQueues.backlogged). The
   * reconciler's sweep holds back re-queuing such agents: a wake-up that is still waiting
   * there is taken before a new one would be. Absent: the sweep never holds back.
   */
  backlogged?(routes: ReadonlyArray<Pick<DispatchJob, 'agentId' | 'provider' | 'pool'>>): Promise<boolean[]>;
}

/**
 * Tells every API process that handoff events were committed (libs/queue/event-stream.ts: one
 * XADD to a Redis Stream). Called after the statement committed, with the ids of the event rows
 * it appended. Fire and forget: it never throws and is never awaited by a write, because the
 * stream is only a wake-up; `GET /v1/events` reads the events themselves from Postgres, so a
 * lost append delays a follower (until the next append or its safety check) but loses nothing.
 */
export interface EventPublisher {
  published(eventIds: readonly string[]): void;
}

/** For processes nobody follows (tools, tests of one use case): publishes nothing. */
export const NO_EVENT_PUBLISHER: EventPublisher = { published: () => undefined };

/**
 * Everything the use cases may need, built once by each process's entry point (nothing is
 * global). A use case does not take the whole bag: it declares the members it touches (a
 * `Pick<CoreDeps, ...>`, named next to it: `SendDeps`, `LoadDeps`, ...), and a caller passes
 * its bag as it is (README.md, "Dependencies").
 */
export interface CoreDeps {
  /**
   * The deployment this process belongs to (`RedisNames.deployment`: its Redis prefix). Agents it
   * registers belong to it; its workers sweep, deliver, follow and observe only those, and its
   * wake-ups go only to them (README.md, "Deployments").
   */
  readonly deployment: string;
  readonly handoffs: HandoffRepository;
  readonly agents: AgentRepository;
  readonly settings: SettingsRepository;
  readonly work: WorkRepository;
  readonly sessions: SessionRepository;
  readonly tokens: TokenRepository;
  /**
   * The process's cache of token look-ups (API processes; token-cache.ts). Absent: every
   * request looks its token up in Postgres. Whatever can end a token calls its invalidate().
   */
  readonly tokenCache?: TokenCache | undefined;
  readonly audit: AuditRepository;
  /** The live page's reads (libs/handoffs/live-view.ts). */
  readonly liveView: LiveViewRepository;
  /** The turns Baton wrote into a recipient's session (earlier-requests.ts). */
  readonly sessionTurns: SessionTurnRepository;
  /** HELD handoffs a page at a time (lift-holds.ts). */
  readonly heldHandoffs: HeldHandoffs;
  /** UNCERTAIN handoffs due for a history scan (reconcile-uncertain.ts). */
  readonly uncertainDue: UncertainDue;
  /** A handoff's earlier writes (write-retries.ts): read only when a handoff is written again. */
  readonly attemptHistory: AttemptHistoryRepository;
  /** Signed event subscriptions (manage-subscriptions.ts). */
  readonly subscriptions: SubscriptionRepository;
  /** Routing by role (route-by-role.ts): binding, rerouting, idle members. */
  readonly routing: RoleRouting;
  /** Turn accounting's reads (turn-usage.ts). */
  readonly usage: UsageRepository;
  /** Budgets per project and agent, and what their turns spent (manage-budgets.ts, budget-gate.ts). */
  readonly budgets: BudgetRepository;
  /** Which addresses a subscription URL may name (BATON_SUBSCRIPTION_ADDRESSES); absent: `no-private`. */
  readonly subscriptionAddresses?: SubscriptionAddressPolicy | undefined;
  readonly scheduler: DispatchScheduler;
  /** Announces committed handoff events to the event followers (after the commit, never failing the write). */
  readonly events: EventPublisher;
  readonly clock: Clock;
  readonly logger: Logger;
}

/**
 * What a delivery move needs (`applyTransition`/`applyTransitions`, apply-transition.ts, which
 * declares the same three members): the repository that writes it, the clock, and the event
 * publisher told after the commit. A use case that moves a delivery includes these in its deps.
 */
export type TransitionDeps = Pick<CoreDeps, 'handoffs' | 'clock' | 'events'>;
