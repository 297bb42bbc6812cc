// An A2A client for a Baton agent, with the A2A SDK's own client (@a2a-js/sdk, protocol 1.0).
// Usage: BATON_URL=http://127.0.0.1:8787 BATON_TOKEN=<an agent token> node examples/a2a-client/client.mjs [--push] <agent> <message...>
// It reads the agent's card, sends the message (its id is the idempotency key: run it with the
// same A2A_MESSAGE_ID twice and you get the same task back), then asks for the task until it
// is no longer submitted or working, and prints its state and the turn's result.
// With --push it asks nothing: it listens on loopback, sends a push-notification config with the
// message, and prints each task Baton's workers POST to it (checking the token it chose) until
// the task is final.
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import { Role, StreamResponse, TaskState } from '@a2a-js/sdk';
import { ClientFactory, ClientFactoryOptions, DefaultAgentCardResolver, JsonRpcTransportFactory } from '@a2a-js/sdk/client';

const args = process.argv.slice(2);
const push = args[0] === '--push';
const [agent, ...words] = push ? args.slice(1) : args;
const base = process.env.BATON_URL ?? 'http://127.0.0.1:8787';
const token = process.env.BATON_TOKEN;
if (!agent || words.length === 0 || !token) {
  console.error('usage: BATON_TOKEN=<token> node examples/a2a-client/client.mjs [--push] <agent> <message...>');
  process.exit(2);
}

// Baton's tokens are the card's Bearer scheme.
const withToken = (input, init) => {
  const headers = new Headers(init?.headers);
  headers.set('authorization', `Bearer ${token}`);
  return fetch(input, { ...init, headers });
};
const factory = new ClientFactory(
  ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
    transports: [new JsonRpcTransportFactory({ fetchImpl: withToken })],
    cardResolver: new DefaultAgentCardResolver({ fetchImpl: withToken }),
    clientConfig: { polling: true },
  }),
);
// The trailing slash: the card (.well-known/agent-card.json) is found relative to it.
const client = await factory.createFromUrl(`${base}/a2a/agents/${agent}/`);
const card = await client.getAgentCard();
console.log(`card: ${card.name}, ${card.supportedInterfaces[0].url} (A2A ${card.supportedInterfaces[0].protocolVersion})`);

const FINAL = [TaskState.TASK_STATE_COMPLETED, TaskState.TASK_STATE_FAILED, TaskState.TASK_STATE_CANCELED, TaskState.TASK_STATE_REJECTED];
const notificationToken = randomUUID();
let pushed = null;
/** Resolves with the first pushed task in a final state. */
const finalPush = new Promise((resolve) => {
  pushed = createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      // Only what carries the token this client chose is Baton's.
      if (req.headers['x-a2a-notification-token'] !== notificationToken) return res.writeHead(401).end();
      res.writeHead(200).end();
      const r = StreamResponse.fromJSON(JSON.parse(Buffer.concat(chunks).toString('utf8')));
      if (r.payload?.$case !== 'task') return;
      console.log(`push: task ${r.payload.value.id}: ${TaskState[r.payload.value.status.state]}`);
      if (FINAL.includes(r.payload.value.status.state)) resolve(r.payload.value);
    });
  });
});
if (push) await new Promise((resolve) => pushed.listen(0, '127.0.0.1', resolve));
const pushConfig = push
  ? {
      tenant: '',
      id: '',
      taskId: '',
      url: `http://127.0.0.1:${pushed.address().port}/`,
      token: notificationToken,
      authentication: undefined,
    }
  : undefined;

const sent = await client.sendMessage({
  message: {
    messageId: process.env.A2A_MESSAGE_ID ?? randomUUID(),
    contextId: process.env.A2A_CONTEXT_ID ?? '', // a Baton session id, or none
    taskId: '',
    role: Role.ROLE_USER,
    parts: [{ content: { $case: 'text', value: words.join(' ') }, metadata: undefined, filename: '', mediaType: 'text/plain' }],
    metadata: undefined,
    extensions: [],
    referenceTaskIds: [],
  },
  configuration: { acceptedOutputModes: [], taskPushNotificationConfig: pushConfig, returnImmediately: true },
  metadata: undefined,
  tenant: '',
});
console.log(`task ${sent.id}: ${TaskState[sent.status.state]}`);

let task = sent;
if (push) {
  task = await finalPush;
  pushed.close();
}
while (task.status.state === TaskState.TASK_STATE_SUBMITTED || task.status.state === TaskState.TASK_STATE_WORKING) {
  await new Promise((r) => setTimeout(r, 500));
  task = await client.getTask({ id: sent.id, tenant: '' });
}
const text = task.status.message?.parts[0]?.content?.value ?? '';
console.log(`task ${task.id}: ${TaskState[task.status.state]} (${text})`);
for (const a of task.artifacts) for (const p of a.parts) if (p.content?.$case === 'text') console.log(`${a.name}: ${p.content.value}`);
