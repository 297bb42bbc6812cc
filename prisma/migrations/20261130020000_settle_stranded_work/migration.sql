-- Data only, no schema change. Before this release a delivery could end without its work
-- (a released or proven-absent turn left the work open; removing an agent left its handoffs
-- WAITING). The code now settles the work in the same statement (libs/domain/work-states.ts:
-- workMoveWhenDeliverySettles); this brings rows written before it to the same state, each
-- move with its event row, as the code would. (A claim that still shows an earlier attempt's
-- result is left alone: that result is in no event row yet, and the next return replaces it.)

-- 1. Handoffs to a removed agent that no turn has reached: UNAVAILABLE, their work expired.
WITH stranded AS (
  UPDATE handoffs h SET delivery_state = 'UNAVAILABLE', revision = h.revision + 1, updated_at = now(), settled_at = now(),
    in_progress_key = NULL, delivery_detail = 'the recipient was removed; not redirected',
    work_state = CASE WHEN h.work_state IN ('open', 'claimed') THEN 'expired'::work_state ELSE h.work_state END,
    work_revision = CASE WHEN h.work_state IN ('open', 'claimed') THEN h.work_revision + 1 ELSE h.work_revision END,
    claim_token = NULL, lease_expires_at = NULL
  FROM agents a, handoffs b
  WHERE a.id = h.recipient_id AND a.removed_at IS NOT NULL AND b.id = h.id
    AND (h.delivery_state IN ('WAITING', 'BUSY', 'HELD', 'OWNER_REJECTED') OR (h.delivery_state = 'ACCEPTED' AND h.attempt_count = 0))
  RETURNING h.id, b.delivery_state AS from_state, b.work_state AS work_from, h.work_state AS work_to, h.revision
)
INSERT INTO handoff_events (handoff_id, from_state, to_state, work_from_state, work_to_state, event, actor_kind, reason, revision, created_at)
SELECT id, from_state, 'UNAVAILABLE'::delivery_state, NULL::work_state, NULL::work_state, 'recipient_gone', 'system'::actor_kind, 'the recipient was removed (settled by migration)', revision, now() FROM stranded
UNION ALL
SELECT id, 'UNAVAILABLE'::delivery_state, 'UNAVAILABLE'::delivery_state, work_from, work_to, 'expired', 'system'::actor_kind, 'the recipient was removed (settled by migration)', revision, now()
FROM stranded WHERE work_from IN ('open', 'claimed');

-- 2. Work still open or claimed although its delivery ended where nobody will do it.
WITH settled AS (
  UPDATE handoffs h SET work_state = CASE WHEN h.delivery_state = 'CANCELLED' THEN 'cancelled' ELSE 'expired' END::work_state,
    work_revision = h.work_revision + 1, claim_token = NULL, lease_expires_at = NULL, updated_at = now()
  FROM handoffs b
  WHERE b.id = h.id AND h.work_state IN ('open', 'claimed') AND h.delivery_state IN ('CANCELLED', 'UNAVAILABLE', 'DUPLICATE')
  RETURNING h.id, h.delivery_state, b.work_state AS work_from, h.work_state AS work_to, h.revision
)
INSERT INTO handoff_events (handoff_id, from_state, to_state, work_from_state, work_to_state, event, actor_kind, reason, revision, created_at)
SELECT id, delivery_state, delivery_state, work_from, work_to, CASE WHEN work_to = 'cancelled' THEN 'cancelled' ELSE 'expired' END, 'system'::actor_kind,
  'the delivery had ended ' || delivery_state || ' (settled by migration)', revision, now()
FROM settled;

