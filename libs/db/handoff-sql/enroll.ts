import { LIVE_TURN_STATES, OPEN_STATES, type DeliveryState } from '../../domain/delivery-states.ts';
import type { WorkState } from '../../domain/work-states.ts';
import { prepared, type Queryable } from '../prepared.ts';
import type { HandoffRecord, ProviderName } from '../records.ts';
import { handoffColumns, stateList } from './columns.ts';
import type { EventWrite } from './transition-write.ts';

/**
 * What enrollment writes. Sender and recipient are named by handle: the statement resolves
 * them (and the project) itself, so a send is one round trip.
 */
export interface Enrollment extends Pick<
  HandoffRecord,
  | 'id'
  | 'title'
  | 'message'
  | 'focus'
  | 'doneWhen'
  | 'contextSummary'
  | 'openQuestions'
  | 'nextSteps'
  | 'dueAt'
  | 'idempotencyKey'
  | 'contentHash'
  | 'duplicateOfId'
  | 'deliveryState'
  | 'deliveryDetail'
  | 'createdAt'
> {
  projectSlug: string;
  fromHandle: string;
  /** null: unowned work addressed to the project (any of its agents may claim it), or a role (`toRole`). */
  toHandle: string | null;
  /** A role (`@role:<name>`, checked and lower-case): stored unbound, routed at dispatch time; null otherwise. */
  toRole: string | null;
  /** The tracked session the handoff belongs to (must be in the same project). */
  sessionId: string | null;
  /** true: set in_progress_key (an original without an idempotency key), so an identical send conflicts. */
  guardDuplicates: boolean;
  workState: WorkState | null;
  /**
   * When the recipient has a turn in flight, insert the handoff already BUSY: `to` and `event`
   * are the second move (planned by the caller), written as a second event row.
   */
  busyIfLive?: { to: DeliveryState; event: EventWrite } | undefined;
}

/** What one enrollment statement found and did. */
export interface EnrollOutcome {
  projectId: string | null;
  senderId: string | null;
  recipientId: string | null;
  recipientProvider: ProviderName | null;
  recipientGeneration: number | null;
  /** The deployment that owns the recipient: only its workers deliver the handoff. */
  recipientDeployment: string | null;
  /** false: the session named does not exist in the project (nothing inserted). */
  sessionFound: boolean;
  /** The key an in-progress original holds (whether or not this insert happened). */
  inProgressKey: string | null;
  /** The rule of the sender-to-recipient connection, if one is set. */
  connectionRule: 'allow' | 'block' | null;
  /** The `connections` runtime setting as stored (JSON), if set. */
  connectionsSetting: unknown;
  /** null: nothing inserted (a missing project/agent, or a unique conflict). */
  handoff: HandoffRecord | null;
  /** The event rows the insert appended (none when nothing was inserted), in id order. */
  eventIds: string[];
  /**
   * For a send to a role: its active members in the project (the sender aside), each with
   * whether it is idle (no handoff to it in an open state), whatever was inserted. Empty: no
   * agent declares the role. null for any other send.
   */
  roleMembers: RoleMember[] | null;
}

/** An active agent of the role a handoff was sent to (EnrollOutcome.roleMembers). */
export interface RoleMember {
  id: string;
  provider: ProviderName;
  pool: string;
  deployment: string;
  idle: boolean;
}

/**
 * Enrollment of a batch of handoffs ($1: one JSON object per handoff, `n` its place; $2: the
 * live-turn states). Each look-up is LIMIT 1 (unique anyway), so it stays a per-row index probe
 * rather than a join the planner may hash over the whole agents or handoffs table: a generic
 * plan expects 100 rows from jsonb_to_recordset whatever the batch holds.
 */
