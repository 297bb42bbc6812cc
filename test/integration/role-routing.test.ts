import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { captureCli } from '../support/capture-cli.ts';
import { startTestBaton, type TestBaton } from '../support/test-baton.ts';
import { scratchDir } from '../support/scratch-dir.ts';
import { RuntimeSettingsReader } from '../../libs/handoffs/runtime-settings-reader.ts';
import { bindRoleWork, routeRoles } from '../../libs/handoffs/route-by-role.ts';

/**
 * Routing by role (issue 34), without delivery workers: what a send to `@role:<name>` stores,
 * who sees it, whom it may be bound to (pull agents through the reconciler's routes step, push
 * agents by their own dispatch run: bindRoleWork, called here as dispatch-agent.ts calls it),
 * rerouting, and the API, CLI and MCP surface. The race with many workers is in
 * role-routing-race.test.ts.
 */

let baton: TestBaton;
let apiUrl: string;
let env: Record<string, string>;
const tokens: Record<string, string> = {};

const deps = (rerouteAfterMs = 60_000) => ({
  ...baton.core,
  settingsReader: new RuntimeSettingsReader(baton.repos.settings, 0),
  windows: { roleRerouteAfterMs: rerouteAfterMs },
});

const as = (agent: string) => ({ authorization: `Bearer ${tokens[agent]}` });

async function sendToRole(role: string, title: string, from = 'lead') {
  const res = await baton.post('/v1/handoffs', { to: `@role:${role}`, title, message: title }, as(from));
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body as { id: string; to: string | null; toRole: string | null; state: string; detail: string | null };
}

async function recipientOf(id: string): Promise<string | null> {
  const { rows } = await baton.db.pool.query<{ handle: string | null }>(
    `SELECT r.handle FROM handoffs h LEFT JOIN agents r ON r.id = h.recipient_id WHERE h.id = $1`,
    [id],
  );
  return rows[0]?.handle ?? null;
}

async function eventsOf(id: string, event: string) {
  const { rows } = await baton.db.pool.query<{ detail: Record<string, unknown> | null; reason: string | null }>(
    `SELECT detail, reason FROM handoff_events WHERE handoff_id = $1 AND event = $2 ORDER BY id`,
    [id, event],
  );
  return rows;
}

/** Binds whatever role work `agent` (a push agent) would take when its queue empties. */
async function pushBinds(agent: string): Promise<boolean> {
  const { rows } = await baton.db.pool.query<{ id: string }>(`SELECT id FROM agents WHERE handle = $1 AND removed_at IS NULL`, [agent]);
  return bindRoleWork(deps(), rows[0]!.id);
}

/** Settles every open handoff (a clean slate between cases: each agent idle again). */
async function settleAll() {
  await baton.db.pool.query(
    `UPDATE handoffs SET delivery_state = 'CANCELLED', settled_at = now(), in_progress_key = NULL WHERE settled_at IS NULL`,
  );
}

beforeAll(async () => {
  baton = await startTestBaton();
  apiUrl = await baton.listen();
  env = { BATON_URL: apiUrl, BATON_HOME: scratchDir('baton-role-routing-') };
  const agents: Array<{ id: string; provider: string; roles?: string[] }> = [
    { id: 'lead', provider: 'manual' },
    { id: 'rev-m', provider: 'manual', roles: ['reviewer'] },
    { id: 'rev-p', provider: 'demo', roles: ['reviewer', 'oncall'] },
    { id: 'bystander', provider: 'manual' },
    { id: 'solo-m', provider: 'manual', roles: ['writer'] },
  ];
  for (const a of agents) {
    const res = await baton.post('/v1/agents', a);
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    tokens[a.id] = await baton.tokenFor(a.id);
  }
});

afterAll(async () => {
  await baton?.stop();
});

