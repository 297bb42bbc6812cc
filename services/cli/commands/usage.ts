import type { Command } from 'commander';
import { UsageError, type CliContext } from '../cli-context.ts';
import { usageTable, type UsageReportJson } from '../usage-format.ts';

const AGO = /^(\d{1,6})([mhd])$/;
const UNIT_MS = { m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

/** A `--since`/`--until` value: an ISO 8601 time, or a span ago (`30m`, `6h`, `7d`). */
export function timeArg(flag: string, raw: string, now: Date): string {
  const ago = AGO.exec(raw);
  if (ago) return new Date(now.getTime() - Number(ago[1]) * UNIT_MS[ago[2] as keyof typeof UNIT_MS]).toISOString();
  if (!Number.isNaN(Date.parse(raw))) return raw;
  throw new UsageError(`${flag} takes an ISO 8601 time (2026-12-01T09:00:00Z) or a span ago (30m, 6h, 7d), not ${JSON.stringify(raw)}`);
}

/** `baton usage`: what the turns cost, per agent and model, over a time range (GET /v1/usage). */
export function registerUsageCommand(program: Command, ctx: CliContext): void {
  program
    .command('usage')
    .description("turn usage (time, tokens, cost) per agent and model; an agent's token sees its own turns")
    .option('--agent <agent>', 'only this agent')
    .option('--since <time>', 'from this time or span ago (default: the start of today, UTC)')
    .option('--until <time>', 'up to this time or span ago (default: now)')
    .option('--json', 'print JSON')
    .action(async (opts: { agent?: string; since?: string; until?: string; json?: boolean }, cmd: Command) => {
      const now = new Date();
      const q = new URLSearchParams();
      if (opts.agent) q.set('agent', opts.agent);
      if (opts.since) q.set('since', timeArg('--since', opts.since, now));
      if (opts.until) q.set('until', timeArg('--until', opts.until, now));
      const report = await ctx.client(cmd).get<UsageReportJson>(`/v1/usage${q.size > 0 ? `?${q}` : ''}`);
      if (opts.json) return ctx.json(report);
      ctx.out(`usage of ${report.agent ?? `project ${report.project}`} from ${report.since} to ${report.until}`);
      if (report.rows.length === 0) ctx.out('no turns ended in that time');
      else for (const line of usageTable(report, ctx.colour())) ctx.out(line);
    });
}
