import { BatonError } from '../domain/errors.ts';
import { LIMITS } from '../domain/limits.ts';
import { DELIVERY_STATES, type DeliveryState } from '../domain/delivery-states.ts';
import type { WorkState } from '../domain/work-states.ts';
import type { AttemptRecord, EventRecord, HandoffView, NotificationRecord } from '../db/records.ts';
import type { HandoffRepository } from '../db/handoff-repository.ts';
import type { CoreDeps } from './ports.ts';
import { LANES, boardCard, type Card, type Lane } from '../domain/board.ts';
import { resolveProject } from './resolve-project.ts';
import type { Viewer } from '../domain/visibility.ts';
import { loadVisible } from './load-handoff.ts';

export interface HandoffDetail {
  handoff: HandoffView;
  attempts: AttemptRecord[];
  events: EventRecord[];
  notifications: Array<NotificationRecord & { agentHandle: string }>;
}

/** The reads of one handoff's detail, all made inside one snapshot. */
export type HandoffDetailReads = Pick<HandoffRepository, 'findView' | 'attempts' | 'events' | 'notificationsFor'>;

/** What reading one handoff touches: the project and agents, and a snapshot to read it in. */
export interface GetHandoffDeps extends Pick<CoreDeps, 'agents'> {
  readonly handoffs: { snapshot<T>(read: (reads: HandoffDetailReads) => Promise<T>): Promise<T> };
}

/**
 * One handoff with its attempts and its event timeline (oldest first), read in one snapshot so
 * that its state and its timeline agree. One the viewer may not see is reported exactly like
 * one that does not exist.
 * @throws BatonError project_not_found, handoff_not_found
 */
export async function getHandoff(deps: GetHandoffDeps, projectSlug: string, id: string, viewer: Viewer): Promise<HandoffDetail> {
  const { handoff, attempts, events, notifications } = await deps.handoffs.snapshot(async (handoffs) => {
    // One connection runs one statement at a time: the reads go one after the other.
    const found = await loadVisible({ agents: deps.agents, handoffs }, projectSlug, id, viewer);
    const attempts = await handoffs.attempts(id);
    const events = await handoffs.events(id);
    const notifications = await handoffs.notificationsFor(id);
    return { handoff: found, attempts, events, notifications };
  });
  const handleOf = (agentId: string) =>
    agentId === handoff.senderId ? handoff.senderHandle : agentId === handoff.recipientId ? (handoff.recipientHandle ?? '') : '';
  return { handoff, attempts, events, notifications: notifications.map((n) => ({ ...n, agentHandle: handleOf(n.agentId) })) };
}

export interface ListHandoffsInput {
  project: string;
  recipient?: string | undefined;
  sender?: string | undefined;
  states?: readonly DeliveryState[] | undefined;
  /** Only these (delivery state, work state) pairs (an A2A task state: libs/domain/a2a-task-states.ts). */
  statePairs?: ReadonlyArray<{ readonly delivery: DeliveryState; readonly work: WorkState | null }> | undefined;
  /** Only handoffs updated at or after this time. */
  updatedAfter?: Date | undefined;
  /** Only one A2A context's handoffs (a session id, or the id of a handoff without a session). */
  contextId?: string | undefined;
  /** Also count every handoff the filter matches that the viewer sees (`total`, every page together). */
  countTotal?: boolean;
  limit: number;
  cursor?: string | undefined;
  viewer: Viewer;
  /** Count what the filter matches but the viewer does not see (an admin's narrowed view). */
  countHidden?: boolean;
}

export interface HandoffPage {
  items: HandoffView[];
  /** Pass back as `cursor` for the next (older) page; null on the last page. */
  nextCursor: string | null;
  /** With `countTotal`: how many handoffs the filter matches that the viewer sees, on all pages. */
  total?: number;
  /** With `countHidden`, on the first page (no cursor): how many the filter matches that the viewer does not see. */
  hidden?: number;
}

