import type { Command } from 'commander';
import { allOwnersOptions, asBody, longText, positiveInt, UsageError, withAllOwners, type CliContext } from '../cli-context.ts';
import { handoffTable, relativeTime } from '../format.ts';
import { renderTable, type Column } from '../table.ts';
import { LIMITS } from '../../../libs/domain/limits.ts';

const KINDS = ['decision', 'failed_attempt', 'lesson', 'open_question', 'note', 'result'];

interface FactJson {
  id: string;
  kind: string;
  text: string;
  author: string;
  supersededBy: string | null;
  createdAt: string;
}

interface SessionRowJson {
  id: string;
  title: string;
  summary: string | null;
  createdAt: string;
  facts: number;
  handoffs: number;
}

const FACT_COLUMNS: readonly Column<FactJson>[] = [
  { header: 'ID', value: (f) => f.id },
  { header: 'KIND', value: (f) => f.kind },
  { header: 'BY', value: (f) => f.author, max: 24 },
  { header: 'ADDED', value: (f) => relativeTime(f.createdAt) },
  { header: 'SUPERSEDED BY', value: (f) => f.supersededBy ?? '' },
  // The fact itself is what a reader came for: never cut.
  { header: 'TEXT', value: (f) => f.text },
];

const SESSION_COLUMNS: readonly Column<SessionRowJson>[] = [
  { header: 'ID', value: (s) => s.id },
  { header: 'STARTED', value: (s) => relativeTime(s.createdAt) },
  { header: 'FACTS', value: (s) => String(s.facts), align: 'right' },
  { header: 'HANDOFFS', value: (s) => String(s.handoffs), align: 'right' },
  { header: 'TITLE', value: (s) => s.title, max: 60 },
];

/** `session new|list|show`, `fact add`: tracked sessions and their facts. */
export function registerSessionCommands(program: Command, ctx: CliContext): void {
  const session = program.command('session').description('tracked sessions: the work of one task across agents');
  session
    .command('new')
    .description('start a session')
    .argument('<title>', 'what the task is')
    .option('--summary <text>', 'where things stand; "-" reads it from stdin')
    .option('--summary-file <path>', 'read the summary from a file')
    .option('--as <agent>', 'who starts it (default BATON_AGENT)')
    .option('--json', 'print JSON')
    .action(async (title: string, opts: { summary?: string; summaryFile?: string; as?: string; json?: boolean }, cmd: Command) => {
      const summary = await longText(ctx, 'the summary', { value: opts.summary, file: opts.summaryFile, required: false });
      const { body } = await ctx
        .client(cmd)
        .post<{ id: string; title: string }>('/v1/sessions', { ...asBody(ctx, opts.as), title, ...(summary ? { summary } : {}) });
      if (opts.json) return ctx.json(body);
      ctx.out(`session ${body.id}: ${body.title}`);
    });
  allOwnersOptions(
    session
      .command('list')
      .description("the project's sessions, newest first, with their facts and the handoffs you may see")
      .option('--limit <n>', 'how many', positiveInt('--limit', LIMITS.pageSizeMax), LIMITS.pageSizeDefault),
  )
    .option('--json', 'print JSON')
    .action(async (opts: { limit: number; allOwners?: boolean; json?: boolean }, cmd: Command) => {
      const all = await ctx.allOwners(cmd, opts.allOwners);
      const { items } = await ctx.client(cmd).get<{ items: SessionRowJson[] }>(withAllOwners(`/v1/sessions?limit=${opts.limit}`, all));
      if (opts.json) return ctx.json(items);
      if (items.length === 0) return ctx.out('no sessions');
      for (const line of renderTable(SESSION_COLUMNS, items, { colour: ctx.colour() })) ctx.out(line);
    });
  allOwnersOptions(
    session
      .command('show')
      .description('a session: its facts (superseded ones marked) and those of its handoffs you may see')
      .argument('<id>', 'session id'),
  )
    .option('--json', 'print JSON')
    .action(async (id: string, opts: { allOwners?: boolean; json?: boolean }, cmd: Command) => {
      const all = await ctx.allOwners(cmd, opts.allOwners);
      const d = await ctx.client(cmd).get<{
        session: { id: string; title: string; summary: string | null };
        facts: FactJson[];
        handoffs: Array<{
          id: string;
          title: string | null;
          from: string;
          to: string | null;
          deliveryState: string;
          workState: string | null;
          createdAt: string;
        }>;
      }>(withAllOwners(`/v1/sessions/${encodeURIComponent(id)}`, all));
      if (opts.json) return ctx.json(d);
      ctx.out(`session ${d.session.id}: ${d.session.title}${d.session.summary ? `\n  ${d.session.summary}` : ''}`);
      ctx.out('');
      ctx.out(`facts (${d.facts.length})`);
      if (d.facts.length > 0) for (const line of renderTable(FACT_COLUMNS, d.facts, { colour: ctx.colour() })) ctx.out(line);
      ctx.out('');
      ctx.out(`handoffs (${d.handoffs.length})`);
      const rows = d.handoffs.map((h) => ({ ...h, state: h.deliveryState }));
      if (rows.length > 0) for (const line of handoffTable(rows, ctx.colour())) ctx.out(line);
    });

  program
    .command('fact')
    .description('session facts')
    .command('add')
    .description('record a fact in a session')
    .argument('<session>', 'session id')
    .argument('<kind>', KINDS.join(' | '))
    .argument('[text]', 'the fact; "-" reads it from stdin, as does leaving it out while something is piped in')
    .option('--file <path>', 'read the fact from a file')
    .option('--supersedes <factId>', 'an older fact of the session this one replaces')
    .option('--as <agent>', 'who knows it (default BATON_AGENT)')
    .option('--json', 'print JSON')
    .action(
      async (
        sessionId: string,
        kind: string,
        given: string | undefined,
        opts: { file?: string; supersedes?: string; as?: string; json?: boolean },
        cmd: Command,
      ) => {
        if (!KINDS.includes(kind)) throw new UsageError(`kind must be one of ${KINDS.join(', ')}`);
        const text = (await longText(ctx, 'the fact', { value: given, file: opts.file, required: true }))!;
        const { body } = await ctx.client(cmd).post<FactJson>(`/v1/sessions/${encodeURIComponent(sessionId)}/facts`, {
          ...asBody(ctx, opts.as),
          kind,
          text,
          ...(opts.supersedes ? { supersedes: opts.supersedes } : {}),
        });
        if (opts.json) return ctx.json(body);
        ctx.out(`fact ${body.id} (${body.kind})`);
      },
    );
}
