import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DemoAgentHost } from '../../libs/adapters/demo/demo-agent-host.ts';
import { serveDemoHost } from '../../libs/adapters/demo/demo-host-server.ts';
import { freePort } from '../../libs/processes/embedded-infra.ts';
import { eventually } from '../support/eventually.ts';
import { clusterUrl } from '../support/redis-targets.ts';
import { loadManifests, scaledObjectQueries, unmatchedSelectors, workload, workloadEnv } from '../support/kubernetes-manifests.ts';
import { newSecret } from '../../libs/handoffs/manage-tokens.ts';
import { scratchDir } from '../support/scratch-dir.ts';
import { runBaton, spawnBaton, SPAWNED_FIRST_TURN_MS, type BatonProcess } from '../support/spawn-baton.ts';
import { createTestDatabase } from '../support/test-database.ts';

/**
 * deploy/kubernetes on loopback: the migrations Job, the API and two demo workers run with the
 * environment their manifests give them (Postgres and Redis of the test standing in for the
 * managed ones; a per-test database, Redis prefix, ports and BATON_HOME for the pod's own). The
 * workers then get SIGTERM as a scale-down sends it: each must exit within its pod's
 * terminationGracePeriodSeconds, and the turns they had live must end RETURNED, written once.
 */
const manifests = loadManifests();
const running: BatonProcess[] = [];
let db: Awaited<ReturnType<typeof createTestDatabase>>;
let sessions: DemoAgentHost;
let served: Awaited<ReturnType<typeof serveDemoHost>>;
let apiUrl: string;
let token: string;
const prefix = `k8s-${randomBytes(4).toString('hex')}`;
/** The admin token as the operator generated it (`baton token generate`) into the baton-admin-token Secret. */
const adminSecret = newSecret();
// REDIS_URL is a redis+cluster:// URL, as the Secret's example: the suite's 3-primary cluster on loopback.
const secrets = () => ({ DATABASE_URL: db.url, REDIS_URL: clusterUrl(), BATON_TOKEN: adminSecret });

/** A manifest's environment with what this host must give instead (its pod's network, disk and Redis prefix). */
function podEnv(name: string, local: Record<string, string>): Record<string, string> {
  return { ...workloadEnv(name, secrets(), manifests), BATON_API_HOST: '127.0.0.1', BATON_REDIS_PREFIX: prefix, ...local };
}

/** The demo worker's liveness probe (GET /metrics on its metrics port). */
const liveness = workload('baton-worker-demo', manifests).spec.template.spec.containers[0].livenessProbe.httpGet;

/** Each worker's metrics URL (its liveness probe's path on its BATON_METRICS_PORT), by process. */
const metricsUrls = new Map<BatonProcess, string>();

async function startWorker(): Promise<BatonProcess> {
  const port = await freePort();
  const w = spawnBaton(
    ['worker'],
    podEnv('baton-worker-demo', {
      BATON_DEMO_HOST_URL: served.url,
      BATON_METRICS_PORT: String(port),
      BATON_HOME: scratchDir('baton-k8s-worker-'),
    }),
  );
  running.push(w);
  await w.waitFor(/delivery worker started/, SPAWNED_FIRST_TURN_MS);
  // Its liveness probe answers where the manifest points it.
  const scrape = await eventually(async () => {
    const r = await fetch(`http://127.0.0.1:${port}${liveness.path}`);
    expect(r.status).toBe(200);
    return r.text();
  });
  expect(scrape).toContain('baton_reconciler_passes_total');
  metricsUrls.set(w, `http://127.0.0.1:${port}${liveness.path}`);
  return w;
}

async function call(method: string, path: string, body?: unknown): Promise<any> {
  const res = await fetch(`${apiUrl}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    ...(body ? { body: JSON.stringify(body) } : {}),
  });
  const json: any = await res.json();
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(json)}`);
  return json;
}

const graceMs = Number(workloadEnv('baton-worker-demo', { DATABASE_URL: 'x', REDIS_URL: 'x' }, manifests).BATON_SHUTDOWN_GRACE_MS);
const podGraceMs = workload('baton-worker-demo', manifests).spec.template.spec.terminationGracePeriodSeconds * 1000;
/** Longer than the shutdown grace: every turn is still live when the grace ends, so it is handed back. */
const THINK_MS = graceMs + 5_000;

