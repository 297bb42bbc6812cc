import type pg from 'pg';
import type { DeliveryState } from '../domain/delivery-states.ts';
import { prepared, type Queryable } from './prepared.ts';

/** Which events a subscription wants; an absent key matches every event. */
export interface SubscriptionFilter {
  /** Only this handoff's events. */
  readonly handoffId?: string;
  /** Only handoffs one of these agents (handles) sent or received. */
  readonly agents?: readonly string[];
  /** Only events that moved the handoff into one of these delivery states. */
  readonly states?: readonly DeliveryState[];
  /** Only these event kinds (the transition table's event names, e.g. `returned`). */
  readonly events?: readonly string[];
}

export type SubscriptionStatusName = 'active' | 'paused';

/** What a subscription POSTs (prisma/schema.prisma `SubscriptionKind`). */
export type SubscriptionKind = 'webhook' | 'a2a_push';

/** An A2A push-notification config, as the subscription of kind `a2a_push` that delivers it. */
export interface PushConfig {
  /** The config's A2A id, unique per task. */
  readonly configId: string;
  /** The client's token (X-A2A-Notification-Token); '' when none. */
  readonly token: string;
  /** Sent as `Authorization: <scheme> <credentials>`; null when none. */
  readonly authentication: { readonly scheme: string; readonly credentials: string } | null;
  /** The A2A version it was registered over: the shape of the body. */
  readonly wireVersion: string;
}

/** A subscription as stored, with its owner's handle. `secret` is for the dispatcher: no read of the API shows it. */
export interface SubscriptionRecord {
  readonly id: string;
  readonly projectId: string;
  readonly ownerAgentId: string | null;
  readonly ownerHandle: string | null;
  readonly url: string;
  readonly secret: string;
  readonly filter: SubscriptionFilter;
  readonly status: SubscriptionStatusName;
  readonly pausedReason: string | null;
  readonly position: bigint;
  readonly attempts: number;
  readonly failingSince: Date | null;
  readonly nextAttemptAt: Date | null;
  readonly lastError: string | null;
  readonly createdAt: Date;
  readonly deadLetters: number;
  readonly kind: SubscriptionKind;
  /** a2a_push: the task (handoff) it is for; null for a webhook. */
  readonly handoffId: string | null;
  /** a2a_push: the config; null for a webhook. */
  readonly push: PushConfig | null;
}

export interface DeadLetterRecord {
  readonly eventId: bigint;
  readonly lastError: string;
  readonly attempts: number;
  readonly createdAt: Date;
}

const COLUMNS = `s.id, s.project_id AS "projectId", s.owner_agent_id AS "ownerAgentId", o.handle AS "ownerHandle", s.url, s.secret,
  s.filter, s.status::text AS status, s.paused_reason AS "pausedReason", s.position, s.attempts, s.failing_since AS "failingSince",
  s.next_attempt_at AS "nextAttemptAt", s.last_error AS "lastError", s.created_at AS "createdAt",
  (SELECT count(*)::int FROM subscription_dead_letters d WHERE d.subscription_id = s.id) AS "deadLetters",
  s.kind::text AS kind, s.handoff_id AS "handoffId", s.push_config_id AS "pushConfigId", s.push_token AS "pushToken",
  s.push_authentication AS "pushAuthentication", s.push_wire_version AS "pushWireVersion"`;
const FROM = `subscriptions s LEFT JOIN agents o ON o.id = s.owner_agent_id`;

type Row = Omit<SubscriptionRecord, 'position' | 'push'> & {
  position: string;
  pushConfigId: string | null;
  pushToken: string | null;
  pushAuthentication: PushConfig['authentication'];
  pushWireVersion: string | null;
};
const record = ({ pushConfigId, pushToken, pushAuthentication, pushWireVersion, ...r }: Row): SubscriptionRecord => ({
  ...r,
  position: BigInt(r.position),
  push:
    r.kind === 'a2a_push'
      ? {
          configId: pushConfigId ?? r.id,
          token: pushToken ?? '',
          authentication: pushAuthentication,
          wireVersion: pushWireVersion ?? '1.0',
        }
      : null,
});

/**
 * Raw SQL over `subscriptions` and `subscription_dead_letters`. Every write of the dispatcher
 * names the position it acted on and its lease holder: a write whose position moved meanwhile
 * (a replay rewound it) or whose lease another worker took changes nothing and answers false.
 */
