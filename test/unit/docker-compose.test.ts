import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { CONFIG_VARIABLES } from '../../libs/config/load-config.ts';
import { pushProviders } from '../../libs/adapters/provider-specs.ts';

/*
 * docker-compose.yml, the Dockerfile and the configuration tables, held against the code: the
 * compose file cannot be run here (no Docker), so what it must say is checked by reading it.
 */

const root = new URL('../../', import.meta.url);
const text = (rel: string) => readFileSync(new URL(rel, root), 'utf8');

interface Service {
  image?: string;
  build?: unknown;
  command?: string[];
  environment?: Record<string, string>;
  healthcheck?: { test?: string[] };
  volumes?: string[];
  restart?: string;
}
const compose = parse(text('docker-compose.yml'), { merge: true }) as {
  services: Record<string, Service>;
  volumes?: Record<string, unknown>;
};
const services = compose.services;
const batonServices = Object.entries(services).filter(([, s]) => s.image === 'baton:local');
const workers = batonServices.filter(([, s]) => s.command?.join(' ') === 'node bin/baton.mjs worker');
/** Services that run until stopped: everything but the one-shot migration. */
const longRunning = Object.entries(services).filter(([, s]) => s.restart !== 'no');

/** The variable names in the first column of a markdown table under `heading`. */
function tableVariables(markdown: string, heading: RegExp): string[] {
  const start = markdown.search(heading);
  expect(start, `heading ${heading}`).toBeGreaterThanOrEqual(0);
  const lines = markdown.slice(start).split('\n').slice(1);
  const names: string[] = [];
  let inTable = false;
  for (const line of lines) {
    if (line.startsWith('|')) {
      inTable = true;
      const first = line.split('|')[1] ?? '';
      for (const m of first.matchAll(/`([A-Z][A-Z0-9_]+)`/g)) names.push(m[1]!);
    } else if (inTable) break;
  }
  return names.sort();
}

describe('docker-compose.yml', () => {
  it('runs Postgres, Redis, the migration, the API, the demo host and the workers', () => {
    expect(Object.keys(services)).toEqual(expect.arrayContaining(['postgres', 'redis', 'migrate', 'api', 'demo-host']));
    expect(services['migrate']?.command).toEqual(['node', 'bin/baton.mjs', 'db', 'migrate']);
    expect(services['api']?.command).toEqual(['node', 'bin/baton.mjs', 'api']);
    expect(workers.length).toBeGreaterThanOrEqual(2);
  });

  it('has a health check for every long-running service', () => {
    expect(longRunning.length).toBe(Object.keys(services).length - 1);
    for (const [name, s] of longRunning) {
      expect(s.healthcheck?.test?.[0], `${name} has no healthcheck`).toMatch(/^CMD(-SHELL)?$/);
    }
  });

  it('sets only environment variables the configuration reads (or Postgres its own)', () => {
    const known = new Set<string>(CONFIG_VARIABLES);
    for (const [name, s] of batonServices) {
      for (const variable of Object.keys(s.environment ?? {})) {
        expect(known.has(variable), `${name}: ${variable} is not read by libs/config/load-config.ts`).toBe(true);
      }
    }
    expect(Object.keys(services['postgres']?.environment ?? {}).every((v) => v.startsWith('POSTGRES_'))).toBe(true);
  });

  it('starts Redis with maxmemory-policy noeviction (evicted BullMQ keys would lose jobs silently)', () => {
    const cmd = services['redis']?.command ?? [];
    const i = cmd.indexOf('--maxmemory-policy');
    expect(i, 'redis-server --maxmemory-policy').toBeGreaterThan(0);
    expect(cmd[i + 1]).toBe('noeviction');
  });

  it("keeps the API's admin token on a volume mounted at its BATON_HOME", () => {
    const api = services['api']!;
    const home = api.environment?.['BATON_HOME'];
    expect(home).toBeDefined();
    const mount = (api.volumes ?? []).map((v) => v.split(':')).find(([, target]) => target === home);
    expect(mount, `a volume at ${home}`).toBeDefined();
    expect(Object.keys(compose.volumes ?? {})).toContain(mount![0]);
  });

  it('has worker services per provider and pool, each naming known push providers, with shared queue settings', () => {
    const served = new Map<string, string[]>();
    for (const [name, s] of workers) {
      const env = s.environment ?? {};
      const providers = (env['BATON_WORKER_PROVIDERS'] ?? '').split(',').map((p) => p.trim());
      expect(
        providers.every((p) => pushProviders().includes(p)),
        `${name}: ${providers.join(',')}`,
      ).toBe(true);
      const pools = (env['BATON_WORKER_POOLS'] ?? 'default').split(',');
      for (const pool of pools) for (const p of providers) served.set(pool, [...(served.get(pool) ?? []), p]);
      // Queue names must be the same in every process.
      expect(env['BATON_REDIS_PREFIX']).toBe(services['api']!.environment?.['BATON_REDIS_PREFIX']);
      expect(env['BATON_QUEUE_SHARDS']).toBe(services['api']!.environment?.['BATON_QUEUE_SHARDS']);
    }
    // The providers a container can run (Codex and Claude Code run on the agent's own host).
    expect(served.get('default')).toEqual(expect.arrayContaining(['demo', 'command', 'webhook']));
    expect(
      [...served.keys()].some((pool) => pool !== 'default'),
      'a worker for a named pool',
    ).toBe(true);
  });
});

describe('the image', () => {
  it("runs on the Node major package.json's engines declare", () => {
    const engines = (JSON.parse(text('package.json')) as { engines: { node: string } }).engines.node;
    const major = /(\d+)/.exec(engines)?.[1];
    const froms = [...text('Dockerfile').matchAll(/^FROM\s+(\S+)/gm)].map((m) => m[1]!);
    expect(froms.length).toBeGreaterThan(0);
    for (const image of froms) expect(image, image).toMatch(new RegExp(`^node:${major}(\\.|-|$)`));
  });

  it('runs the compiled build, with no TypeScript at run time', () => {
    const dockerfile = text('Dockerfile');
    expect(dockerfile).toMatch(/npm run build/);
    expect(dockerfile).toMatch(/COPY --from=build \/app\/dist/);
    expect(dockerfile).not.toMatch(/\btsx\b/);
    const pkg = JSON.parse(text('package.json')) as { dependencies: Record<string, string> };
    expect(Object.keys(pkg.dependencies)).not.toContain('tsx');
    expect(Object.keys(pkg.dependencies)).not.toContain('typescript');
    expect(text('bin/baton.mjs')).toMatch(/dist\/main\/baton\.js/);
  });
});

describe('the configuration tables', () => {
  it("README.md's table lists exactly the variables the configuration reads", () => {
    expect(tableVariables(text('README.md'), /^## Configuration/m)).toEqual([...CONFIG_VARIABLES].sort());
  });

  it("libs/config/README.md's table lists exactly the variables the configuration reads", () => {
    expect(tableVariables(text('libs/config/README.md'), /^# libs\/config/m)).toEqual([...CONFIG_VARIABLES].sort());
  });
});