beforeAll(async () => {
  db = await createTestDatabase();
  sessions = new DemoAgentHost();
  served = await serveDemoHost(sessions);
  // The migrations Job, twice (a second rollout): the same command and environment.
  const job = workload('baton-migrate', manifests).spec.template.spec.containers[0];
  // It registers the Secret's admin token (BATON_ADMIN_TOKEN) once, and never prints it.
  for (const said of ['registered', 'already registered']) {
    const r = await runBaton(job.command.slice(2), workloadEnv('baton-migrate', secrets(), manifests));
    expect(r.code, r.output).toBe(0);
    expect(r.output).toContain(`admin token from BATON_ADMIN_TOKEN: ${said}`);
    expect(r.output).not.toContain(adminSecret);
  }
  const port = await freePort();
  const home = scratchDir('baton-k8s-api-');
  const api = spawnBaton(
    ['api'],
    podEnv('baton-api', { BATON_API_PORT: String(port), BATON_URL: `http://127.0.0.1:${port}`, BATON_HOME: home }),
  );
  running.push(api);
  await api.waitFor(/Baton API on/, SPAWNED_FIRST_TURN_MS);
  apiUrl = `http://127.0.0.1:${port}`;
  // The Secret's token is the admin's: the API minted none of its own, and no log shows it.
  token = adminSecret;
  expect(existsSync(join(home, 'admin.token'))).toBe(false);
  expect(api.output()).not.toContain(token);
}, 2 * SPAWNED_FIRST_TURN_MS);

afterAll(async () => {
  await Promise.all(running.map((p) => p.stop('SIGKILL')));
  await served?.close();
  await db?.drop();
});

describe('deploy/kubernetes: a scale-down of the demo workers', () => {
  it(
    'SIGTERM to both workers mid-turn: they exit within the pod grace, and every turn is RETURNED, written once',
    async () => {
      expect(podGraceMs).toBeGreaterThan(graceMs);
      const first = await Promise.all([startWorker(), startWorker()]);
      await call('POST', '/v1/agents', { id: 'boss', provider: 'demo' });
      const ids: string[] = [];
      for (let i = 0; i < 6; i++) {
        await call('POST', '/v1/agents', { id: `helper-${i}`, provider: 'demo', settings: { thinkMs: THINK_MS } });
        ids.push((await call('POST', '/v1/handoffs', { from: 'boss', to: `helper-${i}`, message: `turn ${i}`, title: `turn ${i}` })).id);
      }
      await eventually(
        async () => {
          for (const id of ids) expect(['ACCEPTED', 'RUNNING']).toContain((await call('GET', `/v1/handoffs/${id}`)).state);
        },
        { timeoutMs: SPAWNED_FIRST_TURN_MS, what: 'every turn live' },
      );
      // What KEDA reads to scale the demo workers is on a demo worker's own /metrics, with the labels it selects:
      // six turns in flight, and their jobs active in the demo queues.
      const queries = scaledObjectQueries(manifests, 'baton-worker-demo');
      expect(queries.length).toBeGreaterThanOrEqual(2);
      const scrape = await (await fetch(metricsUrls.get(first[0])!)).text();
      for (const query of queries) expect(unmatchedSelectors(query, scrape)).toEqual([]);
      expect(scrape).toMatch(/^baton_turns_in_flight\{provider="demo",pool="default"\} 6$/m);
      const stoppedAt = Date.now();
      const codes = await Promise.all(first.map((w) => w.stop('SIGTERM', podGraceMs)));
      // Within the pod's grace (else the kubelet's SIGKILL would have cut them off), and cleanly.
      expect(Date.now() - stoppedAt).toBeLessThan(podGraceMs);
      expect(codes).toEqual([0, 0]);
      console.info(`scale-down: both workers exited ${Date.now() - stoppedAt} ms after SIGTERM (pod grace ${podGraceMs} ms)`);
      await Promise.all([startWorker(), startWorker()]);
      await eventually(
        async () => {
          for (const id of ids) expect((await call('GET', `/v1/handoffs/${id}`)).state).toBe('RETURNED');
        },
        { timeoutMs: THINK_MS + SPAWNED_FIRST_TURN_MS, what: 'every handoff RETURNED after the scale-down' },
      );
      for (const id of ids) {
        const h = await call('GET', `/v1/handoffs/${id}`);
        const events: string[] = h.events.map((e: any) => e.event);
        if (id === ids[0]) console.info(`scale-down: events ${events.join(', ')}`);
        expect(
          events.filter((e) => e === 'attempt_reserved'),
          JSON.stringify(events),
        ).toHaveLength(1);
        expect(sessions.writesByHandoff().get(id), id).toHaveLength(1);
      }
    },
    3 * SPAWNED_FIRST_TURN_MS + 2 * THINK_MS,
  );
});