export class SubscriptionRepository {
  constructor(private readonly pool: Queryable) {}

  private q<T extends pg.QueryResultRow>(text: string, values: unknown[]): Promise<pg.QueryResult<T>> {
    return prepared<T>(this.pool, text, values);
  }

  async create(s: {
    id: string;
    projectId: string;
    ownerAgentId: string | null;
    url: string;
    secret: string;
    filter: SubscriptionFilter;
    /** The last event id it is done with; null: the log's top now (only later events are delivered). */
    position: bigint | null;
    at: Date;
  }): Promise<SubscriptionRecord> {
    await this.q(
      `INSERT INTO subscriptions (id, project_id, owner_agent_id, url, secret, filter, position, created_at)
       VALUES ($1, $2, $3, $4, $5, $6, coalesce($7::bigint, (SELECT max(id) FROM handoff_events), 0), $8)`,
      [s.id, s.projectId, s.ownerAgentId, s.url, s.secret, JSON.stringify(s.filter), s.position, s.at],
    );
    return (await this.find(s.id))!;
  }

  /**
   * Registers an A2A push-notification config for a task: a subscription of kind a2a_push to
   * that handoff's events, from just before its first event (`fromStart`, a config sent with the
   * message that made the task) or from now. At most `max` per task; a config id the task has
   * already keeps the config it names (a repeated message). Answers the config's subscription,
   * or null when the task has `max` already.
   */
  async createPushConfig(s: {
    id: string;
    projectId: string;
    ownerAgentId: string | null;
    handoffId: string;
    url: string;
    secret: string;
    push: PushConfig;
    fromStart: boolean;
    max: number;
    at: Date;
  }): Promise<SubscriptionRecord | null> {
    const { rows } = await this.q<{ id: string }>(
      `WITH existing AS (SELECT id FROM subscriptions WHERE handoff_id = $4::uuid AND push_config_id = $8::text),
       inserted AS (
         INSERT INTO subscriptions (id, project_id, owner_agent_id, kind, handoff_id, url, secret, filter, position, created_at,
           push_config_id, push_token, push_authentication, push_wire_version)
         SELECT $1, $2, $3, 'a2a_push', $4::uuid, $5, $6, jsonb_build_object('handoffId', $4::uuid::text),
           CASE WHEN $12::boolean THEN coalesce((SELECT min(id) - 1 FROM handoff_events WHERE handoff_id = $4::uuid), 0)
                ELSE coalesce((SELECT max(id) FROM handoff_events), 0) END,
           $7::timestamptz, $8::text, $9::text, $10::jsonb, $11::text
         WHERE NOT EXISTS (SELECT 1 FROM existing)
           AND (SELECT count(*) FROM subscriptions WHERE handoff_id = $4::uuid) < $13::int
         ON CONFLICT (handoff_id, push_config_id) DO NOTHING
         RETURNING id)
       SELECT id FROM inserted UNION ALL SELECT id FROM existing`,
      [
        s.id,
        s.projectId,
        s.ownerAgentId,
        s.handoffId,
        s.url,
        s.secret,
        s.at,
        s.push.configId,
        s.push.token === '' ? null : s.push.token,
        s.push.authentication === null ? null : JSON.stringify(s.push.authentication),
        s.push.wireVersion,
        s.fromStart,
        s.max,
      ],
    );
    const id = rows[0]?.id ?? (await this.findPushConfig(s.handoffId, s.push.configId))?.id;
    return id === undefined ? null : this.find(id);
  }

  /** A task's push configs (subscriptions of kind a2a_push), oldest first. */
  async pushConfigs(handoffId: string): Promise<SubscriptionRecord[]> {
    const { rows } = await this.q<Row>(`SELECT ${COLUMNS} FROM ${FROM} WHERE s.handoff_id = $1 ORDER BY s.created_at, s.id`, [handoffId]);
    return rows.map(record);
  }

  /** One push config of a task, by its A2A id. */
  async findPushConfig(handoffId: string, configId: string): Promise<SubscriptionRecord | null> {
    const { rows } = await this.q<Row>(`SELECT ${COLUMNS} FROM ${FROM} WHERE s.handoff_id = $1 AND s.push_config_id = $2`, [
      handoffId,
      configId,
    ]);
    return rows[0] ? record(rows[0]) : null;
  }

