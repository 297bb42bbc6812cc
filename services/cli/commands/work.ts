import type { Command } from 'commander';
import { ApiError } from '../../../libs/api-client/api-client.ts';
import { LIMITS } from '../../../libs/domain/limits.ts';
import { allOwnersOptions, asBody, collect, longText, positiveInt, UsageError, withAllOwners, type CliContext } from '../cli-context.ts';
import { handoffDetail, handoffLine, handoffTable, packetText, timeText, type HandoffJson } from '../format.ts';

interface ClaimJson {
  handoff: HandoffJson;
  claim: { token: string; attempt: number; leaseExpiresAt: string };
  packet: { text: string };
  recovered: boolean;
}

/** A context packet after the handoff's lines, unless it says nothing (then nothing, not an empty fenced block). */
function printPacket(ctx: CliContext, text: string): void {
  const packet = packetText(text);
  if (packet === null) return;
  ctx.out('');
  ctx.out(packet);
}

const path = (id: string, action = '') => `/v1/handoffs/${encodeURIComponent(id)}${action ? `/${action}` : ''}`;

/**
 * The claim the acting agent holds on handoff `id`, for `heartbeat` and `return` without
 * --token: read the handoff, and only if the agent holds its claim, accept again, which answers
 * a live claim with its token (`recovered`) and changes nothing. Work the agent does not hold
 * is refused (claim_lost, exit 1), never claimed on the way.
 */
async function ownClaim(
  ctx: CliContext,
  cmd: Command,
  id: string,
  named: string | undefined,
): Promise<{ token: string; revision: number | undefined }> {
  const client = ctx.client(cmd);
  const me = await ctx.whoami(cmd);
  const who = (ctx.as(named) ?? me.agent)?.toLowerCase();
  if (!who) throw new UsageError('an admin token is no agent: name the claimant with --as (or set BATON_AGENT)');
  // An admin acting for an agent sees that agent's owned handoffs only with all_owners.
  const h = await client.get<HandoffJson>(withAllOwners(path(id), me.admin));
  if (h.work?.state !== 'claimed' || h.work.claimedBy?.toLowerCase() !== who) {
    const now = h.work
      ? `its work is ${h.work.state}${h.work.claimedBy ? `, claimed by ${h.work.claimedBy}` : ''}`
      : 'it is a plain message';
    throw new ApiError('claim_lost', `${who} holds no claim on handoff ${h.id} (${now}): accept it first, or give --token`, 409);
  }
  const again = await client.post<ClaimJson>(path(id, 'accept'), asBody(ctx, named ?? who));
  return { token: again.body.claim.token, revision: again.body.handoff.work?.revision };
}

