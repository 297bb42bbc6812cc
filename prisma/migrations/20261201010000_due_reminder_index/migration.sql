-- The reconciler's deadline reminders (HandoffRepository.sendDueReminders) look, every pass, for
-- open handoffs past their due time that got no reminder yet. Without an index that was a scan of
-- the whole handoffs table each second (37-45 ms at 30,000 rows in the bench, growing with the
-- table). Partial: only handoffs with a due time, not yet reminded and not settled are in it, so
-- the state changes of the rest (nearly every handoff) never touch it.
CREATE INDEX handoffs_due_at_idx ON handoffs (due_at)
  WHERE due_at IS NOT NULL AND reminder_sent_at IS NULL AND settled_at IS NULL;
