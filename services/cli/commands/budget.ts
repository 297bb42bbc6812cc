import type { Command } from 'commander';
import { UsageError, type CliContext } from '../cli-context.ts';
import { renderTable, type Column } from '../table.ts';
import { formatUsd as usd } from '../../../libs/domain/budgets.ts';

interface BudgetJson {
  agent: string | null;
  tokensPerDay: number | null;
  usdPerDay: number | null;
  spentToday: { tokens: number; usd: number };
  holding: string | null;
  resetsAt: string;
  updatedAt: string;
}

const COLUMNS: readonly Column<BudgetJson>[] = [
  { header: 'BUDGET', value: (b) => (b.agent === null ? '(project)' : b.agent), max: 32 },
  { header: 'TOKENS/DAY', value: (b) => (b.tokensPerDay === null ? '-' : String(b.tokensPerDay)), align: 'right' },
  { header: 'USD/DAY', value: (b) => (b.usdPerDay === null ? '-' : usd(b.usdPerDay)), align: 'right' },
  { header: 'SPENT TOKENS', value: (b) => String(b.spentToday.tokens), align: 'right' },
  { header: 'SPENT USD', value: (b) => usd(b.spentToday.usd), align: 'right' },
  { header: 'STATUS', value: (b) => (b.holding ? 'spent: new turns HELD' : 'open') },
];

/** A `--tokens` value: a whole number of tokens. */
function tokensOption(v: string): number {
  if (!/^[1-9][0-9]{0,12}$/.test(v)) throw new UsageError('--tokens must be a whole number of tokens above 0');
  return Number(v);
}

/** A `--usd` value: dollars, e.g. 5 or 0.25. */
function usdOption(v: string): number {
  const n = Number(v);
  if (!/^[0-9]+(\.[0-9]+)?$/.test(v) || !(n > 0)) throw new UsageError('--usd must be an amount of US dollars above 0, e.g. 5 or 0.25');
  return n;
}

function print(ctx: CliContext, items: BudgetJson[], json: boolean | undefined): void {
  if (json) return ctx.json(items);
  if (items.length === 0) return ctx.out('no budgets: turns are not limited');
  for (const line of renderTable(COLUMNS, items, { colour: ctx.colour() })) ctx.out(line);
  for (const b of items) if (b.holding) ctx.out(b.holding);
  ctx.out(`today's window (UTC) ends ${items[0]!.resetsAt}`);
}

/** `budget set|show|clear`: what a project, or one agent, may spend a UTC day (over /v1/budgets). */
export function registerBudgetCommands(program: Command, ctx: CliContext): void {
  const budget = program
    .command('budget')
    .description("a project's or an agent's daily budget in tokens or USD; once spent, new turns are HELD until the next UTC day");
  budget
    .command('set')
    .description('set the budget of the project, or of one agent with --agent (replaces the one it had; admin)')
    .option('--agent <agent>', "the agent's budget instead of the project's")
    .option('--tokens <n>', 'tokens a day (input, output, cache reads and writes together)', tokensOption)
    .option('--usd <amount>', 'US dollars a day, as the runtimes reported the turns cost', usdOption)
    .option('--json', 'print JSON: the budgets after the change')
    .action(async (opts: { agent?: string; tokens?: number; usd?: number; json?: boolean }, cmd: Command) => {
      if (opts.tokens === undefined && opts.usd === undefined) throw new UsageError('name --tokens, --usd, or both');
      const { body } = await ctx.client(cmd).request<{ items: BudgetJson[] }>('PUT', '/v1/budgets', {
        ...(opts.agent ? { agent: opts.agent } : {}),
        ...(opts.tokens !== undefined ? { tokensPerDay: opts.tokens } : {}),
        ...(opts.usd !== undefined ? { usdPerDay: opts.usd } : {}),
      });
      print(ctx, body.items, opts.json);
    });
  budget
    .command('show')
    .description("the budgets and what today's turns spent (an agent token: those that cover it)")
    .option('--agent <agent>', "only the project's budget and this agent's")
    .option('--json', 'print JSON')
    .action(async (opts: { agent?: string; json?: boolean }, cmd: Command) => {
      const q = opts.agent ? `?agent=${encodeURIComponent(opts.agent)}` : '';
      const { items } = await ctx.client(cmd).get<{ items: BudgetJson[] }>(`/v1/budgets${q}`);
      print(ctx, items, opts.json);
    });
  budget
    .command('clear')
    .description("remove the project's budget, or one agent's with --agent; the holds it made are lifted (admin)")
    .option('--agent <agent>', "the agent's budget instead of the project's")
    .option('--json', 'print JSON: the budgets after the change')
    .action(async (opts: { agent?: string; json?: boolean }, cmd: Command) => {
      const q = opts.agent ? `?agent=${encodeURIComponent(opts.agent)}` : '';
      const { body } = await ctx.client(cmd).request<{ items: BudgetJson[] }>('DELETE', `/v1/budgets${q}`);
      if (opts.json) return ctx.json(body.items);
      ctx.out(`cleared the budget of ${opts.agent ? `agent ${opts.agent.toLowerCase()}` : 'the project'}`);
    });
}
