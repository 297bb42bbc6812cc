import { createServer } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../libs/config/load-config.ts';
import { startStack } from '../../services/cli/start-stack.ts';
import { TEST_REDIS_URL } from '../support/env.ts';
import { eventually } from '../support/eventually.ts';
import { startTestBaton, type TestBaton } from '../support/test-baton.ts';

/**
 * `GET /metrics` (prom-client) for admins: after a real delivery through a worker it shows the
 * transitions by state and provider, send→accepted and send→returned times, queue depth, turns
 * in flight and turn-lock holders while a turn runs, reconciler actions, HTTP timings by route
 * pattern, and process metrics. Agent tokens and callers without a token are refused.
 */

let baton: TestBaton;

beforeAll(async () => {
  baton = await startTestBaton();
  for (const [id, settings] of [
    ['planner', {}],
    ['engineer', {}],
    ['slowpoke', { thinkMs: 60_000 }],
  ] as const) {
    expect((await baton.post('/v1/agents', { id, provider: 'demo', settings })).status).toBe(201);
  }
  baton.startWorker();
});

afterAll(async () => {
  await baton?.stop();
});

async function scrape(): Promise<string> {
  const res = await baton.app.inject({ method: 'GET', url: '/metrics', headers: { authorization: `Bearer ${baton.adminToken}` } });
  expect(res.statusCode).toBe(200);
  expect(res.headers['content-type']).toMatch(/^text\/plain; version=0\.0\.4/);
  expect(res.headers['cache-control']).toBe('private, no-store');
  return res.body;
}

/** The value of one series (labels in any order), or undefined when it is not there. */
function valueOf(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const have = Object.fromEntries([...(m[2] ?? '').matchAll(/([a-zA-Z_]+)="([^"]*)"/g)].map((l) => [l[1], l[2]]));
    if (Object.entries(labels).every(([k, v]) => have[k] === v)) return Number(m[3]);
  }
  return undefined;
}