describe('a handoff sent to a role', () => {
  it('is stored with its role and no recipient, seen by its sender only, until it is bound', async () => {
    const h = await sendToRole('Reviewer', 'review the parser');
    expect(h).toMatchObject({ to: null, toRole: 'reviewer', state: 'WAITING', detail: 'waiting for an agent with role reviewer' });
    expect((await baton.get(`/v1/handoffs/${h.id}`, as('lead'))).status).toBe(200);
    // Not unowned work: neither a member nor a bystander sees it, lists it or may claim it.
    for (const agent of ['rev-m', 'bystander']) {
      expect((await baton.get(`/v1/handoffs/${h.id}`, as(agent))).status).toBe(404);
      const inbox = (await baton.get(`/v1/agents/${agent}/inbox`, as(agent))).body as { handoffs: Array<{ id: string }> };
      expect(inbox.handoffs.map((i) => i.id)).not.toContain(h.id);
    }
    expect((await baton.post(`/v1/handoffs/${h.id}/accept`, {}, as('lead'))).body.error.code).toBe('not_recipient');
    await settleAll();
  });

  it('binds to an idle pull member through the reconciler, which claims it exactly once; visibility follows the binding', async () => {
    const h = await sendToRole('reviewer', 'review the lexer');
    // rev-p (push) has no worker here; rev-m (pull) is idle: the routes step binds it there.
    expect(await routeRoles(deps())).toBe(1);
    expect(await recipientOf(h.id)).toBe('rev-m');
    const [routed] = await eventsOf(h.id, 'routed');
    expect(routed?.detail).toMatchObject({ role: 'reviewer', agent: 'rev-m', why: 'idle' });
    const candidates = (routed?.detail?.['candidates'] ?? []) as Array<{ agent: string }>;
    expect(candidates.map((c) => c.agent)).toEqual(['rev-m', 'rev-p']);
    expect(routed?.reason).toContain('bound to rev-m');

    const seen = (await baton.get(`/v1/handoffs/${h.id}`, as('rev-m'))).body;
    expect(seen).toMatchObject({ to: 'rev-m', toRole: 'reviewer' });
    expect(seen.routedAt).not.toBeNull();
    expect((await baton.get(`/v1/handoffs/${h.id}`, as('lead'))).status).toBe(200);
    expect((await baton.get(`/v1/handoffs/${h.id}`, as('rev-p'))).status).toBe(404);
    const inbox = (await baton.get('/v1/agents/rev-m/inbox', as('rev-m'))).body as { handoffs: Array<{ id: string }> };
    expect(inbox.handoffs.map((i) => i.id)).toContain(h.id);

    // Two claims racing: one wins.
    const claims = await Promise.all([1, 2].map(() => baton.post(`/v1/handoffs/${h.id}/accept`, {}, as('rev-m'))));
    const won = claims.filter((c) => c.status === 200);
    expect(won.length, JSON.stringify(claims.map((c) => c.body))).toBeGreaterThanOrEqual(1);
    const { rows } = await baton.db.pool.query<{ work_attempt: number }>(`SELECT work_attempt FROM handoffs WHERE id = $1`, [h.id]);
    expect(rows[0]!.work_attempt).toBe(1);
    // A claimed one is final: a later routes pass never moves it, however old its binding.
    expect(await routeRoles(deps(1))).toBe(0);
    expect(await recipientOf(h.id)).toBe('rev-m');
    await settleAll();
  });

  it('binds to a push member whose queue is empty, never to one that is busy, and never twice', async () => {
    const a = await sendToRole('oncall', 'page one');
    const b = await sendToRole('oncall', 'page two');
    expect(await pushBinds('rev-p')).toBe(true);
    // rev-p now has an open handoff: not idle, it binds nothing more until that one settles.
    expect(await pushBinds('rev-p')).toBe(false);
    const bound = [await recipientOf(a.id), await recipientOf(b.id)];
    expect(bound.filter((r) => r === 'rev-p')).toHaveLength(1);
    expect(bound.filter((r) => r === null)).toHaveLength(1);
    await settleAll();
  });

  it('never binds to an agent blocked for the sender, paused delivery, another deployment, or a removed agent', async () => {
    const h = await sendToRole('reviewer', 'review the cache');
    // Blocked for the sender: rev-m is passed over; rev-p is not.
    expect((await baton.put('/v1/connections', { from: 'lead', to: 'rev-m', rule: 'block' })).status).toBeLessThan(300);
    expect(await routeRoles(deps())).toBe(0);
    expect(await recipientOf(h.id)).toBeNull();
    // Delivery paused: no push member binds.
    expect((await baton.put('/v1/settings/enabled', { value: false })).status).toBe(200);
    expect(await pushBinds('rev-p')).toBe(false);
    expect((await baton.put('/v1/settings/enabled', { value: true })).status).toBe(200);
    // Another deployment's agent: this deployment's workers never bind for it.
    await baton.db.pool.query(`UPDATE agents SET deployment = 'elsewhere' WHERE handle = 'rev-p'`);
    expect(await pushBinds('rev-p')).toBe(false);
    await baton.db.pool.query(`UPDATE agents SET deployment = $1 WHERE handle = 'rev-p'`, [baton.core.deployment]);
    expect(await recipientOf(h.id)).toBeNull();
    expect(await pushBinds('rev-p')).toBe(true);
    expect(await recipientOf(h.id)).toBe('rev-p');
    expect((await baton.put('/v1/connections', { from: 'lead', to: 'rev-m', rule: 'allow' })).status).toBeLessThan(300);
    await settleAll();
  });

  it('is routed again when its bound agent is removed before a turn is written, or stays busy past the reroute time', async () => {
    const h = await sendToRole('writer', 'write the notes');
    expect(await routeRoles(deps())).toBe(1);
    expect(await recipientOf(h.id)).toBe('solo-m');
    // Stale binding: no claim within the reroute time, so the routes step unbinds it...
    await routeRoles(deps(1));
    expect(await recipientOf(h.id)).toBe('solo-m');
    const [rerouted] = await eventsOf(h.id, 'rerouted');
    expect(rerouted?.detail).toMatchObject({ role: 'writer', from: 'solo-m', why: 'busy' });
    // ...and binds it again to the idle member in the same pass (the only writer).
    expect((await eventsOf(h.id, 'routed')).length).toBe(2);

    // Removed: the binding no turn reached goes back to the role, unbound.
    expect((await baton.del('/v1/agents/solo-m')).status).toBeLessThan(300);
    expect(await recipientOf(h.id)).toBeNull();
    const after = (await baton.get(`/v1/handoffs/${h.id}`, as('lead'))).body;
    expect(after).toMatchObject({ state: 'WAITING', to: null, toRole: 'writer' });
    expect((await eventsOf(h.id, 'rerouted')).map((e) => e.detail?.['why'])).toEqual(['busy', 'removed']);
    // With no member left, nothing binds it, and a new send to the role is refused.
    expect(await routeRoles(deps())).toBe(0);
    const refused = await baton.post('/v1/handoffs', { to: '@role:writer', message: 'more notes' }, as('lead'));
    expect(refused.status).toBe(422);
    expect(refused.body.error.code).toBe('no_agent_with_role');
    await settleAll();
  });
});

