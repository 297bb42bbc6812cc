import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestSubscriptions } from '../support/test-subscriptions.ts';
import { createBatonMetrics } from '../../libs/metrics/baton-metrics.ts';
import { eventually } from '../support/eventually.ts';
import { waitForState } from '../support/wait-for-state.ts';
import { startTestBaton, type TestBaton } from '../support/test-baton.ts';
import { Receiver } from '../support/subscription-receiver.ts';

/**
 * Signed event subscriptions end to end: handoffs delivered by a real worker to demo agents,
 * the event log followed by the subscription dispatcher (woken by the Redis event stream), and
 * a real HTTP receiver on 127.0.0.1 that verifies every signature.
 */

let baton: TestBaton;
let running: ReturnType<typeof startTestSubscriptions>;
const metrics = createBatonMetrics();
const tokens: Record<string, string> = {};

async function subscribe(url: string, extra: Record<string, unknown> = {}, headers?: Record<string, string>) {
  const res = await baton.post('/v1/subscriptions', { url, ...extra }, headers);
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body as { subscription: { id: string; position: string }; secret: string };
}

async function eventsOf(handoffIds: readonly string[]): Promise<Array<{ id: bigint; handoffId: string }>> {
  const { rows } = await baton.db.pool.query<{ id: string; handoff_id: string }>(
    `SELECT e.id::text AS id, e.handoff_id FROM handoff_events e WHERE e.handoff_id = ANY($1::uuid[]) ORDER BY e.id`,
    [handoffIds],
  );
  return rows.map((r) => ({ id: BigInt(r.id), handoffId: r.handoff_id }));
}

async function send(from: string, to: string, n: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    const res = await baton.post('/v1/handoffs', { from, to, title: `job ${i}`, message: `do ${i}` });
    expect(res.status).toBe(201);
    ids.push(res.body.id as string);
  }
  return ids;
}

beforeAll(async () => {
  baton = await startTestBaton();
  for (const id of ['s', 'd1', 'd2', 'x'])
    expect((await baton.post('/v1/agents', { id, provider: id === 's' || id === 'x' ? 'manual' : 'demo' })).status).toBe(201);
  tokens['s'] = await baton.tokenFor('s');
  tokens['x'] = await baton.tokenFor('x');
  baton.startWorker({ concurrency: 8 });
  running = startTestSubscriptions(
    baton,
    'test-worker',
    { checkEveryMs: 200, backoffBaseMs: 20, backoffMaxMs: 100, maxAttempts: 4, pauseAfterMs: 60_000, requestTimeoutMs: 2_000 },
    metrics.subscriptions,
  );
});

afterAll(async () => {
  await running?.stop();
  await baton?.stop();
});