function encodeCursor(seq: bigint): string {
  return Buffer.from(JSON.stringify({ v: 1, seq: seq.toString() })).toString('base64url');
}

function decodeCursor(cursor: string): bigint {
  try {
    const parsed = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as { v?: unknown; seq?: unknown };
    if (parsed.v === 1 && typeof parsed.seq === 'string' && /^\d{1,19}$/.test(parsed.seq)) return BigInt(parsed.seq);
  } catch {
    // fall through
  }
  throw new BatonError('invalid_cursor', 'the cursor is not one Baton issued');
}

/**
 * Handoffs of a project, newest first, filtered by recipient, sender and states, one page at
 * a time. An unknown agent handle in a filter matches nothing (it is not an error).
 * @throws BatonError project_not_found, invalid_cursor
 */
export async function listHandoffs(deps: Pick<CoreDeps, 'agents' | 'handoffs'>, input: ListHandoffsInput): Promise<HandoffPage> {
  const project = await resolveProject(deps, input.project);
  const beforeSeq = input.cursor ? decodeCursor(input.cursor) : undefined;
  const handles = [input.recipient, input.sender].filter((h): h is string => h !== undefined).map((h) => h.toLowerCase());
  const agents = handles.length > 0 ? await deps.agents.findActiveByHandles(project.id, handles) : [];
  const idOf = (handle: string | undefined) =>
    handle === undefined ? undefined : agents.find((a) => a.handle === handle.toLowerCase())?.id;
  const recipientId = idOf(input.recipient);
  const senderId = idOf(input.sender);
  const countHidden = input.countHidden === true && input.cursor === undefined;
  if ((input.recipient !== undefined && !recipientId) || (input.sender !== undefined && !senderId)) {
    return { items: [], nextCursor: null, ...(countHidden ? { hidden: 0 } : {}), ...(input.countTotal ? { total: 0 } : {}) };
  }
  const filter = {
    projectId: project.id,
    ...(recipientId ? { recipientId } : {}),
    ...(senderId ? { senderId } : {}),
    ...(input.states ? { states: input.states } : {}),
    ...(input.statePairs ? { statePairs: input.statePairs } : {}),
    ...(input.updatedAfter ? { updatedAfter: input.updatedAfter } : {}),
    ...(input.contextId ? { contextId: input.contextId } : {}),
    viewer: input.viewer,
  };
  const rows = await deps.handoffs.list({ ...filter, ...(beforeSeq !== undefined ? { beforeSeq } : {}), limit: input.limit + 1 });
  const items = rows.slice(0, input.limit);
  const last = items[items.length - 1];
  const page: HandoffPage = { items, nextCursor: rows.length > input.limit && last ? encodeCursor(last.seq) : null };
  if (countHidden) page.hidden = await deps.handoffs.countHidden(filter);
  if (input.countTotal) page.total = await deps.handoffs.count(filter);
  return page;
}

export interface StatusCounts {
  project: string;
  total: number;
  byState: Record<DeliveryState, number>;
  /** With `countHidden`: handoffs of the project the viewer does not see (an admin's narrowed view). */
  hidden?: number;
}

/** What the counts read: the project, and the counts by state (and of hidden ones). */
export type StatusDeps = Pick<CoreDeps, 'agents' | 'handoffs'>;

/**
 * Counts by delivery state of the handoffs the viewer may see (every state present, zeros
 * included): the same rule as the listing, so no count reveals what a listing hides. With
 * `countHidden` (the API sets it for an admin token's narrowed view only, never for an agent)
 * also how many the viewer does not see, so the admin can be told `all_owners` shows them.
 */
export async function getStatus(deps: StatusDeps, projectSlug: string, viewer: Viewer, countHidden = false): Promise<StatusCounts> {
  const project = await resolveProject(deps, projectSlug);
  const counts = await deps.handoffs.countByState(project.id, viewer);
  const byState = Object.fromEntries(DELIVERY_STATES.map((s) => [s, counts.get(s) ?? 0])) as Record<DeliveryState, number>;
  const status: StatusCounts = { project: project.slug, total: Object.values(byState).reduce((a, b) => a + b, 0), byState };
  if (countHidden) status.hidden = await deps.handoffs.countHidden({ projectId: project.id, viewer });
  return status;
}