describe('bad input', () => {
  it('refuses a malformed role (invalid_role), a role nobody declares (no_agent_with_role), and one only the sender declares', async () => {
    const bad = await baton.post('/v1/handoffs', { to: '@role:not a role', message: 'x' }, as('lead'));
    expect(bad.status).toBe(400);
    expect(bad.body.error.code).toMatch(/invalid_role|invalid_request/);
    const none = await baton.post('/v1/handoffs', { to: '@role:nobody', message: 'x' }, as('lead'));
    expect(none.status).toBe(422);
    expect(none.body.error).toMatchObject({ code: 'no_agent_with_role' });
    // A role only its sender declares: nobody else to route it to.
    await baton.post('/v1/agents', { id: 'loner', provider: 'manual', roles: ['lonely'] });
    tokens['loner'] = await baton.tokenFor('loner');
    const self = await baton.post('/v1/handoffs', { to: '@role:lonely', message: 'x' }, as('loner'));
    expect(self.body.error?.code).toBe('no_agent_with_role');
    const { rows } = await baton.db.pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM handoffs WHERE recipient_role IN ('nobody', 'lonely')`,
    );
    expect(rows[0]!.n).toBe(0);
  });
});

describe('the CLI and the MCP send tool', () => {
  it('baton send @role:reviewer records a role handoff and shows whom it is to', async () => {
    const sent = await captureCli({ ...env, BATON_TOKEN: tokens['lead']! }, [
      'send',
      '@role:reviewer',
      'check the docs',
      '--title',
      'Docs',
      '--json',
    ]);
    expect(sent.code, sent.err).toBe(0);
    const h = JSON.parse(sent.out) as { id: string; to: string | null; toRole: string };
    expect(h).toMatchObject({ to: null, toRole: 'reviewer' });
    const shown = await captureCli({ ...env, BATON_TOKEN: tokens['lead']! }, ['show', h.id]);
    expect(shown.out).toContain('to @role:reviewer');
    const refused = await captureCli({ ...env, BATON_TOKEN: tokens['lead']! }, ['send', '@role:nobody', 'x']);
    expect(refused.code).toBe(1);
    expect(refused.err).toContain('no_agent_with_role');
    await settleAll();
  });

  it('the MCP send tool takes to: "@role:<name>"', async () => {
    const client = new Client({ name: 'baton-test', version: '1.0.0' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${apiUrl}/mcp`), {
        requestInit: { headers: { Authorization: `Bearer ${tokens['lead']}` } },
      }),
    );
    try {
      const r = (await client.callTool({
        name: 'send',
        arguments: { to: '@role:reviewer', message: 'look at this', title: 'Look' },
      })) as CallToolResult;
      expect(r.isError ?? false).toBe(false);
      const out = r.structuredContent as { handoff: { to: string | null; toRole: string } };
      expect(out.handoff).toMatchObject({ to: null, toRole: 'reviewer' });
      const text = (r.content as Array<{ text: string }>)[0]?.text ?? '';
      expect(text).toContain('-> @role:reviewer');
      const refused = (await client.callTool({ name: 'send', arguments: { to: '@role:nobody', message: 'x' } })) as CallToolResult;
      expect(refused.isError).toBe(true);
      expect(JSON.stringify(refused.content)).toContain('no_agent_with_role');
    } finally {
      await client.close();
      await settleAll();
    }
  });
});