export const ENROLL_SQL = `WITH x AS (
     SELECT * FROM jsonb_to_recordset($1::jsonb) AS x(n int, id uuid, project text, sender text, recipient text, session uuid,
       title text, message text, focus text, done_when text, context_summary text, open_questions jsonb, next_steps jsonb,
       due_at timestamptz, idempotency_key text, content_hash text, duplicate_of uuid, state delivery_state, detail text,
       guard boolean, work_state work_state, created_at timestamptz, event text, actor_kind actor_kind, actor_id text,
       token_id uuid, reason text, event_detail jsonb, busy_if_live boolean, busy_state delivery_state, busy_event text,
       busy_actor_kind actor_kind, busy_actor_id text, busy_reason text, role text)
   ), f AS (
     SELECT x.*, p.id AS project_id, s.id AS sender_id, r.id AS recipient_id, r.generation, r.provider, r.delivery_target, r.pool,
       r.deployment, (x.session IS NULL OR EXISTS (SELECT 1 FROM sessions ss WHERE ss.id = x.session AND ss.project_id = p.id)) AS session_ok,
       CASE WHEN x.guard THEN s.id::text || ':' || coalesce(r.id::text || ':' || r.generation, 'role:' || x.role, 'project') || ':' || x.content_hash END AS key,
       b.busy IS NOT NULL AS busy, m.members
     FROM x
     LEFT JOIN LATERAL (
       SELECT pr.id FROM projects pr JOIN workspaces w ON w.id = pr.workspace_id WHERE w.slug = 'default' AND pr.slug = x.project LIMIT 1
     ) p ON true
     LEFT JOIN LATERAL (SELECT a.id FROM agents a WHERE a.project_id = p.id AND a.handle = x.sender AND a.removed_at IS NULL LIMIT 1) s ON true
     LEFT JOIN LATERAL (
       SELECT a.id, a.generation, a.provider, a.delivery_target, a.pool, a.deployment
       FROM agents a WHERE a.project_id = p.id AND a.handle = x.recipient AND a.removed_at IS NULL LIMIT 1
     ) r ON true
     LEFT JOIN LATERAL (
       SELECT jsonb_agg(jsonb_build_object('id', a.id, 'provider', a.provider, 'pool', a.pool, 'deployment', a.deployment,
         'idle', NOT EXISTS (SELECT 1 FROM handoffs o WHERE o.recipient_id = a.id AND o.delivery_state IN (${stateList(OPEN_STATES)})))) AS members
       FROM agents a WHERE x.role IS NOT NULL AND a.project_id = p.id AND a.roles @> ARRAY[x.role] AND a.removed_at IS NULL AND a.id <> s.id
     ) m ON true
     LEFT JOIN LATERAL (
       SELECT true AS busy FROM handoffs y
       WHERE x.busy_if_live AND y.recipient_id = r.id AND y.delivery_state = ANY($2::delivery_state[]) AND y.attempt_count > 0 LIMIT 1
     ) b ON true
   ), h AS (
     INSERT INTO handoffs (id, project_id, sender_id, recipient_id, recipient_role, recipient_generation, provider, pool, delivery_target, session_id,
       title, message, focus, done_when, context_summary, open_questions, next_steps, due_at, idempotency_key,
       content_hash, in_progress_key, duplicate_of_id, delivery_state, delivery_detail, work_state, revision, created_at, updated_at, settled_at,
       created_by_token_id)
     SELECT f.id, f.project_id, f.sender_id, f.recipient_id, f.role, f.generation, f.provider, coalesce(f.pool, ''), f.delivery_target, f.session,
       f.title, f.message, f.focus, f.done_when, f.context_summary,
       ARRAY(SELECT jsonb_array_elements_text(f.open_questions)), ARRAY(SELECT jsonb_array_elements_text(f.next_steps)),
       f.due_at, f.idempotency_key, f.content_hash, f.key, f.duplicate_of, CASE WHEN f.busy THEN f.busy_state ELSE f.state END, f.detail,
       f.work_state, CASE WHEN f.busy THEN 1 ELSE 0 END, f.created_at, f.created_at,
       CASE WHEN f.state = 'DUPLICATE' THEN f.created_at END, f.token_id
     FROM f
     WHERE f.project_id IS NOT NULL AND f.sender_id IS NOT NULL AND f.session_ok AND (f.recipient IS NULL OR f.recipient_id IS NOT NULL)
       AND (f.role IS NULL OR f.members IS NOT NULL)
     ORDER BY f.n
     ON CONFLICT DO NOTHING
     RETURNING *
   ), ev AS (
     INSERT INTO handoff_events (handoff_id, from_state, to_state, event, actor_kind, actor_id, token_id, reason, detail, revision, created_at)
     SELECT h.id, NULL::delivery_state, f.state, f.event, f.actor_kind, f.actor_id, f.token_id, f.reason, f.event_detail, 0, h.created_at
     FROM h JOIN f ON f.id = h.id
     UNION ALL
     SELECT h.id, f.state, h.delivery_state, f.busy_event, f.busy_actor_kind, f.busy_actor_id, NULL::uuid, f.busy_reason, NULL::jsonb, 1, h.created_at
     FROM h JOIN f ON f.id = h.id WHERE h.revision = 1
     RETURNING id, handoff_id
   ), evs AS (
     SELECT handoff_id, array_agg(id::text ORDER BY id) AS ids FROM ev GROUP BY handoff_id
   )
   SELECT f.n, f.project_id AS "foundProject", f.sender_id AS "foundSender", f.recipient_id AS "foundRecipient",
     f.provider AS "foundProvider", f.generation AS "foundGeneration", f.deployment AS "foundDeployment",
     f.session_ok AS "foundSession", f.key AS "foundKey",
     (SELECT c.rule FROM connections c WHERE c.from_id = f.sender_id AND c.to_id = f.recipient_id) AS "foundRule",
     (SELECT st.value FROM settings st WHERE st.key = 'connections') AS "foundConnections",
     evs.ids AS "foundEvents", CASE WHEN f.role IS NOT NULL THEN coalesce(f.members, '[]') END AS "foundMembers", ${handoffColumns('h')}
   FROM f LEFT JOIN h ON h.id = f.id LEFT JOIN evs ON evs.handoff_id = f.id
   ORDER BY f.n`;

