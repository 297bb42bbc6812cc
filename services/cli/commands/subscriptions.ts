import type { Command } from 'commander';
import { positiveInt, UsageError, type CliContext } from '../cli-context.ts';
import { relativeTime } from '../format.ts';
import { renderTable, type Column } from '../table.ts';
import { LIMITS } from '../../../libs/domain/limits.ts';

interface SubscriptionJson {
  id: string;
  url: string;
  owner: string | null;
  filter: { handoffId?: string; agents?: string[]; states?: string[]; events?: string[] };
  kind: 'webhook' | 'a2a_push';
  status: 'active' | 'paused';
  pausedReason: string | null;
  position: string;
  attempts: number;
  failingSince: string | null;
  nextAttemptAt: string | null;
  lastError: string | null;
  deadLetters: number;
  createdAt: string;
}

const COLUMNS: readonly Column<SubscriptionJson>[] = [
  { header: 'ID', value: (s) => s.id },
  { header: 'KIND', value: (s) => s.kind },
  { header: 'STATUS', value: (s) => s.status },
  { header: 'OWNER', value: (s) => s.owner ?? '(admin)', max: 24 },
  { header: 'POSITION', value: (s) => s.position, align: 'right' },
  { header: 'DEAD', value: (s) => String(s.deadLetters), align: 'right' },
  { header: 'URL', value: (s) => s.url, max: 60 },
];

const list = (v: string | undefined) =>
  v === undefined
    ? undefined
    : v
        .split(',')
        .map((x) => x.trim())
        .filter((x) => x !== '');

const eventId = (flag: string) => (v: string) => {
  if (!/^(0|[1-9][0-9]{0,18})$/.test(v)) throw new UsageError(`${flag} must be an event id (a whole number)`);
  return v;
};

function describe(s: SubscriptionJson): string[] {
  const f = s.filter;
  const filter = [
    f.handoffId ? `handoff ${f.handoffId}` : '',
    f.agents ? `agents ${f.agents.join(',')}` : '',
    f.states ? `states ${f.states.join(',')}` : '',
    f.events ? `events ${f.events.join(',')}` : '',
  ].filter((x) => x !== '');
  return [
    `subscription ${s.id}: ${s.status}${s.pausedReason ? ` (${s.pausedReason})` : ''}`,
    `  kind      ${s.kind === 'a2a_push' ? 'a2a_push (an A2A push-notification config of the task)' : 'webhook'}`,
    `  url       ${s.url}`,
    `  owner     ${s.owner ?? '(admin: every handoff of the project)'}`,
    `  filter    ${filter.length > 0 ? filter.join('; ') : 'every event'}`,
    `  position  ${s.position} (the last event id delivered or given up on)`,
    ...(s.lastError ? [`  failing   ${s.attempts} attempt(s) since ${s.failingSince ?? '?'}: ${s.lastError}`] : []),
    `  dead letters ${s.deadLetters}`,
    `  created   ${relativeTime(s.createdAt)}`,
  ];
}