describe('signed event subscriptions', () => {
  it('delivers every event of 100 handoffs, in order per handoff, none missing, signed, duplicates only under one delivery id', async () => {
    const receiver = new Receiver();
    await receiver.start();
    const { subscription, secret } = await subscribe(receiver.url, { filter: { agents: ['d1', 'd2'] } });
    receiver.secret = secret;
    const ids = [...(await send('s', 'd1', 50)), ...(await send('s', 'd2', 50))];
    for (const id of ids) await waitForState(baton, id, 'RETURNED', 30_000);
    const expected = await eventsOf(ids);
    expect(expected.length).toBeGreaterThanOrEqual(ids.length * 4);
    await eventually(() => expect(new Set(receiver.got.map((r) => r.deliveryId)).size).toBe(expected.length), {
      timeoutMs: 30_000,
      what: 'every event delivered',
    });
    expect(receiver.refusedSignatures).toEqual([]);
    // Each delivery id names one event; a repeat carries the same id.
    for (const r of receiver.got) expect(r.deliveryId).toBe(`${subscription.id}:${r.eventId}`);
    expect([...new Set(receiver.got.map((r) => r.eventId))].sort((a, b) => (a < b ? -1 : 1))).toEqual(expected.map((e) => e.id));
    for (const id of ids) {
      const mine = receiver.got.filter((r) => r.handoffId === id).map((r) => r.eventId);
      const firsts = mine.filter((e, i) => mine.indexOf(e) === i);
      expect(firsts).toEqual(expected.filter((e) => e.handoffId === id).map((e) => e.id));
    }
    const shown = await baton.get(`/v1/subscriptions/${subscription.id}`);
    expect(BigInt(shown.body.subscription.position)).toBeGreaterThanOrEqual(expected[expected.length - 1]!.id);
    await baton.del(`/v1/subscriptions/${subscription.id}`);
    await receiver.close();
  }, 90_000);

  it('retries a receiver that answers 500 (and 429 with Retry-After) for a while, then delivers in order', async () => {
    const receiver = new Receiver();
    await receiver.start();
    let failures = 0;
    receiver.answer = () => {
      failures++;
      if (failures <= 2) return 500;
      if (failures === 3) return { status: 429, headers: { 'retry-after': '0' } };
      return 200;
    };
    const { subscription, secret } = await subscribe(receiver.url, { filter: { agents: ['d1'] } });
    receiver.secret = secret;
    const ids = await send('s', 'd1', 3);
    for (const id of ids) await waitForState(baton, id, 'RETURNED', 30_000);
    const expected = await eventsOf(ids);
    await eventually(() => expect(new Set(receiver.got.map((r) => r.eventId)).size).toBe(expected.length), { timeoutMs: 20_000 });
    expect(receiver.got.map((r) => r.eventId)).toEqual(expected.map((e) => e.id));
    expect(failures).toBeGreaterThan(3);
    const shown = await baton.get(`/v1/subscriptions/${subscription.id}`);
    expect(shown.body.subscription).toMatchObject({ status: 'active', deadLetters: 0, attempts: 0, failingSince: null });
    await baton.del(`/v1/subscriptions/${subscription.id}`);
    await receiver.close();
  }, 60_000);

  it('dead-letters an event the receiver refuses with a 4xx, moves on, and replays it', async () => {
    const receiver = new Receiver();
    await receiver.start();
    let refuse: bigint | null = null;
    receiver.answer = (r) => {
      if (refuse === null && r.event === 'enrolled') refuse = r.eventId;
      return r.eventId === refuse ? 422 : 200;
    };
    const { subscription, secret } = await subscribe(receiver.url, { filter: { agents: ['d2'] } });
    receiver.secret = secret;
    const [id] = await send('s', 'd2', 1);
    await waitForState(baton, id!, 'RETURNED', 30_000);
    const expected = await eventsOf([id!]);
    await eventually(() => expect(receiver.got.length).toBe(expected.length - 1), { timeoutMs: 20_000 });
    const shown = await baton.get(`/v1/subscriptions/${subscription.id}`);
    expect(shown.body.deadLetters).toEqual([expect.objectContaining({ eventId: String(refuse), attempts: 1 })]);
    expect(shown.body.deadLetters[0].lastError).toContain('HTTP 422');
    receiver.answer = () => 200;
    const replay = await baton.post(`/v1/subscriptions/${subscription.id}/replay`, {});
    expect(replay.status).toBe(200);
    expect(replay.body.replayed).toBe(true);
    await eventually(() => expect(receiver.got.some((r) => r.eventId === refuse)).toBe(true), { timeoutMs: 20_000 });
    // The replay delivers again from the dead letter on: later events come again under their own delivery ids.
    const ids = receiver.got.map((r) => r.deliveryId);
    for (const d of ids) expect(d).toMatch(new RegExp(`^${subscription.id}:\\d+$`));
    await eventually(async () => expect((await baton.get(`/v1/subscriptions/${subscription.id}`)).body.deadLetters).toEqual([]));
    await baton.del(`/v1/subscriptions/${subscription.id}`);
    await receiver.close();
  }, 60_000);

  it('pauses a subscription that fails past the limit, shows it paused, and resumes it from where it stopped', async () => {
    await running.stop();
    running = startTestSubscriptions(
      baton,
      'test-worker-2',
      { checkEveryMs: 100, backoffBaseMs: 20, backoffMaxMs: 50, maxAttempts: 1_000, pauseAfterMs: 300, requestTimeoutMs: 2_000 },
      metrics.subscriptions,
    );
    const receiver = new Receiver();
    await receiver.start();
    receiver.answer = () => 503;
    const { subscription, secret } = await subscribe(receiver.url, { filter: { agents: ['d1'] } });
    receiver.secret = secret;
    const ids = await send('s', 'd1', 2);
    for (const id of ids) await waitForState(baton, id, 'RETURNED', 30_000);
    const paused = await eventually(
      async () => {
        const s = (await baton.get(`/v1/subscriptions/${subscription.id}`)).body.subscription;
        expect(s.status).toBe('paused');
        return s;
      },
      { timeoutMs: 20_000 },
    );
    expect(paused.pausedReason).toContain('HTTP 503');
    expect(receiver.got).toEqual([]);
    receiver.answer = () => 200;
    const resumed = await baton.post(`/v1/subscriptions/${subscription.id}/resume`, {});
    expect(resumed.status).toBe(200);
    expect(resumed.body.subscription).toMatchObject({ status: 'active', pausedReason: null });
    const expected = await eventsOf(ids);
    await eventually(() => expect(receiver.got.map((r) => r.eventId)).toEqual(expected.map((e) => e.id)), { timeoutMs: 20_000 });
    const text = await metrics.registry.metrics();
    expect(text).toMatch(/baton_subscription_deliveries_total\{outcome="paused"\} [1-9]/);
    expect(text).toMatch(/baton_subscription_deliveries_total\{outcome="retried"\} [1-9]/);
    expect(text).toMatch(/baton_subscription_deliveries_total\{outcome="delivered"\} [1-9]/);
    expect(text).toMatch(/baton_subscription_deliveries_total\{outcome="dead_lettered"\} [1-9]/);
    await baton.del(`/v1/subscriptions/${subscription.id}`);
    await receiver.close();
  }, 60_000);
});

