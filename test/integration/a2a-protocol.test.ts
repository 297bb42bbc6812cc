import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TaskState, type Task } from '@a2a-js/sdk';
import type { Client } from '@a2a-js/sdk/client';
import { LegacyJsonRpcTransport } from '@a2a-js/sdk/compat/v0_3/client';
import { LIMITS } from '../../libs/domain/limits.ts';
import { runCli } from '../../services/cli/program.ts';
import { a2aClient, userMessage, withToken } from '../support/a2a-clients.ts';
import { eventually } from '../support/eventually.ts';
import { startTestBaton, type TestBaton } from '../support/test-baton.ts';

let baton: TestBaton;
let url: string;
let plannerToken: string;
let engineerToken: string;
let otherToken: string;

const clientFor = (token: string, agent: string) => a2aClient(url, token, agent);

const send = (t: string, opts: { messageId?: string; taskId?: string; metadata?: Record<string, unknown> } = {}) => ({
  message: userMessage(t, opts),
  configuration: undefined,
  metadata: undefined,
  tenant: '',
});

const list = (over: Partial<Parameters<Client['listTasks']>[0]> = {}) => ({
  tenant: '',
  contextId: '',
  status: TaskState.TASK_STATE_UNSPECIFIED,
  pageToken: '',
  statusTimestampAfter: undefined,
  ...over,
});

async function refusedWith(p: Promise<unknown>): Promise<string | undefined> {
  const err: unknown = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  return (err as { data?: Array<{ metadata?: { batonCode?: string } }> } | undefined)?.data?.[0]?.metadata?.batonCode;
}

function asTask(r: unknown): Task {
  expect(r).toHaveProperty('status');
  return r as Task;
}

async function taskIn(client: Client, id: string, state: TaskState, what: string, check: (t: Task) => void = () => undefined) {
  return eventually(
    async () => {
      const t = await client.getTask({ id, tenant: '' });
      expect(t.status?.state).toBe(state);
      check(t);
      return t;
    },
    { what },
  );
}

beforeAll(async () => {
  baton = await startTestBaton();
  for (const id of ['planner', 'engineer']) expect((await baton.post('/v1/agents', { id, provider: 'demo' })).status).toBe(201);
  expect((await baton.post('/v1/agents', { id: 'inbox', provider: 'manual' })).status).toBe(201);
  expect((await baton.post('/v1/projects', { id: 'other' })).status).toBe(201);
  expect((await baton.post('/v1/agents', { id: 'outsider', provider: 'demo' }, { 'x-baton-project': 'other' })).status).toBe(201);
  plannerToken = await baton.tokenFor('planner');
  engineerToken = await baton.tokenFor('engineer');
  otherToken = await baton.tokenFor('outsider', 'other');
  url = await baton.listen();
  baton.startWorker();
});

afterAll(async () => {
  await baton?.stop();
});