/**
 * Enrolls a handoff in one statement: resolves the project and both agents by handle,
 * snapshots the recipient (generation, provider, session), inserts the row and its creation
 * event. Inserts nothing on any unique conflict (idempotency key, or an identical handoff
 * still in progress); the outcome says which agents and key were involved. Enrollments of
 * the same moment share the statement (GroupCommit): each row is resolved, checked and
 * inserted on its own, as if alone, and one commit covers them.
 */
export async function enrollMany(db: Queryable, items: Array<{ e: Enrollment; event: EventWrite }>): Promise<EnrollOutcome[]> {
  type Row = HandoffRecord & {
    n: number;
    foundProject: string | null;
    foundSender: string | null;
    foundRecipient: string | null;
    foundProvider: ProviderName | null;
    foundGeneration: number | null;
    foundDeployment: string | null;
    foundSession: boolean;
    foundKey: string | null;
    foundRule: 'allow' | 'block' | null;
    foundConnections: unknown;
    foundEvents: string[] | null;
    foundMembers: RoleMember[] | null;
  };
  const input = items.map(({ e, event }, n) => ({
    n,
    id: e.id,
    project: e.projectSlug,
    sender: e.fromHandle,
    recipient: e.toHandle,
    session: e.sessionId,
    title: e.title,
    message: e.message,
    focus: e.focus,
    done_when: e.doneWhen,
    context_summary: e.contextSummary,
    open_questions: e.openQuestions,
    next_steps: e.nextSteps,
    due_at: e.dueAt,
    idempotency_key: e.idempotencyKey,
    content_hash: e.contentHash,
    duplicate_of: e.duplicateOfId,
    state: e.deliveryState,
    detail: e.deliveryDetail,
    guard: e.guardDuplicates,
    work_state: e.workState,
    created_at: e.createdAt,
    event: event.event,
    actor_kind: event.actorKind,
    actor_id: event.actorId,
    token_id: event.tokenId ?? null,
    reason: event.reason ?? null,
    event_detail: event.detail ?? null,
    busy_if_live: e.busyIfLive !== undefined,
    busy_state: e.busyIfLive?.to ?? 'BUSY',
    busy_event: e.busyIfLive?.event.event ?? null,
    busy_actor_kind: e.busyIfLive?.event.actorKind ?? 'system',
    busy_actor_id: e.busyIfLive?.event.actorId ?? null,
    busy_reason: e.busyIfLive?.event.reason ?? null,
    role: e.toRole,
  }));
  const { rows } = await prepared<Row>(db, ENROLL_SQL, [JSON.stringify(input), LIVE_TURN_STATES]);
  if (rows.length !== items.length) throw new Error(`enrollment returned ${rows.length} rows for ${items.length} handoffs`);
  return rows.map((row) => {
    const {
      n: _n,
      foundProject,
      foundSender,
      foundRecipient,
      foundProvider,
      foundGeneration,
      foundDeployment,
      foundSession,
      foundKey,
      foundRule,
      foundConnections,
      foundEvents,
      foundMembers,
      ...h
    } = row;
    return {
      projectId: foundProject,
      senderId: foundSender,
      recipientId: foundRecipient,
      recipientProvider: foundProvider,
      recipientGeneration: foundGeneration,
      recipientDeployment: foundDeployment,
      sessionFound: foundSession === true,
      inProgressKey: foundKey,
      connectionRule: foundRule,
      connectionsSetting: foundConnections,
      handoff: h.id ? h : null,
      eventIds: foundEvents ?? [],
      roleMembers: foundMembers,
    };
  });
}
