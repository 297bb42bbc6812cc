import type { CoreDeps } from './ports.ts';

/** What sending reminders touches: the one conditional statement, the clock, the log. */
export type SendRemindersDeps = Pick<CoreDeps, 'handoffs' | 'clock' | 'logger'>;

/**
 * Deadline reminders: each handoff whose due time has passed while it is still in progress
 * gets exactly one non-waking notification for its sender (recorded on the handoff, shown in
 * the sender's inbox). Exactly once even with several reconcilers: the mark is conditional.
 * @returns the ids of the handoffs reminded now.
 */
export async function sendReminders(deps: SendRemindersDeps): Promise<string[]> {
  const ids = await deps.handoffs.sendDueReminders(deps.clock.now(), 500);
  if (ids.length > 0) deps.logger.info({ count: ids.length }, 'deadline reminders sent');
  return ids;
}