describe('/v1/subscriptions', () => {
  it('returns the secret once, never on a read', async () => {
    const created = await subscribe('http://127.0.0.1:9/x');
    expect(created.secret).toMatch(/^bsub_[0-9a-f]{48}$/);
    const shown = await baton.get(`/v1/subscriptions/${created.subscription.id}`);
    const listed = await baton.get('/v1/subscriptions');
    expect(JSON.stringify(shown.body)).not.toContain(created.secret);
    expect(JSON.stringify(listed.body)).not.toContain(created.secret);
    expect(shown.body.subscription).not.toHaveProperty('secret');
    await baton.del(`/v1/subscriptions/${created.subscription.id}`);
  });

  it('lets an agent see and manage only its own subscriptions; an admin sees all of the project', async () => {
    const mine = await subscribe('http://127.0.0.1:9/s', {}, { authorization: `Bearer ${tokens['s']}` });
    const theirs = await subscribe('http://127.0.0.1:9/x', {}, { authorization: `Bearer ${tokens['x']}` });
    expect(mine.subscription).toMatchObject({ owner: 's' });
    const asS = await baton.get('/v1/subscriptions', { authorization: `Bearer ${tokens['s']}` });
    expect(asS.body.items.map((s: any) => s.id)).toEqual([mine.subscription.id]);
    for (const [method, path] of [
      ['GET', `/v1/subscriptions/${theirs.subscription.id}`],
      ['DELETE', `/v1/subscriptions/${theirs.subscription.id}`],
      ['POST', `/v1/subscriptions/${theirs.subscription.id}/replay`],
      ['POST', `/v1/subscriptions/${theirs.subscription.id}/resume`],
    ] as const) {
      const res = await baton.app.inject({
        method,
        url: path,
        headers: { authorization: `Bearer ${tokens['s']}` },
        ...(method === 'POST' ? { payload: {} } : {}),
      });
      expect(res.statusCode, `${method} ${path}`).toBe(404);
      expect(res.json().error.code).toBe('subscription_not_found');
    }
    const asAdmin = await baton.get('/v1/subscriptions');
    expect(asAdmin.body.items.map((s: any) => s.id)).toEqual(expect.arrayContaining([mine.subscription.id, theirs.subscription.id]));
    expect((await baton.del(`/v1/subscriptions/${theirs.subscription.id}`, { authorization: `Bearer ${tokens['x']}` })).status).toBe(204);
    expect((await baton.del(`/v1/subscriptions/${mine.subscription.id}`)).status).toBe(204);
  });

  it('refuses a URL that is not http(s), carries credentials, or names a private address', async () => {
    for (const url of [
      'ftp://example.com/x',
      'http://user:pw@example.com/x',
      'http://10.0.0.1/x',
      'http://192.168.1.1/x',
      'http://[fd00::1]/x',
    ]) {
      const res = await baton.post('/v1/subscriptions', { url });
      expect(res.status, url).toBe(422);
      expect(res.body.error.code).toBe('subscription_url_refused');
    }
  });
});

