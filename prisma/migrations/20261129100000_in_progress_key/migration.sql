-- Duplicate detection without a lock: a handoff still in progress (and sent without an
-- idempotency key) carries in_progress_key = sender:recipient:generation:content hash, which is
-- unique; it is cleared when the handoff settles. An identical send then conflicts on the unique
-- index (race-free: the second insert waits for the first to commit) and is recorded as
-- DUPLICATE. content_hash now covers the content only (the key adds who and to whom).
ALTER TABLE handoffs ADD COLUMN in_progress_key text;
CREATE UNIQUE INDEX handoffs_in_progress_key_key ON handoffs (in_progress_key);
DROP INDEX handoffs_sender_id_recipient_id_content_hash_idx;
