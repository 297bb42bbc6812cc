import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestBaton, type TestBaton } from '../support/test-baton.ts';
import { waitForState } from '../support/wait-for-state.ts';

/**
 * Worker pools (host affinity): sessions of Claude Code and Codex live on one host's disk, so an
 * agent registered with a pool gets turns only from workers started with that pool.
 */
let baton: TestBaton;

beforeAll(async () => {
  baton = await startTestBaton();
  expect((await baton.post('/v1/agents', { id: 'sender', provider: 'manual' })).status).toBe(201);
});

afterAll(async () => {
  await baton?.stop();
});

async function send(to: string): Promise<string> {
  const res = await baton.post('/v1/handoffs', { from: 'sender', to, title: `for ${to}`, message: 'work' });
  expect(res.status).toBe(201);
  return res.body.id as string;
}

describe('worker pools', () => {
  it('registers an agent in a pool, shows it, and refuses a malformed pool name', async () => {
    const res = await baton.post('/v1/agents', { id: 'far', provider: 'demo', pool: 'host-b', settings: { thinkMs: 10 } });
    expect(res.status).toBe(201);
    expect(res.body.pool).toBe('host-b');
    expect((await baton.post('/v1/agents', { id: 'near', provider: 'demo', settings: { thinkMs: 10 } })).body.pool).toBe('default');
    const bad = await baton.post('/v1/agents', { id: 'odd', provider: 'demo', pool: 'Host:B' });
    expect(bad.status).toBe(400);
    expect(bad.body.error.code).toBe('validation_failed');
  });

  it('delivers to a pooled agent only from a worker of that pool', async () => {
    const defaultWorker = baton.startWorker();
    const nearId = await send('near');
    const farId = await send('far');
    await waitForState(baton, nearId, 'RETURNED');
    // The default pool's worker (and its reconciler's sweeps) never touch the far agent.
    await baton.reconcile();
    await baton.reconcile();
    await waitForState(baton, nearId, 'RETURNED');
    const waiting = (await baton.get(`/v1/handoffs/${farId}`)).body;
    expect(waiting.state).toBe('WAITING');
    expect(waiting.attempts).toEqual([]);
    await defaultWorker.stop();

    const poolWorker = baton.startWorker({ pools: ['host-b'] });
    try {
      await baton.reconcile();
      const h = await waitForState(baton, farId, 'RETURNED');
      expect(h.attempts).toHaveLength(1);
    } finally {
      await poolWorker.stop();
    }
  });
});
