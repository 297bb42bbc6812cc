import { verifySignature } from '../adapters/webhook/webhook-signature.ts';
import { BatonError } from '../domain/errors.ts';
import { isUuid } from '../domain/ids.ts';
import type { TurnReport, TurnReportStatus } from '../domain/turn-report.ts';
import { checkReportedUsage, type TurnUsage } from '../domain/turn-usage.ts';
import type { TurnReportRepository } from '../db/turn-report-repository.ts';
import type { CoreDeps } from './ports.ts';

export type TurnReportDeps = Pick<CoreDeps, 'clock' | 'logger'> & { readonly turnReports: TurnReportRepository };

export interface SignedTurnReport {
  /** The body exactly as received: the signature covers these bytes. */
  readonly rawBody: string;
  readonly timestamp: string | undefined;
  readonly signature: string | undefined;
  readonly report: {
    readonly requestId: string;
    readonly status: TurnReportStatus;
    readonly summary?: string | undefined;
    readonly output?: unknown;
    /** What the turn used (docs/API.md, "Turn usage"); taken with a final status only. */
    readonly usage?: unknown;
    readonly error?: string | undefined;
  };
}

/**
 * Records what a webhook agent reported about one of its turns (the callback). The caller is
 * proven by the signature alone: the HMAC of timestamp and raw body with the secret of the agent
 * the turn was sent to. A repeat of the stored report is answered as a success and changes
 * nothing; `running` may be followed by a final report, a final report never changes. Nothing
 * here moves the handoff: the worker following the turn (or the reconciler observing it) reads
 * the report through the webhook adapter and records the end with the usual transitions. An
 * UNCERTAIN turn with a final report on record is due for observation at once (libs/db
 * uncertain-due.ts), so its owner's reconciler settles it within one interval, also after a
 * scan that found nothing.
 * @returns the stored report and whether this call stored it.
 * @throws BatonError turn_not_found, invalid_signature, stale_timestamp, replay_conflict
 */
export async function recordTurnReport(
  deps: TurnReportDeps,
  input: SignedTurnReport,
): Promise<{ report: TurnReport; outcome: 'recorded' | 'repeated' | 'stale' }> {
  const { requestId } = input.report;
  const turn = isUuid(requestId) ? await deps.turnReports.findTurn(requestId) : null;
  if (!turn || turn.provider !== 'webhook')
    throw new BatonError('turn_not_found', `no webhook turn has request id ${JSON.stringify(requestId)}`);
  const secret = turn.recipientSettings['secret'];
  const check =
    typeof secret === 'string' && secret !== ''
      ? verifySignature(secret, { timestamp: input.timestamp, signature: input.signature }, input.rawBody, deps.clock.now().getTime())
      : 'invalid_signature';
  if (check === 'invalid_signature') {
    throw new BatonError(
      'invalid_signature',
      "Baton-Signature is missing or does not match the body and Baton-Timestamp signed with the agent's secret",
    );
  }
  if (check === 'stale_timestamp') throw new BatonError('stale_timestamp', "Baton-Timestamp is more than 5 minutes from Baton's clock");
  const { status, summary, output, error } = input.report;
  let usage: TurnUsage | null = null;
  if (input.report.usage !== undefined && input.report.usage !== null) {
    if (status === 'running') throw new BatonError('validation_failed', 'usage is reported with a final status, not with running');
    const checked = checkReportedUsage(input.report.usage);
    if ('problem' in checked) throw new BatonError('validation_failed', checked.problem);
    usage = checked.usage;
  }
  const outcome = await deps.turnReports.record({
    requestId,
    attemptId: turn.attemptId,
    status,
    summary: summary ?? null,
    output: output ?? null,
    error: error ?? null,
    usage,
    receivedAt: deps.clock.now(),
  });
  if (outcome.kind === 'conflict') {
    throw new BatonError('replay_conflict', `request ${requestId} was already reported ${outcome.report.status}, with a different body`, {
      status: outcome.report.status,
    });
  }
  deps.logger.info({ handoffId: turn.handoffId, requestId, status, outcome: outcome.kind }, 'turn report received');
  return { report: outcome.report, outcome: outcome.kind };
}