describe('A2A protocol methods beyond a single message', () => {
  it("lists the caller's visible tasks of an agent, paged by a stable cursor and filtered by status", async () => {
    const planner = await clientFor(plannerToken, 'inbox');
    const sent: string[] = [];
    for (const t of ['one', 'two', 'three']) sent.push(asTask(await planner.sendMessage(send(`List ${t}`))).id);
    const first = await planner.listTasks(list({ pageSize: 2 }));
    expect(first.tasks).toHaveLength(2);
    expect(first.nextPageToken).not.toBe('');
    const second = await planner.listTasks(list({ pageSize: 2, pageToken: first.nextPageToken }));
    const seen = [...first.tasks, ...second.tasks].map((t) => t.id);
    expect(new Set(seen).size).toBe(seen.length);
    // Newest first: the last sent leads.
    expect(seen.slice(0, 3)).toEqual([...sent].reverse());
    expect(first.tasks[0]?.artifacts).toEqual([]);
    // totalSize counts every matching task, not the page.
    const everyTask = await planner.listTasks(list({ pageSize: 50 }));
    expect(everyTask.tasks.length).toBeGreaterThanOrEqual(3);
    expect(first.totalSize).toBe(everyTask.tasks.length);

    const submitted = await planner.listTasks(list({ status: TaskState.TASK_STATE_SUBMITTED, pageSize: 50 }));
    expect(submitted.tasks.map((t) => t.id)).toEqual(expect.arrayContaining(sent));
    // The filter is in the query: with the newest task canceled, the first page of two under it
    // still holds two submitted tasks (the next two), not one.
    await planner.cancelTask({ tenant: '', id: sent[2]!, metadata: undefined });
    const firstSubmitted = await planner.listTasks(list({ status: TaskState.TASK_STATE_SUBMITTED, pageSize: 2 }));
    expect(firstSubmitted.tasks.map((t) => t.id)).toEqual([sent[1], sent[0]]);
    expect(firstSubmitted.totalSize).toBe(submitted.tasks.length - 1);
    const completed = await planner.listTasks(list({ status: TaskState.TASK_STATE_COMPLETED, pageSize: 50 }));
    expect(completed.tasks.map((t) => t.id)).not.toEqual(expect.arrayContaining([sent[0]]));
    expect((await planner.listTasks(list({ contextId: sent[0]!, historyLength: 0 }))).tasks.map((t) => [t.id, t.history.length])).toEqual([
      [sent[0], 0],
    ]);
    expect(await refusedWith(planner.listTasks(list({ pageToken: 'not-ours' })))).toBe('invalid_cursor');

    // Another agent of the project sees none of the planner's handoffs; another project's token not the agent.
    const engineer = await clientFor(engineerToken, 'inbox');
    const theirs = (await engineer.listTasks(list({ pageSize: 50 }))).tasks.map((t) => t.id);
    for (const id of sent) expect(theirs).not.toContain(id);
    const outside = await fetch(`${url}/a2a/agents/inbox/.well-known/agent-card.json`, {
      headers: { authorization: `Bearer ${otherToken}` },
    });
    expect(outside.status).toBe(404);
  });

  it('continues an input-required task: a revision is a new turn on the same handoff, an accept completes it', async () => {
    const auth = { authorization: `Bearer ${plannerToken}` };
    const work = await baton.post('/v1/handoffs', { to: 'engineer', title: 'Release notes', message: 'Write them' }, auth);
    expect(work.status).toBe(201);
    const id = work.body.id as string;
    const client = await clientFor(plannerToken, 'engineer');
    const returned = await taskIn(client, id, TaskState.TASK_STATE_INPUT_REQUIRED, 'work returned');

    const revisionId = randomUUID();
    const revised = asTask(await client.sendMessage(send('Shorter, please', { taskId: id, messageId: revisionId })));
    expect(revised.id).toBe(id);
    // The same message id again is the same continuation: no second revision.
    expect(asTask(await client.sendMessage(send('Shorter, please', { taskId: id, messageId: revisionId }))).id).toBe(id);
    const again = await taskIn(client, id, TaskState.TASK_STATE_INPUT_REQUIRED, 'the revision turn returned', (t) =>
      expect(t.status?.message?.messageId).not.toBe(returned.status?.message?.messageId),
    );
    const attempts = await baton.db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM delivery_attempts WHERE handoff_id = $1', [
      id,
    ]);
    expect(attempts.rows[0]?.n).toBe(2);
    const revisions = await baton.db.pool.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM handoff_events WHERE handoff_id = $1 AND event = 'revision_requested' AND work_to_state IS NOT NULL",
      [id],
    );
    expect(revisions.rows[0]?.n).toBe(1);
    expect(again.artifacts).toHaveLength(1);

    const accepted = asTask(await client.sendMessage(send('Good', { taskId: id, metadata: { baton: { resolution: 'accepted' } } })));
    expect(accepted.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect((await baton.get(`/v1/handoffs/${id}?all_owners=true`)).body).toMatchObject({ work: { state: 'closed' } });
  });

  it("refuses a continuation by the task's recipient (not its sender) with not_sender (-32600), and sends no turn", async () => {
    const auth = { authorization: `Bearer ${plannerToken}` };
    const work = await baton.post('/v1/handoffs', { to: 'engineer', title: 'Notes', message: 'Write them' }, auth);
    expect(work.status).toBe(201);
    const id = work.body.id as string;
    await taskIn(await clientFor(plannerToken, 'engineer'), id, TaskState.TASK_STATE_INPUT_REQUIRED, 'work returned');
    // The engineer may read the task (it is the recipient), but only the planner may answer it.
    const engineer = await clientFor(engineerToken, 'engineer');
    expect(await refusedWith(engineer.sendMessage(send('I approve myself', { taskId: id })))).toBe('not_sender');
    const raw = await fetch(`${url}/a2a/agents/engineer`, {
      method: 'POST',
      headers: { authorization: `Bearer ${engineerToken}`, 'content-type': 'application/json', 'a2a-version': '1.0' },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 5,
        method: 'SendMessage',
        params: { message: { messageId: randomUUID(), taskId: id, role: 'ROLE_USER', parts: [{ text: 'Again' }] } },
      }),
    });
    // A method's refusal is a JSON-RPC answer (HTTP 200, as the SDK's handler answers): invalid request.
    expect(raw.status).toBe(200);
    expect(((await raw.json()) as { error: { code: number } }).error.code).toBe(-32600);
    const attempts = await baton.db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM delivery_attempts WHERE handoff_id = $1', [
      id,
    ]);
    expect(attempts.rows[0]?.n).toBe(1);
  });

  it('refuses a message continuing a completed task with task_not_continuable (A2A unsupported operation)', async () => {
    const client = await clientFor(plannerToken, 'engineer');
    const sent = asTask(await client.sendMessage(send('Just once')));
    await taskIn(client, sent.id, TaskState.TASK_STATE_COMPLETED, 'task completed');
    expect(await refusedWith(client.sendMessage(send('And again', { taskId: sent.id })))).toBe('task_not_continuable');
    const raw = await fetch(`${url}/a2a/agents/engineer`, {
      method: 'POST',
      headers: { authorization: `Bearer ${plannerToken}`, 'content-type': 'application/json', 'a2a-version': '1.0' },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 4,
        method: 'SendMessage',
        params: { message: { messageId: randomUUID(), taskId: sent.id, role: 'ROLE_USER', parts: [{ text: 'Once more' }] } },
      }),
    });
    // A2A's UnsupportedOperationError, in a JSON-RPC answer (HTTP 200, as the SDK's handler answers).
    expect(((await raw.json()) as { error: { code: number } }).error.code).toBe(-32004);
    expect(await refusedWith(client.sendMessage(send('Nobody', { taskId: randomUUID() })))).toBe('handoff_not_found');
  });

  it('serves the 0.3 names on the same endpoint: message/send to completed, tasks/get, message/stream', async () => {
    const legacy = new LegacyJsonRpcTransport({ endpoint: `${url}/a2a/agents/engineer`, fetchImpl: withToken(plannerToken) });
    const sent = await legacy.sendMessage(send('Old client'));
    const taskId = 'id' in sent ? sent.id : '';
    expect(taskId).not.toBe('');
    const done = await eventually(
      async () => {
        const t = await legacy.getTask({ id: taskId, tenant: '' });
        expect(t.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
        return t;
      },
      { what: 'the 0.3 task completed' },
    );
    expect(done.artifacts[0]?.parts[0]?.content?.$case).toBe('text');
    const events = [];
    for await (const e of legacy.sendMessageStream(send('Old stream'))) events.push(e);
    const last = events[events.length - 1]?.payload;
    expect(last?.$case === 'task' || last?.$case === 'statusUpdate' ? last.value.status?.state : undefined).toBe(
      TaskState.TASK_STATE_COMPLETED,
    );

    const resumed = [];
    for await (const e of legacy.resubscribeTask({ id: taskId, tenant: '' })) resumed.push(e);
    expect(resumed.map((e) => e.payload?.$case === 'task' && e.payload.value.status?.state)).toEqual([TaskState.TASK_STATE_COMPLETED]);

    // Raw: the answer says which version it speaks; a 1.0 name without the header is the wrong version.
    const raw = (method: string, headers: Record<string, string> = {}) =>
      fetch(`${url}/a2a/agents/engineer`, {
        method: 'POST',
        headers: { authorization: `Bearer ${plannerToken}`, 'content-type': 'application/json', ...headers },
        body: JSON.stringify({ jsonrpc: '2.0', id: 9, method, params: { id: taskId } }),
      });
    const got = await raw('tasks/get');
    expect(got.status).toBe(200);
    expect(got.headers.get('a2a-version')).toBe('0.3');
    expect(((await got.json()) as { result: { kind: string; status: { state: string } } }).result).toMatchObject({
      kind: 'task',
      status: { state: 'completed' },
    });
    const missing = (await (
      await fetch(`${url}/a2a/agents/engineer`, {
        method: 'POST',
        headers: { authorization: `Bearer ${plannerToken}`, 'content-type': 'application/json' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 10, method: 'tasks/get', params: { id: randomUUID() } }),
      })
    ).json()) as { error: { code: number; data: { batonCode: string } } };
    expect(missing.error).toMatchObject({ code: -32001, data: { batonCode: 'handoff_not_found' } });
    const crossed = await raw('tasks/get', { 'a2a-version': '1.0' });
    const body = (await crossed.json()) as { error: { data: Array<{ metadata: { batonCode: string } }> } };
    expect(body.error.data[0]?.metadata.batonCode).toBe('protocol_version_unsupported');
  });

  it("shows the description and skills given at registration on the agent's card, a default skill without them", async () => {
    const skills = [{ id: 'review', name: 'Code review', description: 'Reviews a change', tags: ['code'], examples: ['Review PR 12'] }];
    const made = await baton.post('/v1/agents', { id: 'reviewer', provider: 'demo', description: 'Reviews code for the team', skills });
    expect(made.status).toBe(201);
    const card = await (await clientFor(plannerToken, 'reviewer')).getAgentCard();
    expect(card.description).toBe('Reviews code for the team');
    expect(card.skills).toEqual([expect.objectContaining(skills[0])]);
    const plain = await (await clientFor(plannerToken, 'engineer')).getAgentCard();
    expect(plain.skills.map((k) => k.id)).toEqual(['handoff']);
    const bad = await baton.post('/v1/agents', { id: 'bad', provider: 'demo', skills: [{ id: 'x' }, { id: 'x' }] });
    expect(bad.status).toBe(400);
    expect(bad.body.error.code).toBe('invalid_agent_card');
    const long = await baton.post('/v1/agents', { id: 'bad', provider: 'demo', description: 'd'.repeat(LIMITS.agentDescription + 1) });
    expect(long.body.error.code).toBe('invalid_agent_card');
    expect((await baton.del('/v1/agents/reviewer')).status).toBe(204);

    // The same through the CLI: --description and a repeatable --skill.
    const env = { BATON_URL: url, BATON_TOKEN: baton.adminToken, BATON_HOME: mkdtempSync(join(tmpdir(), 'baton-a2a-')) };
    let err = '';
    const argv = ['agent', 'add', 'linter', '--provider', 'demo', '--description', 'Lints', '--skill', '{"id":"lint","tags":["style"]}'];
    const code = await runCli([...argv, '--skill', '{"id":"fix"}'], env, { out: () => undefined, err: (t) => void (err += t) });
    rmSync(env.BATON_HOME, { recursive: true, force: true });
    expect(code, err).toBe(0);
    const lint = await (await clientFor(plannerToken, 'linter')).getAgentCard();
    expect(lint.description).toBe('Lints');
    expect(lint.skills.map((k) => [k.id, k.name, k.tags])).toEqual([
      ['lint', 'lint', ['style']],
      ['fix', 'fix', []],
    ]);
    expect((await baton.del('/v1/agents/linter')).status).toBe(204);
  });

  it("serves a root card whose skills are the caller's visible agents, none without a token", async () => {
    const card = async (token?: string) => {
      const r = await fetch(`${url}/.well-known/agent-card.json`, token ? { headers: { authorization: `Bearer ${token}` } } : {});
      expect(r.status).toBe(200);
      // ProtoJSON leaves an empty list out.
      const c = (await r.json()) as { name: string; skills?: Array<{ id: string; description: string }> };
      return { ...c, skills: c.skills ?? [] };
    };
    expect((await card()).skills).toEqual([]);
    const mine = (await card(plannerToken)).skills.map((s) => s.id).sort();
    expect(mine).toEqual(['engineer', 'inbox', 'planner']);
    expect((await card(plannerToken)).skills[0]?.description).toContain(`${url}/a2a/agents/`);
    expect((await card(otherToken)).skills.map((s) => s.id)).toEqual(['outsider']);
    expect((await fetch(`${url}/.well-known/agent-card.json`, { headers: { authorization: 'Bearer baton_nope' } })).status).toBe(401);
  });
});