describe('/metrics', () => {
  it('after a delivered handoff shows its transitions, its delivery times, the queues, HTTP timings by route pattern and process metrics', async () => {
    const sent = await baton.post('/v1/handoffs', { from: 'planner', to: 'engineer', title: 'Measure me', message: 'a turn to count' });
    expect(sent.status).toBe(201);
    await eventually(async () => expect((await baton.get(`/v1/handoffs/${sent.body.id}`)).body.state).toBe('RETURNED'), {
      what: 'RETURNED',
    });
    const text = await scrape();
    const demo = { provider: 'demo', pool: 'default' };
    expect(valueOf(text, 'baton_transitions_total', { kind: 'delivery', state: 'WAITING', ...demo })).toBe(1);
    for (const state of ['SENDING', 'ACCEPTED', 'RUNNING', 'RETURNED'])
      expect(valueOf(text, 'baton_transitions_total', { kind: 'delivery', state, ...demo }), state).toBe(1);
    const accepted = {
      count: valueOf(text, 'baton_send_to_accepted_seconds_count', { provider: 'demo' }),
      sum: valueOf(text, 'baton_send_to_accepted_seconds_sum', { provider: 'demo' }),
    };
    const returned = {
      count: valueOf(text, 'baton_send_to_returned_seconds_count', { provider: 'demo' }),
      sum: valueOf(text, 'baton_send_to_returned_seconds_sum', { provider: 'demo' }),
    };
    expect(accepted.count).toBe(1);
    expect(returned.count).toBe(1);
    expect(accepted.sum).toBeGreaterThanOrEqual(0);
    expect(returned.sum).toBeGreaterThanOrEqual(accepted.sum ?? 0);
    expect(returned.sum).toBeLessThan(30);
    expect(valueOf(text, 'baton_send_to_returned_seconds_bucket', { provider: 'demo', le: '+Inf' })).toBe(1);
    // The queue drains (the job that ran the turn finishes just after RETURNED is committed); no turn is live.
    expect(valueOf(text, 'baton_queue_jobs', { ...demo, state: 'waiting' })).toBeGreaterThanOrEqual(0);
    await eventually(
      async () => {
        const now = await scrape();
        expect(valueOf(now, 'baton_queue_jobs', { ...demo, state: 'waiting' })).toBe(0);
        expect(valueOf(now, 'baton_queue_jobs', { ...demo, state: 'active' })).toBe(0);
      },
      { what: 'the delivery queue drained' },
    );
    expect(valueOf(text, 'baton_turns_in_flight', demo) ?? 0).toBe(0);
    // HTTP by route pattern, never the raw URL.
    expect(valueOf(text, 'baton_http_request_duration_seconds_count', { method: 'POST', route: '/v1/handoffs', status_code: '201' })).toBe(
      1,
    );
    expect(
      valueOf(text, 'baton_http_request_duration_seconds_count', { method: 'GET', route: '/v1/handoffs/:id', status_code: '200' }),
    ).toBeGreaterThanOrEqual(1);
    expect(text).not.toContain(sent.body.id);
    expect(valueOf(text, 'process_cpu_user_seconds_total')).toBeGreaterThan(0);
    expect(valueOf(text, 'nodejs_heap_size_used_bytes')).toBeGreaterThan(0);
    // A second scrape counts nothing twice.
    expect(valueOf(await scrape(), 'baton_transitions_total', { kind: 'delivery', state: 'RETURNED', ...demo })).toBe(1);
  });

  it('counts turns in flight and turn-lock holders while a turn runs, and the reconciler passes', async () => {
    const sent = await baton.post('/v1/handoffs', { from: 'planner', to: 'slowpoke', title: 'Take your time', message: 'a long turn' });
    expect(sent.status).toBe(201);
    await eventually(async () => expect((await baton.get(`/v1/handoffs/${sent.body.id}`)).body.state).toBe('RUNNING'), { what: 'RUNNING' });
    const text = await scrape();
    expect(valueOf(text, 'baton_turns_in_flight', { provider: 'demo', pool: 'default' })).toBe(1);
    expect(valueOf(text, 'baton_turn_locks_held', { provider: 'demo', pool: 'default' })).toBe(1);
    await baton.reconcile();
    const after = await scrape();
    expect(valueOf(after, 'baton_reconciler_passes_total')).toBe(1);
    for (const action of ['hold_lifted', 'reminder_sent', 'uncertain_scanned', 'claim_expired', 'agent_requeued']) {
      expect(valueOf(after, 'baton_reconciler_actions_total', { action }), action).toBeGreaterThanOrEqual(0);
    }
  });

  it('is for admins only: an agent token is 403 forbidden, no token 401', async () => {
    const agent = await baton.tokenFor('planner');
    const refused = await baton.app.inject({ method: 'GET', url: '/metrics', headers: { authorization: `Bearer ${agent}` } });
    expect(refused.statusCode).toBe(403);
    expect(refused.json().error.code).toBe('forbidden');
    expect(refused.body).not.toContain('baton_transitions_total');
    const anonymous = await baton.app.inject({ method: 'GET', url: '/metrics' });
    expect(anonymous.statusCode).toBe(401);
    expect(anonymous.json().error.code).toBe('unauthenticated');
  });
});

/** A port nothing listens on right now. */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => resolve(typeof address === 'object' && address ? address.port : 0));
    });
  });
}

describe('a worker process with BATON_METRICS_PORT', () => {
  it('serves its own reconciler actions and process metrics on that port (no token), and stops serving when it stops', async () => {
    const port = await freePort();
    const config = loadConfig({
      DATABASE_URL: baton.databaseUrl,
      REDIS_URL: TEST_REDIS_URL,
      BATON_REDIS_PREFIX: baton.prefix,
      BATON_QUEUE_SHARDS: '2',
      BATON_RECONCILE_INTERVAL_MS: '100',
      BATON_METRICS_PORT: String(port),
      BATON_LOG_LEVEL: 'silent',
    });
    const stack = await startStack({
      config,
      logger: baton.logger,
      api: false,
      worker: true,
      demoHost: baton.host,
      workerId: 'metrics-worker',
    });
    const url = `http://127.0.0.1:${port}/metrics`;
    try {
      const text = await eventually(
        async () => {
          const res = await fetch(url);
          expect(res.status).toBe(200);
          const body = await res.text();
          expect(valueOf(body, 'baton_reconciler_passes_total')).toBeGreaterThanOrEqual(1);
          return body;
        },
        { what: 'a reconciler pass counted on the worker port' },
      );
      expect(valueOf(text, 'baton_reconciler_actions_total', { action: 'agent_requeued' })).toBeGreaterThanOrEqual(0);
      expect(valueOf(text, 'process_cpu_user_seconds_total')).toBeGreaterThan(0);
      expect((await fetch(`http://127.0.0.1:${port}/other`)).status).toBe(404);
    } finally {
      await stack.stop();
    }
    await expect(fetch(url)).rejects.toThrow();
  });
});
