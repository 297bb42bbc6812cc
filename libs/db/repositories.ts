import { AgentRepository } from './agent-repository.ts';
import { HandoffRepository } from './handoff-repository.ts';
import type { Database } from './open-database.ts';
import { SettingsRepository } from './settings-repository.ts';
import { SessionRepository } from './session-repository.ts';
import { WorkRepository } from './work-repository.ts';
import { TokenRepository } from './token-repository.ts';
import { AuditRepository } from './audit-repository.ts';
import { TurnReportRepository } from './turn-report-repository.ts';
import { EventLogRepository } from './event-log-repository.ts';
import { LiveViewRepository } from './live-view-repository.ts';
import { SessionTurnRepository } from './session-turn-repository.ts';
import { HeldHandoffs } from './held-handoffs.ts';
import { UncertainDue } from './uncertain-due.ts';
import { AttemptHistoryRepository } from './attempt-history-repository.ts';
import { SubscriptionRepository } from './subscription-repository.ts';
import { RoleRouting } from './role-routing.ts';
import { UsageRepository } from './usage-repository.ts';
import { BudgetRepository } from './budget-repository.ts';

export interface Repositories {
  readonly handoffs: HandoffRepository;
  readonly agents: AgentRepository;
  readonly settings: SettingsRepository;
  readonly work: WorkRepository;
  readonly sessions: SessionRepository;
  readonly tokens: TokenRepository;
  readonly audit: AuditRepository;
  readonly turnReports: TurnReportRepository;
  /** Reads of handoff_events for the event followers (GET /v1/events). */
  readonly eventLog: EventLogRepository;
  /** Reads of the live page (GET /v1/live): load per agent, delivery times. */
  readonly liveView: LiveViewRepository;
  /** The turns Baton wrote into a recipient's session (what a new turn says about earlier ones). */
  readonly sessionTurns: SessionTurnRepository;
  /** HELD handoffs a page at a time, for lifting holds that ended (held-handoffs.ts). */
  readonly heldHandoffs: HeldHandoffs;
  /** UNCERTAIN handoffs due for a history scan (uncertain-due.ts). */
  readonly uncertainDue: UncertainDue;
  /** What a handoff's earlier writes came to (how a write that did not become a turn is retried). */
  readonly attemptHistory: AttemptHistoryRepository;
  /** Signed event subscriptions, their positions and dead letters. */
  readonly subscriptions: SubscriptionRepository;
  /** Routing by role: bind a role handoff to an agent, reroute stale bindings, idle members. */
  readonly routing: RoleRouting;
  /** Turn accounting: what each turn's runtime reported it used, per handoff and per agent over time. */
  readonly usage: UsageRepository;
  /** Budgets and what their turns spent (budget-repository.ts). */
  readonly budgets: BudgetRepository;
}

export function createRepositories(db: Database): Repositories {
  return {
    handoffs: new HandoffRepository(db.pool),
    agents: new AgentRepository(db.prisma),
    settings: new SettingsRepository(db.prisma),
    work: new WorkRepository(db.pool),
    sessions: new SessionRepository(db.prisma),
    tokens: new TokenRepository(db.pool),
    audit: new AuditRepository(db.pool),
    turnReports: new TurnReportRepository(db.pool),
    eventLog: new EventLogRepository(db.pool),
    liveView: new LiveViewRepository(db.pool),
    sessionTurns: new SessionTurnRepository(db.pool),
    heldHandoffs: new HeldHandoffs(db.pool),
    uncertainDue: new UncertainDue(db.pool),
    attemptHistory: new AttemptHistoryRepository(db.pool),
    subscriptions: new SubscriptionRepository(db.pool),
    routing: new RoleRouting(db.pool),
    usage: new UsageRepository(db.pool),
    budgets: new BudgetRepository(db.pool),
  };
}
