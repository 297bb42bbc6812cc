import type { TurnUsage } from './turn-usage.ts';

/**
 * What a recipient reported about one turn after the write, by request id: a webhook agent's
 * signed callback (services/api `POST /v1/webhooks/callback`), stored in `turn_reports` and read
 * back by the webhook adapter. `running` may be followed by a final status; a final status is
 * never replaced (a different one for the same request id is `replay_conflict`).
 */
export const TURN_REPORT_STATUSES = ['running', 'returned', 'failed', 'busy', 'rejected'] as const;
export type TurnReportStatus = (typeof TURN_REPORT_STATUSES)[number];

export interface TurnReport {
  readonly requestId: string;
  readonly status: TurnReportStatus;
  readonly summary: string | null;
  readonly output: unknown;
  readonly error: string | null;
  /** What the agent reported the turn used (a final report's `usage`), or null. */
  readonly usage: TurnUsage | null;
  readonly receivedAt: Date;
}

/** A final report ends the turn; `running` does not. */
export function isFinalReport(status: TurnReportStatus): boolean {
  return status !== 'running';
}
