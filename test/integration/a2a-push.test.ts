import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { promisify } from 'node:util';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StreamResponse, TaskState, type Task, type TaskPushNotificationConfig } from '@a2a-js/sdk';
import { LegacyJsonRpcTransport } from '@a2a-js/sdk/compat/v0_3/client';
import { LIMITS } from '../../libs/domain/limits.ts';
import { startTestSubscriptions } from '../support/test-subscriptions.ts';
import { a2aClient, userMessage, withToken } from '../support/a2a-clients.ts';
import { eventually } from '../support/eventually.ts';
import { startTestBaton, type TestBaton } from '../support/test-baton.ts';

/**
 * A2A push notifications (issue 33) through the SDK's own client: a config sent with the message,
 * and the config methods (Create, Get, List, Delete) in 1.0 and 0.3, delivered by the workers'
 * subscription dispatcher to a receiver on loopback with the headers A2A names.
 */

interface Push {
  readonly headers: IncomingHttpHeaders;
  readonly body: string;
}

/** Records every POST it gets and answers 200. */
class PushReceiver {
  readonly got: Push[] = [];
  url = '';
  private server: Server | null = null;

  async start(): Promise<void> {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        this.got.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
        res.writeHead(200).end('ok');
      });
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/a2a-push`;
  }

  /** The 1.0 pushes of one task, each a StreamResponse holding the task. */
  tasksOf(taskId: string): Array<{ task: Task; headers: IncomingHttpHeaders }> {
    return this.got.flatMap((p) => {
      const r = StreamResponse.fromJSON(JSON.parse(p.body));
      return r.payload?.$case === 'task' && r.payload.value.id === taskId ? [{ task: r.payload.value, headers: p.headers }] : [];
    });
  }

  close(): Promise<void> {
    return new Promise((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }
}

let baton: TestBaton;
let url: string;
let plannerToken: string;
let engineerToken: string;
let running: ReturnType<typeof startTestSubscriptions>;
const receiver = new PushReceiver();

const clientFor = (token: string, agent: string) => a2aClient(url, token, agent);

const config = (over: Partial<TaskPushNotificationConfig> = {}): TaskPushNotificationConfig => ({
  tenant: '',
  id: '',
  taskId: '',
  url: receiver.url,
  token: '',
  authentication: undefined,
  ...over,
});

const send = (t: string, push?: TaskPushNotificationConfig) => ({
  message: userMessage(t),
  configuration: { acceptedOutputModes: [], taskPushNotificationConfig: push, returnImmediately: true },
  metadata: undefined,
  tenant: '',
});

async function refusedWith(p: Promise<unknown>): Promise<{ batonCode?: string; name?: string }> {
  const err: unknown = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeDefined();
  // The SDK's client raises A2A's named error (TaskNotFoundError for -32001) carrying the ErrorInfo.
  const e = err as { name?: string; data?: Array<{ metadata?: { batonCode?: string } }> };
  return { batonCode: e.data?.[0]?.metadata?.batonCode, name: e.name };
}

beforeAll(async () => {
  baton = await startTestBaton();
  for (const id of ['planner', 'engineer']) expect((await baton.post('/v1/agents', { id, provider: 'demo' })).status).toBe(201);
  expect((await baton.post('/v1/agents', { id: 'inbox', provider: 'manual' })).status).toBe(201);
  plannerToken = await baton.tokenFor('planner');
  engineerToken = await baton.tokenFor('engineer');
  url = await baton.listen();
  await receiver.start();
  baton.startWorker();
  running = startTestSubscriptions(baton, 'push-worker', { checkEveryMs: 200, requestTimeoutMs: 2_000 });
});

afterAll(async () => {
  await running?.stop();
  await baton?.stop();
  await receiver.close();
});

describe('A2A push notifications', () => {
  it('a config sent with the message pushes every transition of the task, in order, to completed with its result', async () => {
    const planner = await clientFor(plannerToken, 'engineer');
    expect((await planner.getAgentCard()).capabilities?.pushNotifications).toBe(true);
    const sent = (await planner.sendMessage(send('Push each step', config({ token: 'tok-1' })))) as Task;
    const pushes = await eventually(
      () => {
        const got = receiver.tasksOf(sent.id);
        expect(got.at(-1)?.task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
        return got;
      },
      { what: 'the completed task pushed' },
    );
    // From submitted (the config came with the message) to completed; never backwards.
    const order = [TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING, TaskState.TASK_STATE_COMPLETED];
    const states = pushes.map((p) => order.indexOf(p.task.status!.state));
    expect(states.every((s) => s >= 0)).toBe(true);
    expect([...states].sort((a, b) => a - b)).toEqual(states);
    const last = pushes.at(-1)!;
    expect(last.task.artifacts.map((a) => a.name)).toEqual(['result']);
    expect(last.headers['x-a2a-notification-token']).toBe('tok-1');
    expect(last.headers['content-type']).toBe('application/a2a+json');
    expect(last.headers['authorization']).toBeUndefined();
    // Baton's own signature and delivery id ride along: one id per transition.
    expect(last.headers['baton-signature']).toMatch(/^v1=/);
    const ids = pushes.map((p) => p.headers['baton-delivery-id']);
    expect(new Set(ids).size).toBe(ids.length);

    // Done with its task's events, the config is not due however the log grows: no lease, no write per pass.
    await baton.post('/v1/handoffs', { to: 'inbox', message: 'the log grows' }, { authorization: `Bearer ${plannerToken}` });
    await running.dispatcher.idle();
    const due = await baton.repos.subscriptions.lease('probe', new Date(), new Date(Date.now() + 60_000), 2n ** 62n, 100);
    for (const s of due) await baton.repos.subscriptions.release(s.id, 'probe');
    expect(due.map((s) => s.handoffId)).not.toContain(sent.id);

    // The config sent with the message is on the task, under the message's id.
    const listed = await planner.listTaskPushNotificationConfig({ tenant: '', taskId: sent.id, pageSize: 0, pageToken: '' });
    expect(listed.configs).toEqual([expect.objectContaining({ taskId: sent.id, url: receiver.url, token: 'tok-1' })]);
  });

  it('Create, Get, List and Delete a config on a task; later transitions carry the Authorization it names', async () => {
    const planner = await clientFor(plannerToken, 'inbox');
    const task = (await planner.sendMessage(send('Wait in the inbox'))) as Task;
    const made = await planner.createTaskPushNotificationConfig(
      config({ taskId: task.id, id: 'mine', authentication: { scheme: 'Bearer', credentials: 'receiver-secret' } }),
    );
    expect(made).toMatchObject({
      id: 'mine',
      taskId: task.id,
      url: receiver.url,
      authentication: { scheme: 'Bearer', credentials: '[redacted]' },
    });
    expect(await planner.getTaskPushNotificationConfig({ tenant: '', taskId: task.id, id: 'mine' })).toEqual(made);
    // Created after the task was submitted: nothing is pushed until it moves.
    expect(receiver.tasksOf(task.id)).toEqual([]);

    // Only the caller's own configs: the recipient (who may read the task) sees none of them.
    const engineer = await clientFor(engineerToken, 'inbox');
    expect(await refusedWith(engineer.getTaskPushNotificationConfig({ tenant: '', taskId: task.id, id: 'mine' }))).toMatchObject({
      batonCode: expect.stringMatching(/^(push_config_not_found|handoff_not_found)$/),
    });

    await planner.cancelTask({ tenant: '', id: task.id, metadata: undefined });
    const canceled = await eventually(
      () => {
        const got = receiver.tasksOf(task.id);
        expect(got.at(-1)?.task.status?.state).toBe(TaskState.TASK_STATE_CANCELED);
        return got.at(-1)!;
      },
      { what: 'the canceled task pushed' },
    );
    expect(canceled.headers['authorization']).toBe('Bearer receiver-secret');
    expect(canceled.headers['x-a2a-notification-token']).toBeUndefined();

    await planner.deleteTaskPushNotificationConfig({ tenant: '', taskId: task.id, id: 'mine' });
    expect(await refusedWith(planner.getTaskPushNotificationConfig({ tenant: '', taskId: task.id, id: 'mine' }))).toEqual({
      batonCode: 'push_config_not_found',
      name: 'TaskNotFoundError',
    });
    expect((await planner.listTaskPushNotificationConfig({ tenant: '', taskId: task.id, pageSize: 0, pageToken: '' })).configs).toEqual([]);
  });

  it(`refuses a config to a refused URL, and more than ${LIMITS.pushConfigsPerTask} on one task, with their Baton codes`, async () => {
    const planner = await clientFor(plannerToken, 'inbox');
    expect(await refusedWith(planner.sendMessage(send('Bad hook', config({ url: 'ftp://example.com/x' }))))).toMatchObject({
      batonCode: 'subscription_url_refused',
    });
    const task = (await planner.sendMessage(send('Many hooks'))) as Task;
    for (let i = 0; i < LIMITS.pushConfigsPerTask; i++)
      await planner.createTaskPushNotificationConfig(config({ taskId: task.id, id: `c${i}` }));
    // The same id again is the config already there, not one more.
    await planner.createTaskPushNotificationConfig(config({ taskId: task.id, id: 'c0' }));
    expect(await refusedWith(planner.createTaskPushNotificationConfig(config({ taskId: task.id, id: 'one-too-many' })))).toMatchObject({
      batonCode: 'too_many_push_configs',
    });
    expect(
      (await planner.listTaskPushNotificationConfig({ tenant: '', taskId: task.id, pageSize: 0, pageToken: '' })).configs,
    ).toHaveLength(LIMITS.pushConfigsPerTask);
    expect(await refusedWith(planner.createTaskPushNotificationConfig(config({ taskId: randomUUID(), id: 'x' })))).toMatchObject({
      batonCode: 'handoff_not_found',
    });
  });

  it('runs the example client of the README with --push to a completed task, told by push notifications alone', async () => {
    const script = new URL('../../examples/a2a-client/client.mjs', import.meta.url).pathname;
    const { stdout } = await promisify(execFile)(process.execPath, [script, '--push', 'engineer', 'Say hello by push'], {
      env: { ...process.env, BATON_URL: url, BATON_TOKEN: plannerToken },
      timeout: 30_000,
    });
    expect(stdout).toMatch(/^push: task \S+: TASK_STATE_COMPLETED$/m);
    expect(stdout).toMatch(/^result: /m);
  });

  it('a config set over 0.3 (tasks/pushNotificationConfig/set) is pushed as the bare 0.3 task', async () => {
    const legacy = new LegacyJsonRpcTransport({ endpoint: `${url}/a2a/agents/inbox`, fetchImpl: withToken(plannerToken) });
    const sent = (await legacy.sendMessage(send('Old client push'))) as Task;
    await legacy.createTaskPushNotificationConfig(config({ taskId: sent.id, id: 'old', token: 'tok-03' }));
    const planner = await clientFor(plannerToken, 'inbox');
    await planner.cancelTask({ tenant: '', id: sent.id, metadata: undefined });
    const body = await eventually(
      () => {
        const p = receiver.got.find((g) => g.headers['x-a2a-notification-token'] === 'tok-03');
        expect(p).toBeDefined();
        return JSON.parse(p!.body) as { kind?: string; id?: string; status?: { state?: string } };
      },
      { what: 'the 0.3 push' },
    );
    expect(body).toMatchObject({ kind: 'task', id: sent.id, status: { state: 'canceled' } });
  });
});