  async find(id: string): Promise<SubscriptionRecord | null> {
    const { rows } = await this.q<Row>(`SELECT ${COLUMNS} FROM ${FROM} WHERE s.id = $1`, [id]);
    return rows[0] ? record(rows[0]) : null;
  }

  /** The project's subscriptions (only those `ownerAgentId` owns, when given), oldest first. */
  async list(projectId: string, ownerAgentId: string | null, limit: number): Promise<SubscriptionRecord[]> {
    const { rows } = await this.q<Row>(
      `SELECT ${COLUMNS} FROM ${FROM} WHERE s.project_id = $1 AND ($2::uuid IS NULL OR s.owner_agent_id = $2::uuid)
       ORDER BY s.created_at, s.id LIMIT $3`,
      [projectId, ownerAgentId, limit],
    );
    return rows.map(record);
  }

  async remove(id: string): Promise<boolean> {
    return ((await this.q(`DELETE FROM subscriptions WHERE id = $1`, [id])).rowCount ?? 0) > 0;
  }

  async deadLetters(id: string, limit: number): Promise<DeadLetterRecord[]> {
    const { rows } = await this.q<Omit<DeadLetterRecord, 'eventId'> & { eventId: string }>(
      `SELECT event_id AS "eventId", last_error AS "lastError", attempts, created_at AS "createdAt"
       FROM subscription_dead_letters WHERE subscription_id = $1 ORDER BY event_id LIMIT $2`,
      [id, limit],
    );
    return rows.map((r) => ({ ...r, eventId: BigInt(r.eventId) }));
  }

  /** Whether any subscription is active (the dispatcher reads no log while none is). */
  async anyActive(): Promise<boolean> {
    const { rows } = await this.q<{ any: boolean }>(`SELECT EXISTS (SELECT 1 FROM subscriptions WHERE status = 'active') AS any`, []);
    return rows[0]?.any === true;
  }

  /**
   * Leases up to `limit` active subscriptions that are due (no back-off pending), behind `top`,
   * and not leased by another worker now: one deliverer per subscription across workers. A
   * subscription to one task (an A2A push config) is due only when its handoff has an event
   * after its position (one probe of the (handoff_id, id) index), so finished tasks' configs
   * cost no write per pass however long the log grows.
   */
  async lease(holder: string, now: Date, until: Date, top: bigint, limit: number): Promise<SubscriptionRecord[]> {
    const { rows } = await this.q<{ id: string }>(
      `UPDATE subscriptions SET lease_holder = $1, lease_until = $3
       WHERE id IN (SELECT id FROM subscriptions
         WHERE status = 'active' AND position < $4 AND (next_attempt_at IS NULL OR next_attempt_at <= $2)
           AND (lease_until IS NULL OR lease_until < $2 OR lease_holder = $1)
           AND (handoff_id IS NULL
             OR position < coalesce((SELECT max(e.id) FROM handoff_events e WHERE e.handoff_id = subscriptions.handoff_id), 0))
         ORDER BY next_attempt_at NULLS FIRST, id LIMIT $5 FOR UPDATE SKIP LOCKED)
       RETURNING id`,
      [holder, now, until, top, limit],
    );
    if (rows.length === 0) return [];
    const found = await this.q<Row>(`SELECT ${COLUMNS} FROM ${FROM} WHERE s.id = ANY($1::uuid[]) ORDER BY s.id`, [rows.map((r) => r.id)]);
    return found.rows.map(record);
  }

  /** Moves the position from `from` to `to` after a delivery (or past events that do not match), ending any run of failures; extends the lease. */
  async advance(id: string, holder: string, from: bigint, to: bigint, until: Date, delivered: boolean): Promise<boolean> {
    const { rowCount } = await this.q(
      `UPDATE subscriptions SET position = $4, lease_until = $5, attempts = 0, next_attempt_at = NULL,
         failing_since = CASE WHEN $6 THEN NULL ELSE failing_since END, last_error = CASE WHEN $6 THEN NULL ELSE last_error END
       WHERE id = $1 AND lease_holder = $2 AND position = $3`,
      [id, holder, from, to, until, delivered],
    );
    return (rowCount ?? 0) > 0;
  }