/** `subscription add|list|show|remove|replay|resume`: signed event subscriptions (over /v1/subscriptions). */
export function registerSubscriptionCommands(program: Command, ctx: CliContext): void {
  const sub = program.command('subscription').description('signed event subscriptions: handoff events POSTed to a URL');
  sub
    .command('add')
    .description('subscribe a URL to handoff events; prints the signing secret, which is never shown again')
    .argument('<url>', 'where events are POSTed (http or https; redirects are not followed)')
    .option('--handoff <id>', 'only this handoff')
    .option('--agents <handles>', 'only handoffs these agents sent or received (comma-separated)')
    .option('--states <states>', 'only events into these delivery states (comma-separated, e.g. RETURNED,FAILED)')
    .option('--events <kinds>', 'only these event kinds (comma-separated, e.g. returned,closed)')
    .option('--after <eventId>', 'deliver the events after this id (0: the whole log; default: from now on)', eventId('--after'))
    .option('--json', 'print JSON')
    .action(
      async (
        url: string,
        opts: { handoff?: string; agents?: string; states?: string; events?: string; after?: string; json?: boolean },
        cmd: Command,
      ) => {
        const filter = {
          ...(opts.handoff ? { handoffId: opts.handoff } : {}),
          ...(opts.agents ? { agents: list(opts.agents) } : {}),
          ...(opts.states ? { states: list(opts.states.toUpperCase()) } : {}),
          ...(opts.events ? { events: list(opts.events) } : {}),
        };
        const { body } = await ctx.client(cmd).post<{ subscription: SubscriptionJson; secret: string }>('/v1/subscriptions', {
          url,
          filter,
          ...(opts.after ? { after: opts.after } : {}),
        });
        if (opts.json) return ctx.json(body);
        ctx.out(`subscription ${body.subscription.id} → ${body.subscription.url}`);
        ctx.out(`secret ${body.secret}`);
        ctx.out('keep the secret now: it verifies the Baton-Signature header and is never shown again');
      },
    );
  sub
    .command('list')
    .description('your subscriptions (an admin: every one of the project)')
    .option('--limit <n>', 'how many', positiveInt('--limit', LIMITS.pageSizeMax), LIMITS.pageSizeDefault)
    .option('--json', 'print JSON')
    .action(async (opts: { limit: number; json?: boolean }, cmd: Command) => {
      const { items } = await ctx.client(cmd).get<{ items: SubscriptionJson[] }>(`/v1/subscriptions?limit=${opts.limit}`);
      if (opts.json) return ctx.json(items);
      if (items.length === 0) return ctx.out('no subscriptions');
      for (const line of renderTable(COLUMNS, items, { colour: ctx.colour() })) ctx.out(line);
    });
  sub
    .command('show')
    .description('a subscription, where it stands, and its oldest dead letters')
    .argument('<id>', 'subscription id')
    .option('--json', 'print JSON')
    .action(async (id: string, opts: { json?: boolean }, cmd: Command) => {
      const d = await ctx.client(cmd).get<{
        subscription: SubscriptionJson;
        deadLetters: Array<{ eventId: string; lastError: string; attempts: number; createdAt: string }>;
      }>(`/v1/subscriptions/${encodeURIComponent(id)}`);
      if (opts.json) return ctx.json(d);
      for (const line of describe(d.subscription)) ctx.out(line);
      for (const l of d.deadLetters) ctx.out(`  dead: event ${l.eventId} after ${l.attempts} attempt(s): ${l.lastError}`);
    });
  sub
    .command('remove')
    .description('delete a subscription: delivery stops')
    .argument('<id>', 'subscription id')
    .action(async (id: string, _opts: unknown, cmd: Command) => {
      await ctx.client(cmd).delete(`/v1/subscriptions/${encodeURIComponent(id)}`);
      ctx.out(`removed ${id}`);
    });
  sub
    .command('replay')
    .description('deliver again from the oldest dead letter (or from just after --after); makes it active again')
    .argument('<id>', 'subscription id')
    .option('--after <eventId>', 'deliver again the events after this id', eventId('--after'))
    .option('--json', 'print JSON')
    .action(async (id: string, opts: { after?: string; json?: boolean }, cmd: Command) => {
      const { body } = await ctx
        .client(cmd)
        .post<{ subscription: SubscriptionJson; replayed: boolean }>(`/v1/subscriptions/${encodeURIComponent(id)}/replay`, {
          ...(opts.after ? { after: opts.after } : {}),
        });
      if (opts.json) return ctx.json(body);
      ctx.out(
        body.replayed ? `replaying ${id} from after event ${body.subscription.position}` : `nothing to replay: ${id} has no dead letters`,
      );
    });
  sub
    .command('resume')
    .description('make a paused subscription active again, from the event it stopped at')
    .argument('<id>', 'subscription id')
    .action(async (id: string, _opts: unknown, cmd: Command) => {
      const { body } = await ctx
        .client(cmd)
        .post<{ subscription: SubscriptionJson }>(`/v1/subscriptions/${encodeURIComponent(id)}/resume`, {});
      ctx.out(`subscription ${body.subscription.id}: ${body.subscription.status}`);
    });
}
