import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TaskState, type Task } from '@a2a-js/sdk';
import { a2aClient, userMessage } from '../support/a2a-clients.ts';
import { eventually } from '../support/eventually.ts';
import { startTestBaton, type TestBaton } from '../support/test-baton.ts';

let baton: TestBaton;
let url: string;
let plannerToken: string;
let otherToken: string;
let inboxToken: string;

const clientFor = (token: string, agent: string, polling = true) => a2aClient(url, token, agent, polling);

const text = (t: string, messageId = randomUUID(), contextId = '') => ({
  message: userMessage(t, { messageId, contextId }),
  configuration: undefined,
  metadata: undefined,
  tenant: '',
});

/** Baton's code in a JSON-RPC error the SDK client threw (its data's ErrorInfo metadata). */
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

beforeAll(async () => {
  baton = await startTestBaton();
  for (const id of ['planner', 'engineer']) expect((await baton.post('/v1/agents', { id, provider: 'demo' })).status).toBe(201);
  // A pull agent: nothing is delivered to it until it claims, so its tasks stay submitted.
  expect((await baton.post('/v1/agents', { id: 'inbox', provider: 'manual' })).status).toBe(201);
  expect((await baton.post('/v1/projects', { id: 'other' })).status).toBe(201);
  expect((await baton.post('/v1/agents', { id: 'outsider', provider: 'demo' }, { 'x-baton-project': 'other' })).status).toBe(201);
  plannerToken = await baton.tokenFor('planner');
  otherToken = await baton.tokenFor('outsider', 'other');
  inboxToken = await baton.tokenFor('inbox');
  url = await baton.listen();
  baton.startWorker();
});

afterAll(async () => {
  await baton?.stop();
});

