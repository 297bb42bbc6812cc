import type { Command } from 'commander';
import { asBody, UsageError, type CliContext } from '../cli-context.ts';

const KINDS = ['decision', 'failed_attempt', 'lesson', 'open_question', 'note', 'result'];

interface FactJson {
  id: string;
  kind: string;
  text: string;
  author: string;
  supersededBy: string | null;
  createdAt: string;
}


/** `session new|show`, `fact add`: tracked sessions and their facts. */
export function registerSessionCommands(program: Command, ctx: CliContext): void {
  const session = program.command('session').description('tracked sessions: the work of one task across agents');
  session
    .command('new')
    .description('start a session')
    .argument('<title>', 'what the task is')
    .option('--summary <text>', 'where things stand')
    .option('--as <agent>', 'who starts it (default BATON_AGENT)')
    .option('--json', 'print JSON')
    .action(async (title: string, opts: { summary?: string; as?: string; json?: boolean }, cmd: Command) => {
      const { body } = await ctx.client(cmd).post<{ id: string; title: string }>('/v1/sessions', { ...asBody(ctx, opts.as), title, ...(opts.summary ? { summary: opts.summary } : {}) });
      if (opts.json) return ctx.json(body);
      ctx.out(`session ${body.id}: ${body.title}`);
    });
  session
    .command('show')
    .description('a session: its facts (superseded ones marked) and its handoffs')
    .argument('<id>', 'session id')
    .option('--json', 'print JSON')
    .action(async (id: string, opts: { json?: boolean }, cmd: Command) => {
      const d = await ctx.client(cmd).get<{
        session: { id: string; title: string; summary: string | null };
        facts: FactJson[];
        handoffs: Array<{ id: string; title: string | null; from: string; to: string | null; deliveryState: string; workState: string | null }>;
      }>(`/v1/sessions/${encodeURIComponent(id)}`);
      if (opts.json) return ctx.json(d);
      ctx.out(`session ${d.session.id}: ${d.session.title}${d.session.summary ? `\n  ${d.session.summary}` : ''}`);
      ctx.out(`facts (${d.facts.length})`);
      for (const f of d.facts) ctx.out(`  [${f.id}] ${f.kind.padEnd(14)} ${f.text}  (${f.author})${f.supersededBy ? `  superseded by ${f.supersededBy}` : ''}`);
      ctx.out(`handoffs (${d.handoffs.length})`);
      for (const h of d.handoffs) ctx.out(`  ${h.id}  ${h.from} -> ${h.to ?? '(project)'}  ${h.title ?? ''}  ${h.deliveryState}${h.workState ? `/${h.workState}` : ''}`);
    });

  program
    .command('fact')
    .description('session facts')
    .command('add')
    .description('record a fact in a session')
    .argument('<session>', 'session id')
    .argument('<kind>', KINDS.join(' | '))
    .argument('<text>', 'the fact')
    .option('--supersedes <factId>', 'an older fact of the session this one replaces')
    .option('--as <agent>', 'who knows it (default BATON_AGENT)')
    .option('--json', 'print JSON')
    .action(async (sessionId: string, kind: string, text: string, opts: { supersedes?: string; as?: string; json?: boolean }, cmd: Command) => {
      if (!KINDS.includes(kind)) throw new UsageError(`kind must be one of ${KINDS.join(', ')}`);
      const { body } = await ctx.client(cmd).post<FactJson>(`/v1/sessions/${encodeURIComponent(sessionId)}/facts`, {
        ...asBody(ctx, opts.as),
        kind,
        text,
        ...(opts.supersedes ? { supersedes: opts.supersedes } : {}),
      });
      if (opts.json) return ctx.json(body);
      ctx.out(`fact ${body.id} (${body.kind})`);
    });
}
