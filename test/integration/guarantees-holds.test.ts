import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../libs/domain/clock.ts';
import { eventually } from '../support/eventually.ts';
import { startTestBaton, type TestBaton } from '../support/test-baton.ts';
import { waitForState } from '../support/wait-for-state.ts';

let baton: TestBaton;
const clock = new ManualClock(Date.UTC(2026, 5, 1, 12, 0, 0));
let n = 0;

async function agent(settings: Record<string, unknown> = {}): Promise<string> {
  const id = `g${++n}`;
  expect((await baton.post('/v1/agents', { id, provider: 'demo', settings })).status).toBe(201);
  return id;
}

async function send(from: string, to: string, extra: Record<string, unknown> = {}) {
  const res = await baton.post('/v1/handoffs', { from, to, message: `work ${++n}`, title: `work ${n}`, ...extra });
  expect(res.status).toBe(201);
  return res.body.id as string;
}

const detail = async (id: string) => (await baton.get(`/v1/handoffs/${id}`)).body;

const until = (id: string, state: string) => waitForState(baton, id, state);

beforeAll(async () => {
  baton = await startTestBaton({ clock });
  baton.startWorker();
});

afterAll(async () => {
  await baton?.stop();
});

describe('deliberate holds', () => {
  it('a blocked connection holds deliveries as HELD without spending an attempt; allowing releases them', async () => {
    const [a, b] = [await agent(), await agent()];
    expect((await baton.put('/v1/connections', { from: a, to: b, rule: 'block' })).status).toBe(200);
    const id = await send(a, b);
    const held = await until(id, 'HELD');
    expect(held.attemptCount).toBe(0);
    expect(held.attempts).toEqual([]);
    expect(held.detail).toMatch(/blocked/);
    // Other senders still reach b.
    const other = await agent();
    await until(await send(other, b), 'RETURNED');
    expect((await baton.put('/v1/connections', { from: a, to: b, rule: 'allow' })).status).toBe(200);
    const done = await until(id, 'RETURNED');
    expect(done.events.filter((e: any) => e.workTo === null).map((e: any) => e.event)).toEqual([
      'enrolled',
      'held',
      'hold_lifted',
      'attempt_reserved',
      'turn_accepted',
      'turn_started',
      'turn_returned',
    ]);
  });

  it('pausing delivery (enabled = false) holds everything; resuming releases it', async () => {
    const [a, b] = [await agent(), await agent()];
    expect((await baton.put('/v1/settings/enabled', { value: false })).body.enabled).toBe(false);
    const id = await send(a, b);
    expect((await until(id, 'HELD')).detail).toMatch(/paused/);
    expect((await baton.put('/v1/settings/enabled', { value: true })).status).toBe(200);
    await until(id, 'RETURNED');
  });

  it('a pause until a time holds until that time, then lifts by itself', async () => {
    const [a, b] = [await agent(), await agent()];
    const until1 = new Date(clock.now().getTime() + 30 * 60_000).toISOString();
    expect((await baton.put('/v1/settings/enabledAfter', { value: until1 })).status).toBe(200);
    const id = await send(a, b);
    expect((await until(id, 'HELD')).detail).toContain(until1);
    await baton.reconcile();
    expect((await detail(id)).state).toBe('HELD');
    clock.advance(30 * 60_000);
    await baton.reconcile();
    await until(id, 'RETURNED');
    expect((await baton.put('/v1/settings/enabledAfter', { value: null })).status).toBe(200);
  });

  it('restricted connections deliver only pairs that were allowed', async () => {
    const [a, b] = [await agent(), await agent()];
    expect((await baton.put('/v1/settings/connections', { value: 'restricted' })).status).toBe(200);
    const id = await send(a, b);
    expect((await until(id, 'HELD')).detail).toMatch(/restricted/);
    await baton.put('/v1/connections', { from: a, to: b, rule: 'allow' });
    await until(id, 'RETURNED');
    expect((await baton.put('/v1/settings/connections', { value: 'open' })).status).toBe(200);
  });

  it('refuses unknown settings and bad values with stable codes', async () => {
    expect((await baton.put('/v1/settings/colour', { value: 'blue' })).body.error.code).toBe('unknown_setting');
    expect((await baton.put('/v1/settings/enabled', { value: 'yes' })).body.error.code).toBe('validation_failed');
    expect((await baton.put('/v1/connections', { from: 'nobody', to: 'g1', rule: 'block' })).body.error.code).toBe('agent_not_found');
  });
});