describe('baton subscription', () => {
  it('adds, lists, shows, replays, resumes and removes over the API', async () => {
    const { runCli } = await import('../../services/cli/program.ts');
    const { scratchDir } = await import('../support/scratch-dir.ts');
    const env = { BATON_URL: await baton.listen(), BATON_HOME: scratchDir('baton-subscriptions-'), BATON_TOKEN: tokens['s']! };
    const cli = async (...argv: string[]) => {
      let out = '';
      let err = '';
      const code = await runCli(argv, env, { out: (s) => void (out += s), err: (s) => void (err += s) });
      expect(code, `baton ${argv.join(' ')}: ${err}`).toBe(0);
      return out;
    };
    const added = JSON.parse(
      await cli('subscription', 'add', 'http://127.0.0.1:9/cli', '--agents', 'd1', '--states', 'returned', '--json'),
    );
    expect(added.secret).toMatch(/^bsub_/);
    expect(added.subscription.filter).toEqual({ agents: ['d1'], states: ['RETURNED'] });
    const id = added.subscription.id as string;
    expect(await cli('subscription', 'list')).toContain(id);
    const shown = await cli('subscription', 'show', id);
    expect(shown).toContain('agents d1; states RETURNED');
    expect(shown).not.toContain(added.secret);
    expect(await cli('subscription', 'replay', id)).toContain('nothing to replay');
    expect(await cli('subscription', 'replay', id, '--after', '0')).toContain('replaying');
    expect(await cli('subscription', 'resume', id)).toContain('active');
    expect(await cli('subscription', 'remove', id)).toContain(`removed ${id}`);
    expect((await baton.get(`/v1/subscriptions/${id}`)).status).toBe(404);
  });
});

describe('examples/subscription-receiver', () => {
  it('verifies the signature and prints each event once', async () => {
    const { spawn } = await import('node:child_process');
    const { createServer: netServer } = await import('node:net');
    const port = await new Promise<number>((resolve) => {
      const s = netServer().listen(0, '127.0.0.1', () => {
        const p = (s.address() as AddressInfo).port;
        s.close(() => resolve(p));
      });
    });
    const { subscription, secret } = await subscribe(`http://127.0.0.1:${port}/events`, { filter: { agents: ['d2'] } });
    const example = spawn(process.execPath, ['examples/subscription-receiver/receiver.mjs'], {
      env: { ...process.env, BATON_SUBSCRIPTION_SECRET: secret, PORT: String(port) },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    example.stdout.on('data', (c: Buffer) => (out += c.toString('utf8')));
    try {
      await eventually(() => expect(out).toContain('listening'), { timeoutMs: 10_000 });
      const [id] = await send('s', 'd2', 1);
      await waitForState(baton, id!, 'RETURNED', 30_000);
      const expected = await eventsOf([id!]);
      await eventually(() => expect(out.split('\n').filter((l) => l.includes(id!)).length).toBe(expected.length), { timeoutMs: 20_000 });
      expect(out, out).toMatch(new RegExp(`${id} turn_returned: RUNNING -> RETURNED`));
    } finally {
      example.kill();
      await baton.del(`/v1/subscriptions/${subscription.id}`);
    }
  }, 60_000);
});

describe('the signed poster', () => {
  it('follows no redirect and refuses, after DNS, an address the policy refuses', async () => {
    const { createSignedPoster } = await import('../../libs/adapters/webhook/signed-post.ts');
    const target = new Receiver();
    await target.start();
    let hits = 0;
    target.answer = () => {
      hits++;
      return { status: 302, headers: { location: 'http://127.0.0.1:9/elsewhere' } };
    };
    const open = createSignedPoster({ policy: 'no-private', timeoutMs: 2_000, errorChars: 200 });
    target.secret = 'k';
    const redirected = await open.post({
      url: target.url,
      secret: 'k',
      body: JSON.stringify({ deliveryId: 'a:1', event: { id: '1' } }),
      headers: { 'baton-delivery-id': 'a:1' },
      nowMs: Date.now(),
    });
    expect(redirected.status).toBe(302);
    expect(hits).toBe(1);
    const strict = createSignedPoster({ policy: 'public', timeoutMs: 2_000, errorChars: 200 });
    // A name is checked on the address it resolves to (this host's name: loopback or private on a test machine).
    const { hostname } = await import('node:os');
    const { lookup } = await import('node:dns/promises');
    const { addressKind } = await import('../../libs/domain/subscription-policy.ts');
    const resolved = await lookup(hostname()).catch(() => null);
    if (resolved && addressKind(resolved.address) !== 'public') {
      const byName = await strict.post({
        url: target.url.replace('127.0.0.1', hostname()),
        secret: 'k',
        body: '{}',
        headers: {},
        nowMs: Date.now(),
      });
      expect(byName.status).toBe(403);
      expect(byName.error).toMatch(/refused by BATON_SUBSCRIPTION_ADDRESSES=public/);
    }
    const literal = await strict.post({ url: target.url, secret: 'k', body: '{}', headers: {}, nowMs: Date.now() });
    expect(literal.status).toBe(403);
    expect(hits).toBe(1);
    await Promise.all([open.close(), strict.close(), target.close()]);
  });
});
