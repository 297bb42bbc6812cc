import type { TurnReport, TurnReportStatus } from '../domain/turn-report.ts';
import { prepared, type Queryable } from './prepared.ts';
import type { ProviderName } from './records.ts';

/** The turn a request id belongs to, with what is needed to check a callback's signature. */
export interface ReportedTurn {
  readonly attemptId: string;
  readonly handoffId: string;
  readonly recipientId: string | null;
  /** The provider the handoff was enrolled for. */
  readonly provider: ProviderName | null;
  /** The recipient agent's current provider settings (the webhook secret among them). */
  readonly recipientSettings: Record<string, unknown>;
}

export type TurnReportWrite = Omit<TurnReport, 'receivedAt'> & { readonly attemptId: string; readonly receivedAt: Date };

/**
 * - recorded: stored (first report, or a final one replacing `running`)
 * - repeated: the same report was already stored (or another `running` while running)
 * - stale: a `running` report after the final one; nothing changed
 * - conflict: a different final report is already stored; nothing changed
 */
export type RecordOutcome = { readonly kind: 'recorded' | 'repeated' | 'stale' | 'conflict'; readonly report: TurnReport };

const COLUMNS = `request_id AS "requestId", status, summary, output, error, usage, received_at AS "receivedAt"`;

/** Raw SQL over `turn_reports`: what webhook agents reported about their turns. */
export class TurnReportRepository {
  constructor(private readonly pool: Queryable) {}

  async findTurn(requestId: string): Promise<ReportedTurn | null> {
    const { rows } = await prepared<ReportedTurn>(
      this.pool,
      `SELECT a.id AS "attemptId", h.id AS "handoffId", h.recipient_id AS "recipientId", h.provider::text AS provider,
              COALESCE(r.provider_settings, '{}'::jsonb) AS "recipientSettings"
       FROM delivery_attempts a JOIN handoffs h ON h.id = a.handoff_id LEFT JOIN agents r ON r.id = h.recipient_id
       WHERE a.request_id = $1`,
      [requestId],
    );
    return rows[0] ?? null;
  }

  async find(requestId: string): Promise<TurnReport | null> {
    const { rows } = await prepared<TurnReport>(this.pool, `SELECT ${COLUMNS} FROM turn_reports WHERE request_id = $1`, [requestId]);
    return rows[0] ?? null;
  }

  /** Stores a report unless a final one is already there (one statement; concurrent callbacks serialise on the row). */
  async record(r: TurnReportWrite): Promise<RecordOutcome> {
    const output = r.output === undefined || r.output === null ? null : JSON.stringify(r.output);
    const usage = r.usage === null ? null : JSON.stringify(r.usage);
    const written = await prepared<TurnReport>(
      this.pool,
      `INSERT INTO turn_reports (request_id, attempt_id, status, summary, output, error, usage, received_at)
       VALUES ($1, $2, $3, $4, $5::jsonb, $6, $8::jsonb, $7)
       ON CONFLICT (request_id) DO UPDATE
         SET status = EXCLUDED.status, summary = EXCLUDED.summary, output = EXCLUDED.output, error = EXCLUDED.error,
             usage = EXCLUDED.usage, received_at = EXCLUDED.received_at
         WHERE turn_reports.status = 'running' AND EXCLUDED.status <> 'running'
       RETURNING ${COLUMNS}`,
      [r.requestId, r.attemptId, r.status, r.summary, output, r.error, r.receivedAt, usage],
    );
    const stored = written.rows[0];
    if (stored) return { kind: 'recorded', report: stored };
    const { rows } = await prepared<TurnReport & { same: boolean }>(
      this.pool,
      `SELECT ${COLUMNS},
              (status = $2 AND summary IS NOT DISTINCT FROM $3 AND output IS NOT DISTINCT FROM $4::jsonb AND error IS NOT DISTINCT FROM $5
               AND usage IS NOT DISTINCT FROM $6::jsonb) AS same
       FROM turn_reports WHERE request_id = $1`,
      [r.requestId, r.status, r.summary, output, r.error, usage],
    );
    const existing = rows[0];
    if (!existing) throw new Error(`turn report ${r.requestId} neither written nor found`);
    const { same, ...report } = existing;
    const existingStatus: TurnReportStatus = report.status;
    if (same || (existingStatus === 'running' && r.status === 'running')) return { kind: 'repeated', report };
    return { kind: r.status === 'running' ? 'stale' : 'conflict', report };
  }
}
