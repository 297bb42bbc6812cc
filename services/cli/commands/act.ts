import type { Command } from 'commander';
import { ALL_OWNERS_HELP, allOwnersOptions, asBody, longText, UsageError, withAllOwners, type CliContext } from '../cli-context.ts';
import { handoffLine, handoffTable, relativeTime, type HandoffJson } from '../format.ts';

interface SettingsJson {
  enabled: boolean;
  enabledAfter: string | null;
  connections: string;
  outageGuard: Record<string, unknown>;
}

/** Parses a config value: JSON when it is JSON (true, 5, {"a":1}, null), else the text itself. */
function configValue(raw: string): unknown {
  try {
    return JSON.parse(raw);
  } catch {
    return raw;
  }
}

/** `ack`, `release`, `allow`, `block`, `config`, `inbox` */
export function registerActionCommands(program: Command, ctx: CliContext): void {
  program
    .command('ack')
    .alias('acknowledge')
    .description('mark a plain message read (the recipient only); no turn is needed')
    .argument('<id>', 'handoff id')
    .option('--as <agent>', 'the recipient (default BATON_AGENT)')
    .option('--json', 'print JSON')
    .action(async (id: string, opts: { as?: string; json?: boolean }, cmd: Command) => {
      const { body } = await ctx.client(cmd).post<HandoffJson>(`/v1/handoffs/${encodeURIComponent(id)}/acknowledge`, asBody(ctx, opts.as));
      if (opts.json) ctx.json(body);
      else ctx.out(`acknowledged: ${handoffLine(body)}`);
    });

  program
    .command('release')
    .description('cancel a stuck delivery (UNCERTAIN, or a turn that hangs) when you know how it ended; nothing is resent')
    .argument('<id>', 'handoff id')
    .option('--as <sender>', 'act as the sender (default: as an operator)')
    .option('--reason <text>', 'what you know about how it ended; "-" reads it from stdin')
    .option('--reason-file <path>', 'read the reason from a file')
    .option('--all-owners', `${ALL_OWNERS_HELP}: an operator releasing another agent's owned handoff needs it`)
    .option('--json', 'print JSON')
    .action(
      async (
        id: string,
        opts: { as?: string; reason?: string; reasonFile?: string; allOwners?: boolean; json?: boolean },
        cmd: Command,
      ) => {
        const reason = await longText(ctx, 'the reason', { value: opts.reason, file: opts.reasonFile, required: false });
        const { body } = await ctx
          .client(cmd)
          .post<HandoffJson>(withAllOwners(`/v1/handoffs/${encodeURIComponent(id)}/release`, opts.allOwners), {
            ...(opts.as ? { as: opts.as } : {}),
            ...(reason ? { reason } : {}),
          });
        if (opts.json) ctx.json(body);
        else ctx.out(`released: ${handoffLine(body)}`);
      },
    );

  for (const rule of ['allow', 'block'] as const) {
    program
      .command(rule)
      .description(
        rule === 'allow' ? 'let FROM deliver to TO (lifts holds at once)' : 'hold deliveries from FROM to TO (HELD, no attempt spent)',
      )
      .argument('<from>', 'sending agent')
      .argument('<to>', 'receiving agent')
      .option('--json', "print JSON: the project's connection rules after the change")
      .action(async (from: string, to: string, opts: { json?: boolean }, cmd: Command) => {
        const { body } = await ctx.client(cmd).request<{ items: unknown[] }>('PUT', '/v1/connections', { from, to, rule });
        if (opts.json) return ctx.json(body);
        ctx.out(`${rule === 'allow' ? 'allowed' : 'blocked'}: ${from.toLowerCase()} -> ${to.toLowerCase()}`);
      });
  }

  program
    .command('config')
    .description('show or change runtime settings: enabled, enabledAfter, connections, outageGuard')
    .argument('[key]', 'setting to show or change')
    .argument('[value]', 'new value (JSON or text), e.g. false, 2026-12-01T09:00:00Z, restricted, {"demo":{"down":true}}')
    .option('--json', 'print JSON')
    .action(async (key: string | undefined, value: string | undefined, opts: { json?: boolean }, cmd: Command) => {
      const client = ctx.client(cmd);
      const settings =
        key !== undefined && value !== undefined
          ? (await client.request<SettingsJson>('PUT', `/v1/settings/${encodeURIComponent(key)}`, { value: configValue(value) })).body
          : await client.get<SettingsJson>('/v1/settings');
      if (key !== undefined && value === undefined) {
        if (!(key in settings)) throw new UsageError(`no setting ${JSON.stringify(key)}; known: ${Object.keys(settings).join(', ')}`);
        return ctx.out(JSON.stringify(settings[key as keyof SettingsJson]));
      }
      if (opts.json) return ctx.json(settings);
      for (const [k, v] of Object.entries(settings)) ctx.out(`${k.padEnd(13)} ${JSON.stringify(v)}`);
    });

  allOwnersOptions(
    program
      .command('inbox')
      .description("an agent's handoffs in progress and its notifications (deadline reminders)")
      .argument('[agent]', 'agent (default BATON_AGENT)'),
  )
    .option('--json', 'print JSON')
    .action(async (agent: string | undefined, opts: { allOwners?: boolean; json?: boolean }, cmd: Command) => {
      const who = await ctx.agentOrSelf(cmd, agent);
      const all = await ctx.allOwners(cmd, opts.allOwners);
      const inbox = await ctx.client(cmd).get<{
        agent: string;
        handoffs: HandoffJson[];
        notifications: Array<{ kind: string; text: string; createdAt: string; handoffId: string }>;
      }>(withAllOwners(`/v1/agents/${encodeURIComponent(who)}/inbox`, all));
      if (opts.json) return ctx.json(inbox);
      ctx.out(`inbox of ${inbox.agent}: ${inbox.handoffs.length} in progress, ${inbox.notifications.length} notifications`);
      if (inbox.handoffs.length > 0) for (const line of handoffTable(inbox.handoffs, ctx.colour())) ctx.out(line);
      for (const n of inbox.notifications) ctx.out(`  [${n.kind}] ${n.text}  (${n.handoffId}, ${relativeTime(n.createdAt)})`);
    });
}
