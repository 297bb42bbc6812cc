import type { UsageTotals } from '../../libs/domain/turn-usage.ts';
import type { AttemptUsageRow } from '../../libs/db/usage-repository.ts';
import type { HandoffUsage, UsageReport } from '../../libs/handoffs/turn-usage.ts';

/** Turn accounting as the API shows it (schemas/usage.ts): seconds rather than milliseconds, null for what was not reported. */

const seconds = (ms: number) => Math.round(ms) / 1000;

export function presentUsageTotals(t: UsageTotals) {
  return {
    turns: t.turns,
    turnSeconds: seconds(t.turnMs),
    inputTokens: t.inputTokens,
    outputTokens: t.outputTokens,
    cacheReadTokens: t.cacheReadTokens,
    cacheWriteTokens: t.cacheWriteTokens,
    costUsd: t.costUsd,
  };
}

export function presentAttemptUsage(a: AttemptUsageRow) {
  return {
    number: a.number,
    status: a.status,
    model: a.model ?? null,
    acceptedAt: a.acceptedAt?.toISOString() ?? null,
    finishedAt: a.finishedAt?.toISOString() ?? null,
    turnSeconds: a.turnMs === null ? null : seconds(a.turnMs),
    inputTokens: a.inputTokens ?? null,
    outputTokens: a.outputTokens ?? null,
    cacheReadTokens: a.cacheReadTokens ?? null,
    cacheWriteTokens: a.cacheWriteTokens ?? null,
    costUsd: a.costUsd ?? null,
  };
}

export function presentHandoffUsage(u: HandoffUsage) {
  return { attempts: u.attempts.map(presentAttemptUsage), total: presentUsageTotals(u.total) };
}

export function presentUsageReport(r: UsageReport) {
  return {
    project: r.project,
    agent: r.agent,
    since: r.since.toISOString(),
    until: r.until.toISOString(),
    rows: r.rows.map((row) => ({ agent: row.agent, provider: row.provider, model: row.model, ...presentUsageTotals({ ...row }) })),
    total: presentUsageTotals(r.total),
  };
}
