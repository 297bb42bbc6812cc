import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { captureCli } from '../support/capture-cli.ts';
import { startTestBaton, type TestBaton } from '../support/test-baton.ts';
import { scratchDir } from '../support/scratch-dir.ts';
import { eventually } from '../support/eventually.ts';

/** Agents declare roles (issue 34): over the API, the CLI and the MCP `list_agents` tool. */

let baton: TestBaton;
let apiUrl: string;
let env: Record<string, string>;

async function cli(...argv: string[]) {
  return captureCli(env, argv);
}

const patch = async (id: string, body: unknown, token = baton.adminToken) => {
  const res = await baton.app.inject({
    method: 'PATCH',
    url: `/v1/agents/${id}`,
    headers: { authorization: `Bearer ${token}` },
    payload: body as Record<string, unknown>,
  });
  return { status: res.statusCode, body: res.json() };
};

beforeAll(async () => {
  baton = await startTestBaton();
  apiUrl = await baton.listen();
  env = { BATON_URL: apiUrl, BATON_TOKEN: baton.adminToken, BATON_HOME: scratchDir('baton-roles-') };
});

afterAll(async () => {
  await baton?.stop();
});

describe('agent roles', () => {
  it('POST /v1/agents stores the roles normalised and every read shows them', async () => {
    const added = await baton.post('/v1/agents', { id: 'rev1', provider: 'manual', roles: ['Reviewer', 'oncall', 'reviewer'] });
    expect(added.status).toBe(201);
    expect(added.body.roles).toEqual(['oncall', 'reviewer']);
    expect((await baton.get('/v1/agents/rev1')).body.roles).toEqual(['oncall', 'reviewer']);
    const plain = await baton.post('/v1/agents', { id: 'plain', provider: 'manual' });
    expect(plain.body.roles).toEqual([]);
    const { items } = (await baton.get('/v1/agents')).body as { items: Array<{ id: string; roles: string[] }> };
    expect(items.find((a) => a.id === 'rev1')?.roles).toEqual(['oncall', 'reviewer']);
  });

  it('refuses a bad role name with invalid_role and registers nothing', async () => {
    const bad = await baton.post('/v1/agents', { id: 'badrole', provider: 'manual', roles: ['not a role'] });
    expect(bad.status).toBe(400);
    expect(bad.body.error.code).toBe('invalid_role');
    expect((await baton.get('/v1/agents/badrole')).status).toBe(404);
  });

  it('PATCH /v1/agents/:id replaces or clears the roles, admin only, and leaves the generation', async () => {
    const before = (await baton.get('/v1/agents/rev1')).body;
    const set = await patch('rev1', { roles: ['frontend'] });
    expect(set.status).toBe(200);
    expect(set.body).toMatchObject({ id: 'rev1', roles: ['frontend'], generation: before.generation });
    expect((await patch('rev1', { roles: ['ok', 'no way'] })).body.error.code).toBe('invalid_role');
    expect((await baton.get('/v1/agents/rev1')).body.roles).toEqual(['frontend']);
    expect((await patch('nobody', { roles: [] })).body.error.code).toBe('agent_not_found');
    const agentToken = await baton.tokenFor('rev1');
    expect((await patch('rev1', { roles: [] }, agentToken)).status).toBe(403);
    expect((await patch('rev1', { roles: [] })).body.roles).toEqual([]);
    // A role change is a change to an agent: the audit log names the token that made it.
    const admin = (await baton.get('/v1/whoami')).body.tokenId;
    await eventually(async () => {
      const items = (await baton.get('/v1/audit?limit=50')).body.items as Array<{ tokenId: string; method: string; route: string }>;
      expect(items.some((r) => r.tokenId === admin && r.method === 'PATCH' && r.route === '/v1/agents/:id')).toBe(true);
    });
  });

  it('baton agent add --role, update --role / --clear-roles, and list and show print them', async () => {
    const added = await cli('agent', 'add', 'cli-rev', '--provider', 'manual', '--role', 'reviewer', '--role', 'Oncall');
    expect(added).toMatchObject({ code: 0 });
    expect(added.out).toContain('roles oncall, reviewer');
    expect((await cli('agent', 'show', 'cli-rev')).out).toMatch(/roles\s+oncall, reviewer/);
    expect((await cli('agent', 'list')).out).toMatch(/cli-rev\s.*oncall,reviewer/);

    const updated = await cli('agent', 'update', 'cli-rev', '--role', 'frontend');
    expect(updated).toMatchObject({ code: 0 });
    expect(updated.out).toContain('updated cli-rev: roles frontend');
    const cleared = await cli('agent', 'update', 'cli-rev', '--clear-roles', '--json');
    expect(JSON.parse(cleared.out).roles).toEqual([]);

    expect((await cli('agent', 'update', 'cli-rev')).code).toBe(2);
    expect((await cli('agent', 'update', 'cli-rev', '--role', 'a', '--clear-roles')).code).toBe(2);
    const bad = await cli('agent', 'update', 'cli-rev', '--role', 'bad role');
    expect(bad.code).toBe(1);
    expect(bad.err).toContain('invalid_role');
  });

  it("the MCP list_agents tool shows each agent's roles", async () => {
    await patch('rev1', { roles: ['reviewer'] });
    const client = new Client({ name: 'baton-test', version: '1.0.0' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${apiUrl}/mcp`), {
        requestInit: { headers: { Authorization: `Bearer ${await baton.tokenFor('plain')}` } },
      }),
    );
    try {
      const r = (await client.callTool({ name: 'list_agents', arguments: {} })) as CallToolResult;
      const agents = (r.structuredContent as { agents: Array<{ id: string; roles: string[] }> }).agents;
      expect(agents.find((a) => a.id === 'rev1')?.roles).toEqual(['reviewer']);
      expect(agents.find((a) => a.id === 'plain')?.roles).toEqual([]);
    } finally {
      await client.close();
    }
  });
});
