import { OPEN_STATES } from '../../domain/delivery-states.ts';
import { handoffColumns, stateList } from './columns.ts';

/*
 * The statements of routing by role (libs/handoffs/route-by-role.ts). A handoff sent to
 * `@role:<name>` is stored with `recipient_role` and no recipient; these bind it to one agent,
 * unbind a binding that went stale, and find the idle members that could take one.
 */

/** An agent with no handoff to it in an open delivery state: nothing queued, live, held or in doubt. */
const idle = (agent: string): string =>
  `NOT EXISTS (SELECT 1 FROM handoffs o WHERE o.recipient_id = ${agent} AND o.delivery_state IN (${stateList(OPEN_STATES)}))`;

/** The sender may reach the agent: no block, and an allow when connections are restricted (`$restricted`). */
const reachable = (sender: string, agent: string, restricted: string): string =>
  `NOT EXISTS (SELECT 1 FROM connections k WHERE k.from_id = ${sender} AND k.to_id = ${agent} AND k.rule = 'block')
     AND (NOT ${restricted} OR EXISTS (SELECT 1 FROM connections k WHERE k.from_id = ${sender} AND k.to_id = ${agent} AND k.rule = 'allow'))`;

/**
 * Binds one unbound role handoff to agent $1 (of deployment $2, at $3; $4: connections are
 * restricted), if the agent is active, declares a role and is idle. The pick is fair across
 * senders: the oldest dispatchable handoff of the sender (per role) with the fewest of its role
 * handoffs bound and still open, then send order. The bind is conditional (still unbound, at the
 * revision read, row locked with SKIP LOCKED), so two binders racing for one handoff bind it once
 * and the loser takes the next. Appends the `routed` event with the role's members (the
 * candidates) and why this one. Returns the bound handoff (and the event id), or no row.
 */
export const BIND_ROLE_SQL = `WITH me AS (
     SELECT a.id, a.handle, a.project_id, a.roles, a.provider, a.pool, a.generation, a.delivery_target
     FROM agents a
     WHERE a.id = $1::uuid AND a.removed_at IS NULL AND a.deployment = $2 AND a.roles <> '{}' AND ${idle('a.id')}
   ), senders AS (
     SELECT DISTINCT h.recipient_role AS role, h.sender_id
     FROM handoffs h, me
     WHERE h.project_id = me.project_id AND h.recipient_role = ANY(me.roles) AND h.settled_at IS NULL
       AND h.recipient_id IS NULL AND h.sender_id <> me.id
   ), cands AS (
     SELECT c.id, c.seq, f.n AS in_flight, s.role
     FROM senders s CROSS JOIN me
     CROSS JOIN LATERAL (
       SELECT count(*)::int AS n FROM handoffs b
       WHERE b.project_id = me.project_id AND b.recipient_role = s.role AND b.sender_id = s.sender_id
         AND b.settled_at IS NULL AND b.recipient_id IS NOT NULL
     ) f
     CROSS JOIN LATERAL (
       SELECT h.id, h.seq FROM handoffs h
       WHERE h.project_id = me.project_id AND h.recipient_role = s.role AND h.sender_id = s.sender_id AND h.settled_at IS NULL
         AND h.recipient_id IS NULL AND h.delivery_state = 'WAITING' AND (h.not_before IS NULL OR h.not_before <= $3)
       ORDER BY h.seq LIMIT 16
     ) c
     WHERE ${reachable('s.sender_id', 'me.id', '$4::boolean')}
   ), pick AS (
     SELECT h.id, h.revision, c.in_flight, c.role FROM handoffs h JOIN cands c ON c.id = h.id
     WHERE h.recipient_id IS NULL AND h.delivery_state = 'WAITING'
     ORDER BY c.in_flight, c.seq LIMIT 1
     FOR UPDATE OF h SKIP LOCKED
   ), members AS (
     SELECT coalesce(jsonb_agg(jsonb_build_object('agent', m.handle, 'provider', m.provider, 'idle', ${idle('m.id')}) ORDER BY m.handle), '[]') AS list,
       count(*) FILTER (WHERE ${idle('m.id')})::int AS idle
     FROM agents m, me, pick
     WHERE m.project_id = me.project_id AND pick.role = ANY(m.roles) AND m.removed_at IS NULL
   ), bound AS (
     UPDATE handoffs h SET recipient_id = me.id, recipient_generation = me.generation, provider = me.provider, pool = me.pool,
       delivery_target = me.delivery_target, routed_at = $3, delivery_detail = NULL, revision = h.revision + 1, updated_at = $3
     FROM pick, me
     WHERE h.id = pick.id AND h.recipient_id IS NULL AND h.revision = pick.revision AND h.delivery_state = 'WAITING'
     RETURNING h.*
   ), ev AS (
     INSERT INTO handoff_events (handoff_id, from_state, to_state, event, actor_kind, actor_id, reason, detail, revision, created_at)
     SELECT bound.id, 'WAITING', 'WAITING', 'routed', 'system', NULL,
       'bound to ' || me.handle || ' (role ' || pick.role || '): idle, and the first capable agent to ask for work',
       jsonb_build_object('role', pick.role, 'agent', me.handle, 'why', 'idle', 'idleMembers', members.idle,
         'senderInFlight', pick.in_flight, 'candidates', members.list),
       bound.revision, $3
     FROM bound, me, pick, members
     RETURNING id
   )
   SELECT ${handoffColumns('bound')}, (SELECT ev.id::text FROM ev) AS "eventId" FROM bound`;