  /** Records a failed attempt at the event after `at` and when to try again. */
  async failed(id: string, holder: string, at: bigint, f: { attempts: number; error: string; now: Date; retryAt: Date }): Promise<boolean> {
    const { rowCount } = await this.q(
      `UPDATE subscriptions SET attempts = $4, last_error = $5, failing_since = coalesce(failing_since, $6), next_attempt_at = $7,
         lease_holder = NULL, lease_until = NULL
       WHERE id = $1 AND lease_holder = $2 AND position = $3`,
      [id, holder, at, f.attempts, f.error, f.now, f.retryAt],
    );
    return (rowCount ?? 0) > 0;
  }

  /** Gives up on event `eventId` (dead letter) and moves the position to it, keeping the run of failures. */
  async deadLetter(
    id: string,
    holder: string,
    from: bigint,
    d: { eventId: bigint; error: string; attempts: number; now: Date; until: Date },
  ) {
    const { rows } = await this.q<{ ok: boolean }>(
      `WITH moved AS (
         UPDATE subscriptions SET position = $4, attempts = 0, next_attempt_at = NULL, last_error = $5,
           failing_since = coalesce(failing_since, $7), lease_until = $8
         WHERE id = $1 AND lease_holder = $2 AND position = $3 RETURNING id)
       , dead AS (INSERT INTO subscription_dead_letters (subscription_id, event_id, last_error, attempts, created_at)
         SELECT id, $4, $5, $6, $7 FROM moved
         ON CONFLICT (subscription_id, event_id) DO UPDATE SET last_error = EXCLUDED.last_error, attempts = EXCLUDED.attempts,
           created_at = EXCLUDED.created_at RETURNING 1)
       SELECT EXISTS (SELECT 1 FROM moved) AS ok`,
      [id, holder, from, d.eventId, d.error, d.attempts, d.now, d.until],
    );
    return rows[0]?.ok === true;
  }

  /** Pauses a subscription that kept failing; delivery stops until it is resumed. */
  async pause(id: string, holder: string, reason: string): Promise<boolean> {
    const { rowCount } = await this.q(
      `UPDATE subscriptions SET status = 'paused', paused_reason = $3, lease_holder = NULL, lease_until = NULL
       WHERE id = $1 AND lease_holder = $2`,
      [id, holder, reason],
    );
    return (rowCount ?? 0) > 0;
  }

  /** Lets another worker (or this one, next time) take the subscription at once. */
  async release(id: string, holder: string): Promise<void> {
    await this.q(`UPDATE subscriptions SET lease_holder = NULL, lease_until = NULL WHERE id = $1 AND lease_holder = $2`, [id, holder]);
  }

  /** A paused subscription active again, from where it stopped, with a fresh run of attempts (an active one is left as it is). */
  async resume(id: string): Promise<void> {
    await this.q(
      `UPDATE subscriptions SET status = 'active', paused_reason = NULL, failing_since = NULL, attempts = 0, next_attempt_at = NULL,
         lease_holder = NULL, lease_until = NULL
       WHERE id = $1 AND status = 'paused'`,
      [id],
    );
  }

  /**
   * Delivers again from just after `after` (null: from the oldest dead letter, 0 events if there
   * is none), clears the dead letters at or after that point and makes the subscription active.
   * Answers the new position, or null when there was nothing to replay. A deliverer holding the
   * lease loses it: its next write names the old position and changes nothing.
   */
  async replay(id: string, after: bigint | null): Promise<bigint | null> {
    const { rows } = await this.q<{ position: string | null }>(
      `WITH target AS (
         SELECT coalesce($2::bigint, (SELECT min(event_id) - 1 FROM subscription_dead_letters WHERE subscription_id = $1)) AS position),
       cleared AS (DELETE FROM subscription_dead_letters d USING target t
         WHERE d.subscription_id = $1 AND t.position IS NOT NULL AND d.event_id > t.position RETURNING 1)
       UPDATE subscriptions s SET position = t.position, status = 'active', paused_reason = NULL, failing_since = NULL, attempts = 0,
         next_attempt_at = NULL, last_error = NULL, lease_holder = NULL, lease_until = NULL
       FROM target t WHERE s.id = $1 AND t.position IS NOT NULL
       RETURNING s.position::text AS position`,
      [id, after],
    );
    return rows[0]?.position != null ? BigInt(rows[0].position) : null;
  }
}
