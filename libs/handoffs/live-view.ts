import { LIVE_TURN_STATES, OPEN_STATES, SETTLED_STATES, type DeliveryState } from '../domain/delivery-states.ts';
import { LIMITS } from '../domain/limits.ts';
import type { Viewer } from '../domain/visibility.ts';
import type { AgentRecord, HandoffView } from '../db/records.ts';
import type { DeliveryTimeFigures, MinuteChart } from '../db/live-view-repository.ts';
import type { CoreDeps } from './ports.ts';
import { resolveProject } from './resolve-project.ts';
import type { UsageTotals } from '../domain/turn-usage.ts';
import { startOfDayUtc, totalOf } from './turn-usage.ts';

/** The live page's "last hour" of usage. */
export const LIVE_USAGE_RECENT_MS = 3_600_000;

/** What an agent is doing, as far as the viewer can see: in a turn, needing a person, or neither. */
export type AgentActivity = 'busy' | 'attention' | 'idle';

/** Why a handoff is on the "needs attention" list. */
export type AttentionReason = 'uncertain' | 'held' | 'overdue' | 'failed';

export interface LiveAgent {
  readonly agent: AgentRecord;
  readonly activity: AgentActivity;
  /** Visible turns in flight to it (SENDING, ACCEPTED, RUNNING). */
  readonly live: number;
  /** Visible open handoffs to it that wait (WAITING, BUSY, OWNER_REJECTED, HELD, UNCERTAIN). */
  readonly queued: number;
  /** Visible handoffs to it that need attention (UNCERTAIN, HELD, overdue). */
  readonly attention: number;
  /**
   * What its turns used (turn accounting) since the start of today (UTC) and in the last hour;
   * null for an agent whose usage the viewer may not see (an agent sees its own only).
   */
  readonly usage: { readonly today: UsageTotals; readonly lastHour: UsageTotals } | null;
}

export interface LiveView {
  readonly project: string;
  readonly at: Date;
  /** The event log's head when this was read: the page follows `GET /v1/events` from here. */
  readonly lastEventId: bigint;
  readonly agents: LiveAgent[];
  /** Open handoffs, newest first (at most LIMITS.liveInFlight). */
  readonly inFlight: HandoffView[];
  /** The newest settled handoffs (at most LIMITS.liveRecentlySettled), newest first: what just finished. */
  readonly recentlySettled: HandoffView[];
  readonly attention: Array<{ handoff: HandoffView; reasons: AttentionReason[] }>;
  /** Over the newest LIMITS.liveSample handoffs of the last LIMITS.liveDeliveryTimesMs. */
  readonly deliveryTimes: { readonly windowMs: number; readonly accepted: DeliveryTimeFigures; readonly returned: DeliveryTimeFigures };
  /**
   * The page's chart: the last LIMITS.liveChartMinutes minutes, oldest first, over the newest
   * LIMITS.liveSample handoffs (`sampleFull`: there were more, and the chart says so).
   */
  readonly perMinute: MinuteChart;
}

const ATTENTION_STATES: ReadonlySet<DeliveryState> = new Set<DeliveryState>(['UNCERTAIN', 'HELD']);

function reasonsFor(h: HandoffView, now: Date): AttentionReason[] {
  const reasons: AttentionReason[] = [];
  if (h.deliveryState === 'UNCERTAIN') reasons.push('uncertain');
  if (h.deliveryState === 'HELD') reasons.push('held');
  if (h.deliveryState === 'FAILED') reasons.push('failed');
  if (h.dueAt !== null && h.dueAt < now && h.settledAt === null) reasons.push('overdue');
  return reasons;
}

/** What the first paint reads: the project's agents, handoff lists, the live-view figures, the clock. */
export type LiveViewDeps = Pick<CoreDeps, 'agents' | 'handoffs' | 'liveView' | 'clock' | 'usage'>;

/**
 * Everything the live page shows at first paint, for one caller: the project's agents with
 * what they are doing, open handoffs, what needs attention (UNCERTAIN, HELD, overdue, failed in
 * the last day; among the newest settled ones), the newest settled handoffs, and delivery times (send → accepted, send → returned, p50/p90). Every count and
 * list goes through the visibility rule, so an agent's view holds only its own handoffs and
 * its project's unowned work; an agent's activity is what the viewer can see of it.
 * @throws BatonError project_not_found
 */
export async function getLiveView(deps: LiveViewDeps, projectSlug: string, viewer: Viewer): Promise<LiveView> {
  const project = await resolveProject(deps, projectSlug);
  const now = deps.clock.now();
  // The log's head is read before the lists, so that everything after it reaches the page by
  // the event stream: read alongside them, it could land after a move the lists missed.
  const lastEventId = await deps.liveView.lastEventId();
  // Usage as GET /v1/usage shows it: an agent sees its own turns', an admin every agent's.
  const ownOnly = !viewer.allOwners && viewer.agentId !== null ? { agentId: viewer.agentId } : {};
  const usageSince = (since: Date) => deps.usage.byAgent({ projectId: project.id, ...ownOnly, since, until: new Date(now.getTime() + 1) });
  const [agents, load, inFlight, recentlySettled, deliveryTimes, perMinute, today, lastHour] = await Promise.all([
    deps.agents.listActive(project.id),
    deps.liveView.recipientLoad(project.id, OPEN_STATES, now, viewer),
    deps.handoffs.list({ projectId: project.id, states: OPEN_STATES, viewer, limit: LIMITS.liveInFlight }),
    deps.handoffs.list({ projectId: project.id, states: [...SETTLED_STATES], viewer, limit: LIMITS.liveRecentlySettled }),
    deps.liveView.deliveryTimes(project.id, new Date(now.getTime() - LIMITS.liveDeliveryTimesMs), LIMITS.liveSample, viewer),
    deps.liveView.perMinute(project.id, now, LIMITS.liveChartMinutes, LIMITS.liveSample, viewer),
    usageSince(startOfDayUtc(now)),
    usageSince(new Date(now.getTime() - LIVE_USAGE_RECENT_MS)),
  ]);
  const usageOf = (agentId: string) =>
    ownOnly.agentId !== undefined && ownOnly.agentId !== agentId
      ? null
      : { today: totalOf(today.filter((r) => r.agentId === agentId)), lastHour: totalOf(lastHour.filter((r) => r.agentId === agentId)) };
  const recentFailures = recentlySettled.filter(
    (h) => h.deliveryState === 'FAILED' && now.getTime() - h.updatedAt.getTime() <= LIMITS.liveFailedAttentionMs,
  );
  const attention = [...inFlight, ...recentFailures]
    .map((handoff) => ({ handoff, reasons: reasonsFor(handoff, now) }))
    .filter((a) => a.reasons.length > 0);
  const liveAgents = agents.map((agent): LiveAgent => {
    let live = 0;
    let queued = 0;
    let needs = 0;
    for (const l of load) {
      if (l.recipientId !== agent.id) continue;
      if (LIVE_TURN_STATES.includes(l.state)) live += l.count;
      else queued += l.count;
      needs += ATTENTION_STATES.has(l.state) ? l.count : l.overdue;
    }
    return {
      agent,
      activity: needs > 0 ? 'attention' : live > 0 ? 'busy' : 'idle',
      live,
      queued,
      attention: needs,
      usage: usageOf(agent.id),
    };
  });
  return {
    project: project.slug,
    at: now,
    lastEventId,
    agents: liveAgents,
    inFlight,
    recentlySettled,
    attention,
    deliveryTimes: { windowMs: LIMITS.liveDeliveryTimesMs, ...deliveryTimes },
    perMinute,
  };
}