/** `read`, `accept`, `heartbeat`, `return`, `close`, `cancel`, `outbox`, `board`: the work contract. */
export function registerWorkCommands(program: Command, ctx: CliContext): void {
  allOwnersOptions(
    program
      .command('read')
      .description('a handoff as its sender or recipient sees it, with its context packet')
      .argument('<id>', 'handoff id')
      .option('--as <agent>', 'who is reading (default BATON_AGENT)'),
  )
    .option('--json', 'print JSON')
    .action(async (id: string, opts: { as?: string; allOwners?: boolean; json?: boolean }, cmd: Command) => {
      const as = ctx.as(opts.as);
      const client = ctx.client(cmd);
      const all = await ctx.allOwners(cmd, opts.allOwners);
      const h = await client.get<HandoffJson>(withAllOwners(path(id), all));
      const packet = await client.get<{ text: string }>(
        withAllOwners(`${path(id, 'packet')}${as ? `?as=${encodeURIComponent(as)}` : ''}`, all),
      );
      if (opts.json) return ctx.json({ ...h, packet });
      ctx.out(handoffDetail(h));
      printPacket(ctx, packet.text);
    });

  program
    .command('accept')
    .description('claim work (exactly one claimant wins); prints the claim token, attempt and context packet')
    .argument('<id>', 'handoff id')
    .option('--as <agent>', 'who claims (default BATON_AGENT)')
    .option('--lease <seconds>', 'how long the claim lives without a heartbeat', positiveInt('--lease', LIMITS.leaseSecondsMax))
    .option('--json', 'print JSON')
    .action(async (id: string, opts: { as?: string; lease?: number; json?: boolean }, cmd: Command) => {
      const { body } = await ctx
        .client(cmd)
        .post<ClaimJson>(path(id, 'accept'), { ...asBody(ctx, opts.as), ...(opts.lease ? { leaseSeconds: opts.lease } : {}) });
      if (opts.json) return ctx.json(body);
      ctx.out(`${body.recovered ? 'already yours' : 'claimed'}: ${handoffLine(body.handoff)}`);
      ctx.out(`claim token ${body.claim.token}  attempt ${body.claim.attempt}  lease until ${timeText(body.claim.leaseExpiresAt)}`);
      printPacket(ctx, body.packet.text);
    });

  program
    .command('heartbeat')
    .description('renew the lease of your claim')
    .argument('<id>', 'handoff id')
    .option('--token <claimToken>', 'the claim token (default: the claim you hold, found as `return` finds it)')
    .option('--as <agent>', 'the claimant (default BATON_AGENT)')
    .option('--lease <seconds>', 'new lease length', positiveInt('--lease', LIMITS.leaseSecondsMax))
    .option('--json', 'print JSON')
    .action(async (id: string, opts: { token?: string; as?: string; lease?: number; json?: boolean }, cmd: Command) => {
      const token = opts.token ?? (await ownClaim(ctx, cmd, id, opts.as)).token;
      const { body } = await ctx.client(cmd).post<{ leaseExpiresAt: string }>(path(id, 'heartbeat'), {
        ...asBody(ctx, opts.as),
        claimToken: token,
        ...(opts.lease ? { leaseSeconds: opts.lease } : {}),
      });
      if (opts.json) return ctx.json(body);
      ctx.out(`lease until ${timeText(body.leaseExpiresAt)}`);
    });

  program
    .command('return')
    .description('return claimed work with its result (or --outcome failed to give it back)')
    .argument('<id>', 'handoff id')
    .option(
      '--summary <text>',
      'what was done (or why it failed); "-" reads it from stdin, as does leaving it out while something is piped in',
    )
    .option('--file <path>', 'read the summary from a file')
    .option('--token <claimToken>', 'the claim token (default: the claim you hold, read first)')
    .option('--outcome <outcome>', 'succeeded or failed', 'succeeded')
    .option('--fact <factId>', 'a session fact you wrote that proves it (repeatable)', collect)
    .option('--as <agent>', 'the claimant (default BATON_AGENT)')
    .option('--json', 'print JSON')
    .action(
      async (
        id: string,
        opts: { summary?: string; file?: string; token?: string; outcome: string; fact?: string[]; as?: string; json?: boolean },
        cmd: Command,
      ) => {
        if (opts.outcome !== 'succeeded' && opts.outcome !== 'failed') throw new UsageError('--outcome must be succeeded or failed');
        const summary = (await longText(ctx, 'the summary (--summary)', { value: opts.summary, file: opts.file, required: true }))!;
        const claim = opts.token ? { token: opts.token, revision: undefined } : await ownClaim(ctx, cmd, id, opts.as);
        const { body } = await ctx.client(cmd).post<{ handoff: HandoffJson; recovered: boolean }>(path(id, 'return'), {
          ...asBody(ctx, opts.as),
          claimToken: claim.token,
          summary,
          outcome: opts.outcome,
          ...(claim.revision !== undefined ? { revision: claim.revision } : {}),
          ...(opts.fact ? { facts: opts.fact } : {}),
        });
        if (opts.json) return ctx.json(body);
        ctx.out(`${body.recovered ? 'already returned' : 'returned'}: ${handoffLine(body.handoff)}`);
      },
    );

  program
    .command('close')
    .description('close returned work as its sender: accepted, revision (back with a note) or blocked')
    .argument('<id>', 'handoff id')
    .argument('<resolution>', 'accepted | revision | blocked')
    .option('--note <text>', 'what to change (revision) or why (blocked); "-" reads it from stdin')
    .option('--note-file <path>', 'read the note from a file')
    .option('--as <sender>', 'the sender (default BATON_AGENT)')
    .option('--json', 'print JSON')
    .action(
      async (id: string, resolution: string, opts: { note?: string; noteFile?: string; as?: string; json?: boolean }, cmd: Command) => {
        if (!['accepted', 'revision', 'blocked'].includes(resolution))
          throw new UsageError('resolution must be accepted, revision or blocked');
        const note = await longText(ctx, 'the note', { value: opts.note, file: opts.noteFile, required: false });
        const { body } = await ctx
          .client(cmd)
          .post<HandoffJson>(path(id, 'close'), { ...asBody(ctx, opts.as), resolution, ...(note ? { note } : {}) });
        if (opts.json) return ctx.json(body);
        ctx.out(`${resolution}: ${handoffLine(body)}`);
      },
    );

  program
    .command('cancel')
    .description("withdraw a handoff you sent (a turn already in the recipient's session is not undone)")
    .argument('<id>', 'handoff id')
    .option('--as <sender>', 'the sender (default BATON_AGENT)')
    .option('--json', 'print JSON')
    .action(async (id: string, opts: { as?: string; json?: boolean }, cmd: Command) => {
      const { body } = await ctx.client(cmd).post<HandoffJson>(path(id, 'cancel'), asBody(ctx, opts.as));
      if (opts.json) return ctx.json(body);
      ctx.out(`cancelled: ${handoffLine(body)}`);
    });

  allOwnersOptions(
    program.command('outbox').description('what an agent sent, newest first').argument('[agent]', 'agent (default BATON_AGENT)'),
  )
    .option('--json', 'print JSON')
    .action(async (agent: string | undefined, opts: { allOwners?: boolean; json?: boolean }, cmd: Command) => {
      const who = await ctx.agentOrSelf(cmd, agent);
      const all = await ctx.allOwners(cmd, opts.allOwners);
      const out = await ctx
        .client(cmd)
        .get<{ agent: string; handoffs: HandoffJson[] }>(withAllOwners(`/v1/agents/${encodeURIComponent(who)}/outbox`, all));
      if (opts.json) return ctx.json(out);
      ctx.out(`outbox of ${out.agent}: ${out.handoffs.length}`);
      if (out.handoffs.length > 0) for (const line of handoffTable(out.handoffs, ctx.colour())) ctx.out(line);
    });

  allOwnersOptions(
    program
      .command('board')
      .description('work in lanes: ready, in progress, attention, returned, with the next action and whose')
      .option('--agent <agent>', 'only work this agent sends, receives, holds, or may claim'),
  )
    .option('--json', 'print JSON')
    .action(async (opts: { agent?: string; allOwners?: boolean; json?: boolean }, cmd: Command) => {
      const all = await ctx.allOwners(cmd, opts.allOwners);
      const board = await ctx
        .client(cmd)
        .get<Record<string, Array<{ handoff: HandoffJson; reasons: string[]; next: { action: string; who: string } }>>>(
          withAllOwners(`/v1/board${opts.agent ? `?agent=${encodeURIComponent(opts.agent)}` : ''}`, all),
        );
      if (opts.json) return ctx.json(board);
      for (const [lane, cards] of Object.entries(board)) {
        ctx.out(`${lane.replace('_', ' ')} (${cards.length})`);
        for (const c of cards) ctx.out(`  ${handoffLine(c.handoff)}\n      ${c.reasons.join('; ')} -> ${c.next.who}: ${c.next.action}`);
      }
    });
}
