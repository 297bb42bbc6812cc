import type { Command } from 'commander';
import { ALL_OWNERS_HELP, positiveInt, withAllOwners, type CliContext } from '../cli-context.ts';
import { handoffDetail, handoffLine, type HandoffJson } from '../format.ts';
import { LIMITS } from '../../../libs/domain/limits.ts';

/** `baton show ID`, `baton list`, `baton status` */
export function registerReadCommands(program: Command, ctx: CliContext): void {
  program
    .command('show')
    .description('one handoff with its attempts and timeline')
    .argument('<id>', 'handoff id')
    .option('--all-owners', ALL_OWNERS_HELP)
    .option('--json', 'print JSON')
    .action(async (id: string, opts: { allOwners?: boolean; json?: boolean }, cmd: Command) => {
      const h = await ctx.client(cmd).get<HandoffJson>(withAllOwners(`/v1/handoffs/${encodeURIComponent(id)}`, opts.allOwners));
      if (opts.json) ctx.json(h);
      else ctx.out(handoffDetail(h));
    });

  program
    .command('list')
    .description('handoffs, newest first')
    .option('--to <agent>', 'only to this recipient')
    .option('--from <agent>', 'only from this sender')
    .option('--state <states>', 'only in these states (comma-separated, e.g. WAITING,BUSY)')
    .option('--limit <n>', 'page size', positiveInt('--limit', LIMITS.pageSizeMax), 50)
    .option('--cursor <cursor>', 'continue from a previous page')
    .option('--all-owners', ALL_OWNERS_HELP)
    .option('--json', 'print JSON')
    .action(async (opts: { to?: string; from?: string; state?: string; limit: number; cursor?: string; allOwners?: boolean; json?: boolean }, cmd: Command) => {
      const q = new URLSearchParams({ limit: String(opts.limit) });
      if (opts.to) q.set('recipient', opts.to);
      if (opts.from) q.set('sender', opts.from);
      if (opts.state) q.set('state', opts.state.toUpperCase());
      if (opts.cursor) q.set('cursor', opts.cursor);
      if (opts.allOwners) q.set('all_owners', 'true');
      const page = await ctx.client(cmd).get<{ items: HandoffJson[]; nextCursor: string | null }>(`/v1/handoffs?${q}`);
      if (opts.json) return ctx.json(page);
      if (page.items.length === 0) ctx.out('no handoffs');
      for (const h of page.items) ctx.out(handoffLine(h));
      if (page.nextCursor) ctx.out(`more: baton list --cursor ${page.nextCursor}${opts.allOwners ? ' --all-owners' : ''}`);
    });

  program
    .command('status')
    .description('handoff counts by delivery state')
    .option('--all-owners', ALL_OWNERS_HELP)
    .option('--json', 'print JSON')
    .action(async (opts: { allOwners?: boolean; json?: boolean }, cmd: Command) => {
      const s = await ctx.client(cmd).get<{ project: string; total: number; byState: Record<string, number> }>(withAllOwners('/v1/status', opts.allOwners));
      if (opts.json) return ctx.json(s);
      ctx.out(`project ${s.project}: ${s.total} handoffs`);
      for (const [state, n] of Object.entries(s.byState)) if (n > 0) ctx.out(`  ${state.padEnd(15)} ${n}`);
    });
}