describe('the A2A gateway, with the SDK client over JSON-RPC', () => {
  it('serves a 1.0 card with a Bearer scheme and takes a message to completed with the turn result', async () => {
    const client = await clientFor(plannerToken, 'engineer');
    const card = await client.getAgentCard();
    expect(card.supportedInterfaces[0]).toMatchObject({
      url: `${url}/a2a/agents/engineer`,
      protocolBinding: 'JSONRPC',
      protocolVersion: '1.0',
    });
    // The listening API follows the event log, so it streams.
    expect(card.capabilities).toMatchObject({ streaming: true, pushNotifications: true });
    expect(card.securitySchemes['baton']?.scheme).toMatchObject({ $case: 'httpAuthSecurityScheme', value: { scheme: 'Bearer' } });

    const sent = asTask(await client.sendMessage(text('Write the release notes')));
    expect(sent.status?.state).toBe(TaskState.TASK_STATE_SUBMITTED);
    const done = await eventually(
      async () => {
        const t = await client.getTask({ id: sent.id, tenant: '' });
        expect(t.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
        return t;
      },
      { what: 'task completed' },
    );
    expect(done.artifacts[0]?.parts[0]?.content).toMatchObject({ $case: 'text' });
    const h = await baton.get(`/v1/handoffs/${sent.id}?all_owners=true`);
    expect(h.body).toMatchObject({ from: 'planner', to: 'engineer', state: 'RETURNED' });
    expect(done.artifacts[0]?.parts[0]?.content?.value).toBe(h.body.result.summary);
  });

  it('answers a repeated message id with the same task, and refuses another message under it', async () => {
    const client = await clientFor(plannerToken, 'engineer');
    const id = randomUUID();
    const a = asTask(await client.sendMessage(text('Once only', id)));
    const b = asTask(await client.sendMessage(text('Once only', id)));
    expect(b.id).toBe(a.id);
    const { rows } = await baton.db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM handoffs WHERE idempotency_key = $1', [id]);
    expect(rows[0]?.n).toBe(1);
    expect(await refusedWith(client.sendMessage(text('Something else', id)))).toBe('idempotency_conflict');
  });

  it('cancels a task the worker has not reached', async () => {
    {
      const client = await clientFor(plannerToken, 'inbox');
      const sent = asTask(await client.sendMessage(text('Never mind')));
      const cancelled = await client.cancelTask({ id: sent.id, tenant: '', metadata: undefined });
      expect(cancelled.status?.state).toBe(TaskState.TASK_STATE_CANCELED);
      expect(await refusedWith(client.cancelTask({ id: sent.id, tenant: '', metadata: undefined }))).toBe('invalid_transition');
    }
  });

  it("scopes the card list to the caller's project; another project's agent is 404 like a missing one", async () => {
    const list = await fetch(`${url}/a2a/agents`, { headers: { authorization: `Bearer ${plannerToken}` } });
    expect(((await list.json()) as { items: Array<{ name: string }> }).items.map((c) => c.name).sort()).toEqual([
      'engineer',
      'inbox',
      'planner',
    ]);
    const theirs = await fetch(`${url}/a2a/agents`, { headers: { authorization: `Bearer ${otherToken}` } });
    expect(((await theirs.json()) as { items: Array<{ name: string }> }).items.map((c) => c.name)).toEqual(['outsider']);

    const card = (agent: string) =>
      fetch(`${url}/a2a/agents/${agent}/.well-known/agent-card.json`, { headers: { authorization: `Bearer ${plannerToken}` } });
    const [hidden, missing] = await Promise.all([card('outsider'), card('nobody')]);
    expect(hidden.status).toBe(404);
    expect(missing.status).toBe(404);
    const hb = (await hidden.json()) as { error: { code: string; message: string } };
    const mb = (await missing.json()) as { error: { code: string; message: string } };
    expect(hb.error.code).toBe('agent_not_found');
    expect(hb.error.message.replace('outsider', 'X')).toBe(mb.error.message.replace('nobody', 'X'));

    const rpc = (agent: string) =>
      fetch(`${url}/a2a/agents/${agent}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${plannerToken}`, 'content-type': 'application/json', 'a2a-version': '1.0' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'GetTask', params: { id: randomUUID() } }),
      });
    for (const r of [await rpc('outsider'), await rpc('nobody')]) {
      expect(r.status).toBe(404);
      const body = (await r.json()) as { error: { code: number; data: Array<{ metadata: { batonCode: string } }> } };
      expect(body.error.data[0]?.metadata.batonCode).toBe('agent_not_found');
    }
  });

  it('refuses a request without A2A-Version, a bad token and a push config of an unknown task, each as a JSON-RPC error with its Baton code', async () => {
    const post = (headers: Record<string, string>, method = 'GetTask') =>
      fetch(`${url}/a2a/agents/engineer`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body: JSON.stringify({ jsonrpc: '2.0', id: 7, method, params: { id: randomUUID(), taskId: randomUUID() } }),
      });
    const codeOf = async (r: Response) =>
      ((await r.json()) as { error: { data: Array<{ metadata: { batonCode: string } }> } }).error.data[0]?.metadata.batonCode;
    const noVersion = await post({ authorization: `Bearer ${plannerToken}` });
    expect(noVersion.status).toBe(400);
    expect(await codeOf(noVersion)).toBe('protocol_version_unsupported');
    const badToken = await post({ authorization: 'Bearer baton_nope', 'a2a-version': '1.0' });
    expect(badToken.status).toBe(401);
    expect(await codeOf(badToken)).toMatch(/unauthenticated|invalid_token/);
    const push = await post({ authorization: `Bearer ${plannerToken}`, 'a2a-version': '1.0' }, 'GetTaskPushNotificationConfig');
    const pushBody = (await push.json()) as { error: { code: number; data: Array<{ metadata: { batonCode: string } }> } };
    // A push config of a task the caller cannot read: task not found, as GetTask answers.
    expect(pushBody.error.code).toBe(-32001);
    expect(pushBody.error.data[0]?.metadata.batonCode).toBe('handoff_not_found');
  });

  it('runs the example client of the README (examples/a2a-client/client.mjs) to a completed task', async () => {
    const script = new URL('../../examples/a2a-client/client.mjs', import.meta.url).pathname;
    const { stdout } = await promisify(execFile)(process.execPath, [script, 'engineer', 'Say hello'], {
      env: { ...process.env, BATON_URL: url, BATON_TOKEN: plannerToken },
      timeout: 30_000,
    });
    expect(stdout).toContain('card: engineer');
    expect(stdout).toMatch(/TASK_STATE_COMPLETED/);
    expect(stdout).toMatch(/^result: /m);
  });

  it('streams a task from SendStreamingMessage to completed, with the result as an artifact update', async () => {
    const client = await clientFor(plannerToken, 'engineer');
    const events = [];
    for await (const e of client.sendMessageStream(text('Stream it'))) events.push(e);
    expect(events[0]?.payload?.$case).toBe('task');
    // The turn may be over before the first event: the task then comes completed, alone.
    const last = events[events.length - 1]?.payload;
    const state = last?.$case === 'task' || last?.$case === 'statusUpdate' ? last.value.status?.state : undefined;
    expect(state).toBe(TaskState.TASK_STATE_COMPLETED);
    const artifact = events.some(
      (e) => e.payload?.$case === 'artifactUpdate' || (e.payload?.$case === 'task' && e.payload.value.artifacts.length > 0),
    );
    expect(artifact).toBe(true);
  });

  it('resumes a stream after a disconnect with SubscribeToTask: the task as it is, then its moves', async () => {
    const client = await clientFor(plannerToken, 'inbox');
    const ac = new AbortController();
    let taskId = '';
    try {
      for await (const e of client.sendMessageStream(text('Read me later'), { signal: ac.signal })) {
        if (e.payload?.$case === 'task') taskId = e.payload.value.id;
        ac.abort();
      }
    } catch {
      // the abort ends the stream with an error on the client's side
    }
    expect(taskId).not.toBe('');
    const again = client.resubscribeTask({ id: taskId, tenant: '' })[Symbol.asyncIterator]();
    const first = (await again.next()).value;
    expect(first?.payload?.$case === 'task' && first.payload.value.status?.state).toBe(TaskState.TASK_STATE_SUBMITTED);
    const ack = await baton.post(`/v1/handoffs/${taskId}/acknowledge`, {}, { authorization: `Bearer ${inboxToken}` });
    expect(ack.status).toBe(200);
    const moved = (await again.next()).value;
    expect(moved?.payload?.$case === 'statusUpdate' && moved.payload.value.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect((await again.next()).done).toBe(true);
  });

  it("joins a message to the Baton session its contextId names, whose facts go into the turn's context packet", async () => {
    const auth = { authorization: `Bearer ${plannerToken}` };
    const session = await baton.post('/v1/sessions', { title: 'Release 2.0' }, auth);
    expect(session.status).toBe(201);
    expect((await baton.post(`/v1/sessions/${session.body.id}/facts`, { kind: 'decision', text: 'ship on Friday' }, auth)).status).toBe(
      201,
    );
    const client = await clientFor(plannerToken, 'inbox');
    const task = asTask(await client.sendMessage(text('Draft the notes', randomUUID(), session.body.id)));
    expect(task.contextId).toBe(session.body.id);
    const packet = await baton.get(`/v1/handoffs/${task.id}/packet`, auth);
    expect(packet.body.text).toContain('ship on Friday');
    expect(await refusedWith(client.sendMessage(text('Nowhere', randomUUID(), randomUUID())))).toBe('session_not_found');
  });

  it('refuses a revoked token from its next call on, as /v1 does', async () => {
    const made = await baton.post('/v1/tokens', { agent: 'planner' });
    expect(made.status).toBe(201);
    const client = await clientFor(made.body.token, 'inbox');
    const task = asTask(await client.sendMessage(text('Before the revocation')));
    expect((await baton.del(`/v1/tokens/${made.body.record.id}`)).status).toBe(204);
    // The listening API hears of the revocation from Redis (its token cache is its own).
    await eventually(async () => expect(await refusedWith(client.getTask({ id: task.id, tenant: '' }))).toBe('invalid_token'), {
      what: 'the revoked token refused',
    });
  });

  it('answers a blocking SendMessage (no returnImmediately) once the task is completed', async () => {
    const client = await clientFor(plannerToken, 'engineer', false);
    const done = asTask(await client.sendMessage(text('Wait for me')));
    expect(done.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(done.artifacts).toHaveLength(1);
  });

  it('takes the sender from the token: an admin names its agent with X-Baton-Agent, an agent token naming another is refused', async () => {
    const send = (token: string, agent?: string) =>
      fetch(`${url}/a2a/agents/inbox`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${token}`,
          'content-type': 'application/json',
          'a2a-version': '1.0',
          ...(agent ? { 'x-baton-agent': agent } : {}),
        },
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: 3,
          method: 'SendMessage',
          params: {
            message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'From whom?' }] },
            configuration: { returnImmediately: true },
          },
        }),
      });
    const asPlanner = (await (await send(baton.adminToken, 'planner')).json()) as { result: { task: { id: string } } };
    expect((await baton.get(`/v1/handoffs/${asPlanner.result.task.id}?all_owners=true`)).body.from).toBe('planner');
    const mismatch = await send(plannerToken, 'engineer');
    expect(mismatch.status).toBe(403);
    const body = (await mismatch.json()) as { error: { data: Array<{ metadata: { batonCode: string } }> } };
    expect(body.error.data[0]?.metadata.batonCode).toBe('identity_mismatch');
  });
});
