// An A2A client for a Baton agent, with the A2A SDK's own client (@a2a-js/sdk, protocol 1.0).
// Usage: BATON_URL=http://127.0.0.1:8787 BATON_TOKEN=<an agent token> node examples/a2a-client/client.mjs <agent> <message...>
// It reads the agent's card, sends the message (its id is the idempotency key: run it with the
// same A2A_MESSAGE_ID twice and you get the same task back), then asks for the task until it
// is no longer submitted or working, and prints its state and the turn's result.
import { randomUUID } from 'node:crypto';
import { Role, TaskState } from '@a2a-js/sdk';
import { ClientFactory, ClientFactoryOptions, DefaultAgentCardResolver, JsonRpcTransportFactory } from '@a2a-js/sdk/client';

const [agent, ...words] = process.argv.slice(2);
const base = process.env.BATON_URL ?? 'http://127.0.0.1:8787';
const token = process.env.BATON_TOKEN;
if (!agent || words.length === 0 || !token) {
  console.error('usage: BATON_TOKEN=<token> node examples/a2a-client/client.mjs <agent> <message...>');
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
  configuration: undefined,
  metadata: undefined,
  tenant: '',
});
console.log(`task ${sent.id}: ${TaskState[sent.status.state]}`);

let task = sent;
while (task.status.state === TaskState.TASK_STATE_SUBMITTED || task.status.state === TaskState.TASK_STATE_WORKING) {
  await new Promise((r) => setTimeout(r, 500));
  task = await client.getTask({ id: sent.id, tenant: '' });
}
const text = task.status.message?.parts[0]?.content?.value ?? '';
console.log(`task ${task.id}: ${TaskState[task.status.state]} (${text})`);
for (const a of task.artifacts) for (const p of a.parts) if (p.content?.$case === 'text') console.log(`${a.name}: ${p.content.value}`);