/**
 * Unbinds role handoffs (at most $2, at $3) whose binding is older than $1 and that no turn has
 * reached: still WAITING, BUSY, HELD or OWNER_REJECTED at their agent, no attempt ever accepted.
 * Each goes back to WAITING with no recipient (its refusal count reset: it was the other
 * agent's) and a `rerouted` event. Locked with SKIP LOCKED and checked at the revision read, so a
 * writer that moved the row meanwhile wins and the row is left to it.
 */
export const REROUTE_STALE_SQL = `WITH stale AS (
     SELECT h.id, h.revision, h.delivery_state, h.recipient_role, r.handle
     FROM handoffs h JOIN agents r ON r.id = h.recipient_id
     WHERE h.recipient_role IS NOT NULL AND h.settled_at IS NULL AND h.recipient_id IS NOT NULL AND h.routed_at < $1
       AND h.delivery_state IN ('WAITING', 'BUSY', 'HELD', 'OWNER_REJECTED')
       AND NOT EXISTS (SELECT 1 FROM delivery_attempts t WHERE t.handoff_id = h.id AND t.accepted_at IS NOT NULL)
     ORDER BY h.routed_at LIMIT $2
     FOR UPDATE OF h SKIP LOCKED
   ), un AS (
     UPDATE handoffs h SET recipient_id = NULL, recipient_generation = NULL, provider = NULL, pool = '', delivery_target = NULL,
       routed_at = NULL, delivery_state = 'WAITING', not_before = NULL, refusals = 0, revision = h.revision + 1, updated_at = $3,
       delivery_detail = 'waiting for an agent with role ' || stale.recipient_role
     FROM stale WHERE h.id = stale.id AND h.revision = stale.revision
     RETURNING h.id, h.revision, stale.delivery_state AS from_state, stale.handle, stale.recipient_role
   )
   INSERT INTO handoff_events (handoff_id, from_state, to_state, event, actor_kind, actor_id, reason, detail, revision, created_at)
   SELECT un.id, un.from_state, 'WAITING', 'rerouted', 'system', NULL,
     'no turn written by ' || un.handle || ' within the reroute time; routed again',
     jsonb_build_object('role', un.recipient_role, 'from', un.handle, 'why', 'busy'), un.revision, $3
   FROM un
   RETURNING id::text`;

/**
 * Idle active agents of deployment $1 that could take an unbound role handoff now ($2: the
 * time; $3: connections are restricted): a member of its role in its project, not its sender,
 * reachable from it. At most $4, oldest agents first.
 */
export const IDLE_MEMBERS_SQL = `SELECT a.id AS "agentId", a.provider, a.pool
   FROM agents a
   WHERE a.deployment = $1 AND a.removed_at IS NULL AND a.roles <> '{}' AND ${idle('a.id')}
     AND EXISTS (
       SELECT 1 FROM handoffs h
       WHERE h.project_id = a.project_id AND h.recipient_role = ANY(a.roles) AND h.settled_at IS NULL AND h.recipient_id IS NULL
         AND h.delivery_state = 'WAITING' AND (h.not_before IS NULL OR h.not_before <= $2) AND h.sender_id <> a.id
         AND ${reachable('h.sender_id', 'a.id', '$3::boolean')}
     )
   ORDER BY a.created_at LIMIT $4`;
