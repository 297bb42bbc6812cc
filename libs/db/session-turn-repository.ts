import type { DeliveryState } from '../domain/delivery-states.ts';
import { prepared, type Queryable } from './prepared.ts';

/** A Baton turn that reached a recipient's session (its attempt was accepted there). */
export interface SessionTurn {
  readonly requestId: string;
  readonly attemptStatus: string;
  readonly attemptError: string | null;
  readonly acceptedAt: Date;
  readonly handoffId: string;
  readonly title: string | null;
  readonly deliveryState: DeliveryState;
  readonly deliveryDetail: string | null;
}

/**
 * The newest Baton turns written into one session: attempts of handoffs to `recipientId` with
 * the same delivery target (the session the handoff was enrolled for), accepted there, newest
 * first. One statement over the recipient's handoffs (index on recipient_id) and their
 * attempts; it reads every handoff the recipient ever got, so it is asked only for sessions
 * that keep failed prompts (a Codex thread, a Claude Code session), whose turns take seconds.
 */
const SESSION_TURNS_SQL = `
  SELECT a.request_id AS "requestId", a.status::text AS "attemptStatus", a.error AS "attemptError", a.accepted_at AS "acceptedAt",
         h.id AS "handoffId", h.title, h.delivery_state::text AS "deliveryState", h.delivery_detail AS "deliveryDetail"
  FROM handoffs h
  JOIN delivery_attempts a ON a.handoff_id = h.id
  WHERE h.recipient_id = $1 AND a.delivery_target IS NOT DISTINCT FROM $2 AND a.accepted_at IS NOT NULL
  ORDER BY a.accepted_at DESC, a.number DESC
  LIMIT $3`;

/** Reads of the turns Baton wrote into a recipient's session (libs/handoffs/earlier-requests.ts). */
export class SessionTurnRepository {
  constructor(private readonly pool: Queryable) {}

  /** The newest `limit` turns written into the session, newest first. */
  async newestTurns(recipientId: string, deliveryTarget: string | null, limit: number): Promise<SessionTurn[]> {
    const { rows } = await prepared<SessionTurn>(this.pool, SESSION_TURNS_SQL, [recipientId, deliveryTarget, limit]);
    return rows;
  }
}