export interface Inbox {
  agent: string;
  /**
   * What needs the agent, oldest first: handoffs to it with open or claimed work (or an
   * unsettled plain message), and unowned work of the project it can claim (or has claimed).
   */
  handoffs: HandoffView[];
  /** Non-waking notifications for the agent (deadline reminders, ...), newest first. */
  notifications: NotificationRecord[];
}

async function agentOf(deps: Pick<CoreDeps, 'agents'>, projectSlug: string, handle: string) {
  const project = await resolveProject(deps, projectSlug);
  const agent = await deps.agents.findActive(project.id, handle.toLowerCase());
  if (!agent) throw new BatonError('agent_not_found', `no agent ${JSON.stringify(handle)} in project ${project.slug}`);
  return { project, agent };
}

/** @throws BatonError project_not_found, agent_not_found */
export async function getInbox(
  deps: Pick<CoreDeps, 'agents' | 'work' | 'handoffs'>,
  projectSlug: string,
  handle: string,
  viewer: Viewer,
): Promise<Inbox> {
  const { project, agent } = await agentOf(deps, projectSlug, handle);
  const [handoffs, notifications] = await Promise.all([
    deps.work.inbox(project.id, agent.id, LIMITS.inboxHandoffs, viewer),
    deps.handoffs.notificationsForAgent(agent.id, LIMITS.inboxNotifications, viewer),
  ]);
  return { agent: agent.handle, handoffs, notifications };
}

/** What the agent sent, newest first. @throws BatonError project_not_found, agent_not_found */
export async function getOutbox(
  deps: Pick<CoreDeps, 'agents' | 'work'>,
  projectSlug: string,
  handle: string,
  viewer: Viewer,
  limit: number = LIMITS.outboxHandoffs,
): Promise<{ agent: string; handoffs: HandoffView[] }> {
  const { project, agent } = await agentOf(deps, projectSlug, handle);
  return { agent: agent.handle, handoffs: await deps.work.outbox(project.id, agent.id, limit, viewer) };
}

export interface BoardCard {
  handoff: HandoffView;
  card: Card;
}

/**
 * The board: every piece of work not yet closed (optionally only where the agent is involved),
 * each in its lane (ready, in progress, attention, returned) with its next action and whose.
 * @throws BatonError project_not_found, agent_not_found
 */
export async function getBoard(
  deps: Pick<CoreDeps, 'agents' | 'work' | 'clock'>,
  projectSlug: string,
  viewer: Viewer,
  handle?: string,
): Promise<Record<Lane, BoardCard[]>> {
  const project = await resolveProject(deps, projectSlug);
  let agentId: string | null = null;
  if (handle) agentId = (await agentOf(deps, projectSlug, handle)).agent.id;
  const rows = await deps.work.openWork(project.id, agentId, LIMITS.boardHandoffs, viewer);
  const now = deps.clock.now();
  const lanes = Object.fromEntries(LANES.map((l) => [l, [] as BoardCard[]])) as Record<Lane, BoardCard[]>;
  for (const h of rows) {
    if (h.workState !== 'open' && h.workState !== 'claimed' && h.workState !== 'returned') continue;
    const card = boardCard(
      {
        workState: h.workState,
        deliveryState: h.deliveryState,
        attemptCount: h.attemptCount,
        recipient: h.recipientHandle,
        sender: h.senderHandle,
        claimedBy: h.claimedByHandle ?? null,
        leaseExpiresAt: h.leaseExpiresAt,
        dueAt: h.dueAt,
        returnOutcome: h.returnOutcome,
      },
      now,
    );
    lanes[card.lane].push({ handoff: h, card });
  }
  return lanes;
}
