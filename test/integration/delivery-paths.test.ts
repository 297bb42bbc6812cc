import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DemoBehavior } from '../../libs/adapters/demo/demo-agent-host.ts';
import { eventually } from '../support/eventually.ts';
import { startTestBaton, type TestBaton } from '../support/test-baton.ts';
import { waitForState } from '../support/wait-for-state.ts';

let baton: TestBaton;
let agentNo = 0;

/** A fresh recipient whose next turns behave as scripted. */
async function recipient(script: DemoBehavior[] = []): Promise<string> {
  const id = `r${++agentNo}`;
  expect((await baton.post('/v1/agents', { id, provider: 'demo' })).status).toBe(201);
  baton.host.script(id, script);
  return id;
}

async function send(to: string, message = 'do the thing') {
  const res = await baton.post('/v1/handoffs', { from: 'sender', to, message, title: message });
  expect(res.status).toBe(201);
  return res.body.id as string;
}

const settle = (id: string, state: string) => waitForState(baton, id, state);

const path = (h: any) => h.events.map((e: any) => `${e.to}`).join(' ');

beforeAll(async () => {
  baton = await startTestBaton();
  expect((await baton.post('/v1/agents', { id: 'sender', provider: 'demo' })).status).toBe(201);
  baton.startWorker();
});

afterAll(async () => {
  await baton?.stop();
});

describe('delivery paths with simulated sessions', () => {
  it('resends an errored turn exactly twice, each time with a new request id, then FAILED', async () => {
    const to = await recipient(['fail', 'fail', 'fail']);
    const id = await send(to);
    const h = await settle(id, 'FAILED');
    expect(path(h)).toBe('WAITING SENDING ACCEPTED RUNNING WAITING SENDING ACCEPTED RUNNING WAITING SENDING ACCEPTED RUNNING FAILED');
    const requestIds = h.attempts.map((a: any) => a.requestId);
    expect(new Set(requestIds).size).toBe(3);
    expect(baton.host.writesByHandoff().get(id)).toEqual(requestIds);
  });

  it('an errored turn that succeeds on resend is RETURNED', async () => {
    const to = await recipient(['fail', 'ok']);
    const h = await settle(await send(to), 'RETURNED');
    expect(h.attempts.map((a: any) => a.status)).toEqual(['failed', 'returned']);
  });

  it('retries a refused write once; refused twice is FAILED and does not hold the recipient', async () => {
    const to = await recipient(['refuse', 'refuse']);
    const refused = await send(to, 'first');
    const next = await send(to, 'second');
    const h = await settle(refused, 'FAILED');
    expect(path(h)).toBe('WAITING SENDING OWNER_REJECTED SENDING OWNER_REJECTED FAILED');
    expect(baton.host.writesByHandoff().get(refused)).toBeUndefined();
    await settle(next, 'RETURNED');
  });

  it('a write refused once and then accepted is delivered', async () => {
    const to = await recipient(['refuse']);
    const h = await settle(await send(to), 'RETURNED');
    expect(h.attempts.map((a: any) => a.status)).toEqual(['rejected', 'returned']);
  });

  it('a lost reply is UNCERTAIN and is never resent', async () => {
    const to = await recipient(['lose_reply']);
    const id = await send(to);
    const h = await settle(id, 'UNCERTAIN');
    expect(h.attempts).toHaveLength(1);
    expect(h.attempts[0].status).toBe('lost');
    // It did land in the session, exactly once.
    expect(baton.host.writesByHandoff().get(id)).toEqual([h.attempts[0].requestId]);
    // The next handoff still goes out after the live turn ends.
    const next = await send(to, 'after the lost one');
    await settle(next, 'RETURNED');
    expect(baton.host.writesByHandoff().get(id)).toHaveLength(1);
  });

  it('a write lost before it landed is UNCERTAIN too (the writer cannot know)', async () => {
    const to = await recipient(['drop']);
    const id = await send(to);
    const h = await settle(id, 'UNCERTAIN');
    expect(baton.host.writesByHandoff().get(id)).toBeUndefined();
    expect(h.attempts).toHaveLength(1);
  });

  it('a session that no longer exists makes the delivery UNAVAILABLE', async () => {
    const to = await recipient(['gone']);
    const h = await settle(await send(to), 'UNAVAILABLE');
    expect(h.attempts[0].status).toBe('cancelled');
  });

  it('a session that says busy is retried later without spending the refusal or error budget', async () => {
    const to = await recipient(['busy', 'busy']);
    const h = await settle(await send(to), 'RETURNED');
    expect(path(h)).toContain('SENDING BUSY');
    expect(h.attempts.filter((a: any) => a.status === 'returned')).toHaveLength(1);
  });

  it('an interrupted turn is resent once, ten minutes later', async () => {
    const to = await recipient(['interrupt']);
    const id = await send(to);
    const h = await eventually(async () => {
      const res = await baton.get(`/v1/handoffs/${id}`);
      expect(res.body.events.at(-1).event).toBe('turn_interrupted_resend');
      return res.body;
    });
    expect(h.state).toBe('WAITING');
    const { rows } = await baton.db.pool.query<{ not_before: Date }>('SELECT not_before FROM handoffs WHERE id = $1', [id]);
    const delay = rows[0]!.not_before.getTime() - Date.parse(h.events.at(-1).at);
    expect(delay).toBe(10 * 60_000);
  });
});