describe('provider outage guard', () => {
  it('keeps deliveries WAITING with the explanation and spends no attempt while the provider is marked down', async () => {
    const [a, b] = [await agent(), await agent()];
    await baton.put('/v1/settings/outageGuard', { value: { demo: { down: true, detail: 'planned maintenance' } } });
    const id = await send(a, b);
    const waiting = await eventually(async () => {
      const h = await detail(id);
      expect(h.events.map((e: any) => e.event)).toContain('provider_outage');
      return h;
    });
    expect(waiting.state).toBe('WAITING');
    expect(waiting.detail).toContain('planned maintenance');
    expect(waiting.attemptCount).toBe(0);
    // It keeps waiting (and is not re-logged on every look).
    await baton.reconcile();
    await baton.reconcile();
    expect((await detail(id)).events.filter((e: any) => e.event === 'provider_outage')).toHaveLength(1);
    await baton.put('/v1/settings/outageGuard', { value: {} });
    const done = await until(id, 'RETURNED');
    expect(done.attemptCount).toBe(1);
  });

  it('reads a status page: a major outage there holds deliveries', async () => {
    let indicator = 'major';
    const page = http.createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ status: { indicator, description: 'Major outage' } }));
    });
    await new Promise<void>((r) => page.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(page.address() as AddressInfo).port}/api/v2/status.json`;
    try {
      const [a, b] = [await agent(), await agent()];
      await baton.put('/v1/settings/outageGuard', { value: { demo: { statusUrl: url, detail: 'demo status page says major outage' } } });
      const id = await send(a, b);
      await eventually(async () => expect((await detail(id)).detail).toContain('major outage'));
      expect((await detail(id)).attemptCount).toBe(0);
      indicator = 'none';
      await until(id, 'RETURNED');
    } finally {
      await baton.put('/v1/settings/outageGuard', { value: {} });
      page.close();
    }
  });
});

describe('idempotent sends and duplicates', () => {
  it('fifty concurrent sends with the same idempotency key make one handoff and one delivery', async () => {
    const [a, b] = [await agent(), await agent()];
    const results = await Promise.all(
      Array.from({ length: 50 }, () => baton.post('/v1/handoffs', { from: a, to: b, message: 'once', idempotencyKey: 'race-key' })),
    );
    const ids = new Set(results.map((r) => r.body.id));
    expect(ids.size).toBe(1);
    expect(results.filter((r) => r.status === 201)).toHaveLength(1);
    expect(results.filter((r) => r.status === 200)).toHaveLength(49);
    const [id] = [...ids] as string[];
    await until(id!, 'RETURNED');
    const { rows } = await baton.db.pool.query('SELECT count(*)::int AS n FROM handoffs WHERE idempotency_key = $1', ['race-key']);
    expect(rows[0].n).toBe(1);
    expect(baton.host.writesByHandoff().get(id!)).toHaveLength(1);
  });

  it('an identical send while the first is in progress is recorded as DUPLICATE and not delivered, even when they race', async () => {
    const a = await agent();
    const b = await agent({ behavior: 'hang' });
    const body = { from: a, to: b, message: 'same words', title: 'same title' };
    const results = await Promise.all(Array.from({ length: 20 }, () => baton.post('/v1/handoffs', body)));
    expect(results.every((r) => r.status === 201)).toBe(true);
    const originals = results.filter((r) => r.body.state !== 'DUPLICATE');
    const duplicates = results.filter((r) => r.body.state === 'DUPLICATE');
    expect(originals).toHaveLength(1);
    expect(duplicates).toHaveLength(19);
    for (const d of duplicates) expect(d.body.duplicateOf).toBe(originals[0]!.body.id);
    await until(originals[0]!.body.id, 'RUNNING');
    expect(baton.host.history(b)).toHaveLength(1);
    // Different content is not a duplicate (it waits behind the running turn, as BUSY).
    const other = await baton.post('/v1/handoffs', { ...body, message: 'other words' });
    expect(other.body.state).toBe('BUSY');
    expect(other.body.duplicateOf).toBeNull();
  });
});

describe('acknowledge', () => {
  it('the recipient marks a plain message read: ACKNOWLEDGED, and it is never delivered', async () => {
    const a = await agent();
    const b = await agent({ behavior: 'hang' });
    await until(await send(a, b), 'RUNNING'); // b is busy, so the message waits
    const msg = await baton.post('/v1/handoffs', { from: a, to: b, message: 'FYI: the build is green' });
    await until(msg.body.id, 'BUSY');
    const notMine = await baton.post(`/v1/handoffs/${msg.body.id}/acknowledge`, { as: a });
    expect(notMine.status).toBe(403);
    expect(notMine.body.error.code).toBe('not_recipient');
    const acked = await baton.post(`/v1/handoffs/${msg.body.id}/acknowledge`, { as: b });
    expect(acked.status).toBe(200);
    expect(acked.body.state).toBe('ACKNOWLEDGED');
    const h = await detail(msg.body.id);
    expect(h.events.at(-1)).toMatchObject({ event: 'acknowledged', actor: { kind: 'recipient', id: b } });
    expect(baton.host.writesByHandoff().get(msg.body.id)).toBeUndefined();
    const again = await baton.post(`/v1/handoffs/${msg.body.id}/acknowledge`, { as: b });
    expect(again.body.error.code).toBe('invalid_transition');
  });

  it('work is returned, not acknowledged', async () => {
    const a = await agent();
    const b = await agent({ behavior: 'hang' });
    const id = await send(a, b);
    const res = await baton.post(`/v1/handoffs/${id}/acknowledge`, { as: b });
    expect(res.status).toBe(409);
    expect(res.body.error.code).toBe('not_a_message');
  });
});

describe('deadlines', () => {
  it('a handoff still open past its due time gives its sender exactly one reminder', async () => {
    const a = await agent();
    const b = await agent({ behavior: 'hang' });
    const id = await send(a, b, { dueMinutes: 5 });
    await until(id, 'RUNNING');
    await baton.reconcile();
    expect((await detail(id)).notifications).toEqual([]);
    clock.advance(6 * 60_000);
    await Promise.all([baton.reconcile(), baton.reconcile(), baton.reconcile()]);
    await baton.reconcile();
    const h = await detail(id);
    expect(h.notifications).toHaveLength(1);
    expect(h.notifications[0]).toMatchObject({ kind: 'deadline_passed', to: a });
    expect(h.reminderSentAt).not.toBeNull();
    const inbox = (await baton.get(`/v1/agents/${a}/inbox`)).body;
    expect(inbox.notifications.filter((x: any) => x.handoffId === id)).toHaveLength(1);
    expect((await baton.get(`/v1/agents/${b}/inbox`)).body.notifications).toEqual([]);
  });

  it('a handoff that finished before its due time gets no reminder', async () => {
    const [a, b] = [await agent(), await agent()];
    const id = await send(a, b, { dueMinutes: 5 });
    await until(id, 'RETURNED');
    clock.advance(6 * 60_000);
    await baton.reconcile();
    expect((await detail(id)).notifications).toEqual([]);
  });
});
