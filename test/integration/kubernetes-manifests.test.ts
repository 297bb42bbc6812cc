import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ScaledObject } from '@kubernetes-models/keda/keda.sh/v1alpha1';
import { Deployment, StatefulSet } from 'kubernetes-models/apps/v1';
import { Job } from 'kubernetes-models/batch/v1';
import { Ingress, NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1';
import { ConfigMap, Secret, Service } from 'kubernetes-models/v1';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { CONFIG_VARIABLES, loadConfig } from '../../libs/config/load-config.ts';
import { INT_SETTINGS } from '../../libs/config/int-settings.ts';
import { PROGRAM_ENV_NAMES } from '../../libs/domain/inherited-env.ts';
import { eventually } from '../support/eventually.ts';
import {
  kubernetesObjects,
  loadManifests,
  manifestFiles,
  MANIFEST_DIR,
  scaledObjectQueries,
  unmatchedSelectors,
  workloadEnv,
} from '../support/kubernetes-manifests.ts';
import { startTestBaton, type TestBaton } from '../support/test-baton.ts';

const MODELS: Record<string, new (data: any) => { validate(): void }> = {
  'apps/v1/Deployment': Deployment,
  'apps/v1/StatefulSet': StatefulSet,
  'batch/v1/Job': Job,
  'v1/ConfigMap': ConfigMap,
  'v1/Secret': Secret,
  'v1/Service': Service,
  'policy/v1/PodDisruptionBudget': PodDisruptionBudget,
  'networking.k8s.io/v1/NetworkPolicy': NetworkPolicy,
  'networking.k8s.io/v1/Ingress': Ingress,
  'keda.sh/v1alpha1/ScaledObject': ScaledObject,
};

const all = loadManifests();
const objects = kubernetesObjects(all);
const ofKind = (kind: string) => objects.filter((m) => m.object.kind === kind).map((m) => m.object);
const workloads = [...ofKind('Deployment'), ...ofKind('StatefulSet'), ...ofKind('Job')];
const containersOf = (w: any): any[] => w.spec.template.spec.containers;
/** Containers that run a Baton process reading libs/config (`baton api`, `worker`, `db migrate`). */
const batonContainers = workloads.flatMap((w) =>
  containersOf(w)
    .filter((c) => c.command?.includes('bin/baton.mjs'))
    .map((c) => ({ w, c })),
);
const command = (c: any): string => c.command.slice(2).join(' ');
const configMap = ofKind('ConfigMap').find((c) => c.metadata.name === 'baton-config');
/** What the Secrets would hold (placeholders stand in; loadConfig checks their form). */
const SECRETS = {
  DATABASE_URL: 'postgresql://baton:secret@postgres.example.internal:5432/baton',
  REDIS_URL: 'redis+cluster://redis-0.example.internal:6379,redis-1.example.internal:6379',
};

describe('deploy/kubernetes: every object is valid', () => {
  it.each(objects.map((m) => [`${m.file}: ${m.object.kind} ${m.object.metadata?.name}`, m.object]))('%s', (_name, object) => {
    const Model = MODELS[`${object.apiVersion}/${object.kind}`];
    expect(Model, `no schema for ${object.apiVersion} ${object.kind}`).toBeDefined();
    expect(() => new Model!(object).validate()).not.toThrow();
  });

  it('the base kustomization lists every base manifest but the example Secret; the overlay lists its own', () => {
    const base = parse(readFileSync(join(MANIFEST_DIR, 'base/kustomization.yaml'), 'utf8'));
    const expected = manifestFiles(join(MANIFEST_DIR, 'base')).filter((f) => f !== 'kustomization.yaml' && f !== 'secret.example.yaml');
    expect([...base.resources].sort()).toEqual(expected);
    const overlay = parse(readFileSync(join(MANIFEST_DIR, 'overlays/ingress/kustomization.yaml'), 'utf8'));
    const overlayFiles = manifestFiles(join(MANIFEST_DIR, 'overlays/ingress')).filter((f) => f !== 'kustomization.yaml');
    expect([...overlay.resources.filter((r: string) => r !== '../../base'), ...overlay.patches.map((p: any) => p.path)].sort()).toEqual(
      overlayFiles,
    );
    // Behind the Ingress the API believes the proxy's forwarded headers.
    const patch = objects.find((m) => m.file === 'overlays/ingress/trust-proxy.yaml')?.object;
    expect(loadConfig({ ...configMap.data, ...SECRETS, ...patch.data }).api.trustProxy).toBe(true);
    // The base has no namespace (overlays pick it) and no Ingress.
    expect(base.namespace).toBeUndefined();
    expect(objects.filter((m) => !m.file.startsWith('overlays/')).every((m) => m.object.metadata.namespace === undefined)).toBe(true);
    expect(ofKind('Ingress').every((i) => objects.find((m) => m.object === i)?.file.startsWith('overlays/ingress/'))).toBe(true);
  });
});

describe('deploy/kubernetes: overlays/managed-addresses', () => {
  it("narrows the workers' Postgres and Redis egress to address blocks and keeps the rest of the base policy", () => {
    const dir = join(MANIFEST_DIR, 'overlays/managed-addresses');
    const k = parse(readFileSync(join(dir, 'kustomization.yaml'), 'utf8'));
    expect(k.resources).toEqual(['../../base']);
    expect(k.patches.map((p: any) => p.path).sort()).toEqual(manifestFiles(dir).filter((f) => f !== 'kustomization.yaml'));
    const base = objects.find((m) => m.file === 'base/networkpolicy.yaml' && m.object.metadata.name === 'baton-workers')!.object;
    const patch = objects.find((m) => m.file === 'overlays/managed-addresses/workers-egress.yaml')!.object;
    // Same selection, ingress and DNS rule; the same ports out, each now only to an address block.
    expect(patch.spec.podSelector).toEqual(base.spec.podSelector);
    expect(patch.spec.ingress).toEqual(base.spec.ingress);
    expect(patch.spec.egress[0]).toEqual(base.spec.egress[0]);
    const ports = (rules: any[]) => rules.flatMap((r) => r.ports.map((p: any) => p.port)).sort();
    expect(ports(patch.spec.egress.slice(1))).toEqual(ports(base.spec.egress.slice(1)));
    for (const rule of patch.spec.egress.slice(1)) {
      expect(rule.to).toHaveLength(1);
      expect(rule.to[0].ipBlock.cidr).toMatch(/^\d+\.\d+\.\d+\.\d+\/\d+$/);
    }
  });
});

describe('deploy/kubernetes: wiring', () => {
  it('every env name and ConfigMap key is one libs/config reads (or one an agent program inherits)', () => {
    const known = new Set<string>([...CONFIG_VARIABLES, ...PROGRAM_ENV_NAMES]);
    const names = [
      ...ofKind('ConfigMap').flatMap((c) => Object.keys(c.data ?? {})),
      ...workloads.flatMap((w) => containersOf(w).flatMap((c) => (c.env ?? []).map((e: any) => e.name as string))),
    ];
    expect(names.length).toBeGreaterThan(10);
    expect(names.filter((n) => !known.has(n))).toEqual([]);
  });

  it('every Baton process accepts the configuration the manifests give it', () => {
    for (const { w } of batonContainers)
      expect(() => loadConfig(workloadEnv(w.metadata.name, SECRETS, all)), w.metadata.name).not.toThrow();
    const worker = loadConfig(workloadEnv('baton-pool-codex', SECRETS, all));
    expect(worker.workerPools).toEqual(['codex']);
  });

  it('every secretKeyRef, configMapKeyRef and configMapRef resolves to a key the manifests define', () => {
    const keys = (kind: string) =>
      new Set(ofKind(kind).flatMap((o) => Object.keys({ ...o.data, ...o.stringData }).map((k) => `${o.metadata.name}/${k}`)));
    const secretKeys = keys('Secret');
    const configKeys = keys('ConfigMap');
    const configMaps = new Set(ofKind('ConfigMap').map((c) => c.metadata.name));
    const refs = workloads.flatMap((w) => containersOf(w).flatMap((c) => [...(c.env ?? []), ...(c.envFrom ?? [])]));
    expect(refs.some((r) => r.valueFrom?.secretKeyRef)).toBe(true);
    for (const r of refs) {
      if (r.valueFrom?.secretKeyRef) expect(secretKeys).toContain(`${r.valueFrom.secretKeyRef.name}/${r.valueFrom.secretKeyRef.key}`);
      if (r.valueFrom?.configMapKeyRef)
        expect(configKeys).toContain(`${r.valueFrom.configMapKeyRef.name}/${r.valueFrom.configMapKeyRef.key}`);
      if (r.configMapRef) expect(configMaps).toContain(r.configMapRef.name);
    }
    expect(new Set(Object.keys(SECRETS))).toEqual(
      new Set([...secretKeys].filter((k) => k.startsWith('baton-secrets/')).map((k) => k.split('/')[1])),
    );
  });

  it('every long-running Baton pod may take longer to stop than BATON_SHUTDOWN_GRACE_MS, with a margin', () => {
    const margin = 5_000;
    const grace = Math.max(INT_SETTINGS.BATON_SHUTDOWN_GRACE_MS.default, Number(configMap.data.BATON_SHUTDOWN_GRACE_MS));
    const longRunning = batonContainers.filter(({ c }) => ['api', 'worker'].includes(command(c)));
    expect(longRunning.length).toBeGreaterThanOrEqual(6);
    for (const { w, c } of longRunning) {
      const own = (c.env ?? []).find((e: any) => e.name === 'BATON_SHUTDOWN_GRACE_MS')?.value;
      const seconds = w.spec.template.spec.terminationGracePeriodSeconds;
      expect(seconds * 1000, w.metadata.name).toBeGreaterThanOrEqual(Math.max(grace, Number(own ?? 0)) + margin);
    }
  });

  it('every pod runs as non-root with no privilege escalation; Baton containers have a read-only root and emptyDirs for what they write', () => {
    for (const w of workloads) {
      const pod = w.spec.template.spec;
      expect(pod.securityContext.runAsNonRoot, w.metadata.name).toBe(true);
      expect(pod.securityContext.runAsUser).toBeGreaterThan(0);
      for (const c of pod.containers) {
        expect(c.securityContext.allowPrivilegeEscalation).toBe(false);
        expect(c.securityContext.readOnlyRootFilesystem).toBe(true);
        expect(c.volumeMounts.map((m: any) => m.mountPath)).toContain('/tmp');
      }
    }
    for (const { w, c } of batonContainers.filter(({ c }) => ['api', 'worker'].includes(command(c)))) {
      expect(
        c.volumeMounts.map((m: any) => m.mountPath),
        w.metadata.name,
      ).toContain(configMap.data.BATON_HOME);
    }
    // The image runs as the same non-root user.
    expect(readFileSync(new URL('../../Dockerfile', import.meta.url), 'utf8')).toMatch(/^USER node$/m);
  });

  it('the disk pools are StatefulSets of one replica with a volume claim, never scaled by KEDA', () => {
    const pools = ofKind('StatefulSet');
    expect(pools.map((p) => workloadEnv(p.metadata.name, SECRETS, all).BATON_WORKER_PROVIDERS).sort()).toEqual(['claude_code', 'codex']);
    const scaled = new Set(ofKind('ScaledObject').map((s) => s.spec.scaleTargetRef.name));
    for (const p of pools) {
      expect(p.spec.replicas).toBe(1);
      expect(p.spec.volumeClaimTemplates).toHaveLength(1);
      expect(workloadEnv(p.metadata.name, SECRETS, all).BATON_WORKER_POOLS).toMatch(/^[a-z0-9_-]{1,32}$/);
      expect(scaled.has(p.metadata.name)).toBe(false);
    }
    // Each stateless provider's Deployment has a ScaledObject.
    const workers = ofKind('Deployment').filter((d) => containersOf(d)[0].command.includes('worker'));
    expect(workers.map((d) => workloadEnv(d.metadata.name, SECRETS, all).BATON_WORKER_PROVIDERS).sort()).toEqual([
      'command',
      'demo',
      'webhook',
    ]);
    for (const d of workers) expect(scaled.has(d.metadata.name), d.metadata.name).toBe(true);
  });
});

describe('deploy/kubernetes against the built API', () => {
  let baton: TestBaton;
  beforeAll(async () => {
    baton = await startTestBaton();
  }, 60_000);
  afterAll(async () => {
    await baton?.stop();
  });

  it('the API probes answer on the paths and the port the API Deployment names', async () => {
    const api = ofKind('Deployment').find((d) => d.metadata.name === 'baton-api');
    const c = containersOf(api)[0];
    const port = c.ports.find((p: any) => p.name === c.readinessProbe.httpGet.port);
    expect(String(port.containerPort)).toBe(configMap.data.BATON_API_PORT);
    expect(loadConfig(workloadEnv('baton-api', SECRETS, all)).api.port).toBe(port.containerPort);
    for (const probe of [c.readinessProbe, c.livenessProbe, c.startupProbe]) {
      expect(probe.httpGet.port).toBe(port.name);
      const res = await baton.app.inject({ method: 'GET', url: probe.httpGet.path });
      expect(res.statusCode, probe.httpGet.path).toBe(200);
    }
    expect(c.readinessProbe.httpGet.path).toBe('/readyz');
    expect(c.livenessProbe.httpGet.path).toBe('/healthz');
  });

  it('every metric a ScaledObject queries is on the API /metrics, with the labels it selects', async () => {
    for (const provider of ['command', 'webhook']) {
      const res = await baton.post('/v1/agents', agentBody(provider));
      expect(res.status, JSON.stringify(res.body)).toBe(201);
    }
    // A demo turn in flight (20 s long), so every demo series exists; the other providers' queues exist.
    await baton.post('/v1/agents', { id: 'k8s-boss', provider: 'demo' });
    await baton.post('/v1/agents', { id: 'k8s-demo', provider: 'demo', settings: { thinkMs: 20_000 } });
    baton.startWorker();
    const sent = await baton.post('/v1/handoffs', { from: 'k8s-boss', to: 'k8s-demo', message: 'long', title: 'long' });
    await eventually(async () => expect(['ACCEPTED', 'RUNNING']).toContain((await baton.get(`/v1/handoffs/${sent.body.id}`)).body.state));
    const res = await baton.app.inject({ method: 'GET', url: '/metrics', headers: { authorization: `Bearer ${baton.adminToken}` } });
    expect(res.statusCode).toBe(200);
    const queries = scaledObjectQueries(all);
    expect(queries.length).toBeGreaterThanOrEqual(6);
    // Turns in flight has series only where turns are live: the demo provider's, here.
    const typeOnly = (name: string, labels: string) => name === 'baton_turns_in_flight' && !labels.includes('provider="demo"');
    for (const query of queries) expect(unmatchedSelectors(query, res.body, typeOnly)).toEqual([]);
  });
});

/** A command or webhook agent's registration (what each provider requires). */
function agentBody(provider: string): Record<string, unknown> {
  return provider === 'command'
    ? { id: 'k8s-command', provider, settings: { argv: ['true'] } }
    : { id: 'k8s-webhook', provider, settings: { url: 'https://agent.example.com/turn', secret: 'k8s-manifest-test-secret' } };
}
