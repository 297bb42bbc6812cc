import type { Command } from 'commander';
import { allOwnersOptions, positiveInt, withAllOwners, type CliContext } from '../cli-context.ts';
import { handoffDetail, handoffTable, type HandoffJson } from '../format.ts';
import { LIMITS } from '../../../libs/domain/limits.ts';

/**
 * The line that tells an admin with a narrowed view (`--no-all-owners`) how many handoffs it
 * does not see. The API counts them for admin tokens only (`hidden`): an agent is never told
 * how much it may not see (libs/domain/visibility.ts).
 */
export function hiddenNote(ctx: CliContext, hidden: number | undefined): void {
  if (hidden) ctx.note(`${hidden} handoff${hidden === 1 ? '' : 's'} you may not see without --all-owners`);
}

/** The flag that asks a later page for the same view as this one. */
const viewFlag = (given: boolean | undefined, all: boolean) => (given === false ? ' --no-all-owners' : all ? ' --all-owners' : '');

/** `baton show ID`, `baton list`, `baton status` */
export function registerReadCommands(program: Command, ctx: CliContext): void {
  allOwnersOptions(program.command('show').description('one handoff with its attempts and timeline').argument('<id>', 'handoff id'))
    .option('--json', 'print JSON')
    .action(async (id: string, opts: { allOwners?: boolean; json?: boolean }, cmd: Command) => {
      const all = await ctx.allOwners(cmd, opts.allOwners);
      const h = await ctx.client(cmd).get<HandoffJson>(withAllOwners(`/v1/handoffs/${encodeURIComponent(id)}`, all));
      if (opts.json) ctx.json(h);
      else ctx.out(handoffDetail(h));
    });

  allOwnersOptions(
    program
      .command('list')
      .description('handoffs, newest first')
      .option('--to <agent>', 'only to this recipient')
      .option('--from <agent>', 'only from this sender')
      .option('--state <states>', 'only in these states (comma-separated, e.g. WAITING,BUSY)')
      .option('--limit <n>', 'page size', positiveInt('--limit', LIMITS.pageSizeMax), LIMITS.pageSizeDefault)
      .option('--cursor <cursor>', 'continue from a previous page'),
  )
    .option('--json', 'print JSON')
    .action(
      async (
        opts: { to?: string; from?: string; state?: string; limit: number; cursor?: string; allOwners?: boolean; json?: boolean },
        cmd: Command,
      ) => {
        const all = await ctx.allOwners(cmd, opts.allOwners);
        const q = new URLSearchParams({ limit: String(opts.limit) });
        if (opts.to) q.set('recipient', opts.to);
        if (opts.from) q.set('sender', opts.from);
        if (opts.state) q.set('state', opts.state.toUpperCase());
        if (opts.cursor) q.set('cursor', opts.cursor);
        if (all) q.set('all_owners', 'true');
        const page = await ctx.client(cmd).get<{ items: HandoffJson[]; nextCursor: string | null; hidden?: number }>(`/v1/handoffs?${q}`);
        if (opts.json) return ctx.json(page);
        if (page.items.length === 0) ctx.out('no handoffs');
        else for (const line of handoffTable(page.items, ctx.colour())) ctx.out(line);
        hiddenNote(ctx, page.hidden);
        if (page.nextCursor) ctx.out(`more: baton list --cursor ${page.nextCursor}${viewFlag(opts.allOwners, all)}`);
      },
    );

  allOwnersOptions(program.command('status').description('handoff counts by delivery state'))
    .option('--json', 'print JSON')
    .action(async (opts: { allOwners?: boolean; json?: boolean }, cmd: Command) => {
      const all = await ctx.allOwners(cmd, opts.allOwners);
      const s = await ctx
        .client(cmd)
        .get<{ project: string; total: number; byState: Record<string, number>; hidden?: number }>(withAllOwners('/v1/status', all));
      if (opts.json) return ctx.json(s);
      ctx.out(`project ${s.project}: ${s.total} handoffs${all ? ' (all owners)' : ''}`);
      for (const [state, n] of Object.entries(s.byState)) if (n > 0) ctx.out(`  ${state.padEnd(15)} ${n}`);
      hiddenNote(ctx, s.hidden);
    });
}
