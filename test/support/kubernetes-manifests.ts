import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';

/** deploy/kubernetes, where the manifests live. */
export const MANIFEST_DIR = fileURLToPath(new URL('../../deploy/kubernetes/', import.meta.url));

export interface Manifest {
  /** Path under deploy/kubernetes. */
  readonly file: string;
  readonly object: any;
}

/** Every .yaml file under deploy/kubernetes (relative paths, sorted). */
export function manifestFiles(dir = MANIFEST_DIR): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const name of readdirSync(d)) {
      const path = join(d, name);
      if (statSync(path).isDirectory()) walk(path);
      else if (name.endsWith('.yaml')) out.push(relative(dir, path));
    }
  };
  walk(dir);
  return out.sort();
}

/** Every document of every manifest file (kustomization files included), parse errors thrown. */
export function loadManifests(): Manifest[] {
  return manifestFiles().flatMap((file) =>
    parseAllDocuments(readFileSync(join(MANIFEST_DIR, file), 'utf8')).map((doc) => {
      if (doc.errors.length > 0) throw new Error(`${file}: ${doc.errors[0]?.message}`);
      return { file, object: doc.toJS() };
    }),
  );
}

/** The Kubernetes objects (not kustomization files) of the manifests. */
export const kubernetesObjects = (all = loadManifests()) => all.filter((m) => m.object.kind !== 'Kustomization');

/** A pod template's owner: a Deployment, StatefulSet or Job, by name. */
export function workload(name: string, all = loadManifests()): any {
  const found = all.find((m) => ['Deployment', 'StatefulSet', 'Job'].includes(m.object.kind) && m.object.metadata.name === name);
  if (!found) throw new Error(`no workload ${name} in deploy/kubernetes`);
  return found.object;
}

/**
 * The environment a workload's first container gets from the base manifests (overlays left
 * out): its ConfigMaps (envFrom), then its own env; a secretKeyRef takes its value from `secrets` (the values a real
 * Secret would hold), and an optional one missing there is left out.
 */
export function workloadEnv(name: string, secrets: Record<string, string>, all = loadManifests()): Record<string, string> {
  const container = workload(name, all).spec.template.spec.containers[0];
  const configMaps = new Map(
    all.filter((m) => m.object.kind === 'ConfigMap' && !m.file.startsWith('overlays/')).map((m) => [m.object.metadata.name, m.object.data]),
  );
  const env: Record<string, string> = {};
  for (const from of container.envFrom ?? []) Object.assign(env, configMaps.get(from.configMapRef.name));
  for (const e of container.env ?? []) {
    if (e.value !== undefined) env[e.name] = String(e.value);
    else if (e.valueFrom?.configMapKeyRef)
      env[e.name] = configMaps.get(e.valueFrom.configMapKeyRef.name)?.[e.valueFrom.configMapKeyRef.key];
    else if (e.valueFrom?.secretKeyRef) {
      const value = secrets[e.valueFrom.secretKeyRef.key];
      if (value !== undefined) env[e.name] = value;
      else if (!e.valueFrom.secretKeyRef.optional) throw new Error(`${name}: no test value for secret key ${e.valueFrom.secretKeyRef.key}`);
    }
  }
  return env;
}

/** The ScaledObject triggers' Prometheus queries, of one scale target when `target` is given. */
export function scaledObjectQueries(all = loadManifests(), target?: string): string[] {
  return all
    .filter((m) => m.object.kind === 'ScaledObject' && (!target || m.object.spec.scaleTargetRef.name === target))
    .flatMap((m) => m.object.spec.triggers.map((t: any) => t.metadata.query as string));
}

/**
 * What a query's selectors (`name{label="v",label=~"a|b"}`) find missing in a Prometheus text scrape: for each selector,
 * a line when the metric has no `# TYPE` or, unless `typeOnly(name, labels)`, no series whose labels all match.
 */
export function unmatchedSelectors(query: string, scrape: string, typeOnly = (_name: string, _labels: string) => false): string[] {
  const selectors = [...query.matchAll(/(baton_[a-z_]+)\{([^}]*)\}/g)];
  if (selectors.length === 0) return [`${query}: no baton_ selector`];
  const missing: string[] = [];
  for (const [, name, labels] of selectors) {
    if (!scrape.includes(`# TYPE ${name} `)) {
      missing.push(`${name}: not exported`);
      continue;
    }
    if (typeOnly(name!, labels!)) continue;
    const wanted = [...labels!.matchAll(/(\w+)(=~?)"([^"]*)"/g)].map(([, k, op, v]) => ({
      k: k!,
      re: new RegExp(`^(${op === '=' ? v!.replace(/[.*+?^${}()|[\]\\]/g, '\\$&') : v})$`),
    }));
    const series = scrape.split('\n').filter((l) => l.startsWith(`${name}{`));
    const matching = series.filter((l) => wanted.every(({ k, re }) => re.test(new RegExp(`${k}="([^"]*)"`).exec(l)?.[1] ?? '')));
    if (matching.length === 0) missing.push(`${query}: no series in\n${series.join('\n')}`);
  }
  return missing;
}
