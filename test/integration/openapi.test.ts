import { readFileSync } from 'node:fs';
import type { FastifyInstance, FastifySchema } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../services/api/app.ts';
import { DOCS_PREFIX, OPENAPI_PATH, OPENAPI_TAGS, registeredRoutes, UNDOCUMENTED_PREFIXES } from '../../services/api/plugins/openapi.ts';
import { createBatonMetrics } from '../../libs/metrics/baton-metrics.ts';
import { silentLogger, startTestBaton, type TestBaton } from '../support/test-baton.ts';

/**
 * The OpenAPI 3 document at /openapi.json is generated from the routes' own schemas, and held
 * here against the routes Fastify actually serves: every route is in it with its parameters,
 * query, headers, body and responses, and docs/API.md's route table lists exactly its routes.
 */

interface Operation {
  parameters?: Array<{ in: string; name: string; schema?: unknown }>;
  requestBody?: { content: Record<string, { schema: unknown }> };
  responses: Record<string, { content?: Record<string, { schema: unknown }> }>;
  security?: unknown[];
  tags?: string[];
}
type Document = { openapi: string; paths: Record<string, Record<string, Operation>>; tags?: Array<{ name: string; description?: string }> };

let baton: TestBaton;
/** An app of our own, with /metrics (routes as registered, with their schemas: registeredRoutes). */
let app: FastifyInstance;
const seen = new Map<string, FastifySchema | undefined>();
let doc: Document;

/** Every method and path Fastify routes, from its own route tree (app.printRoutes). */
function routesOf(instance: FastifyInstance): Array<{ method: string; path: string }> {
  const out: Array<{ method: string; path: string }> = [];
  const stack: string[] = [];
  for (const line of instance.printRoutes({ commonPrefix: false }).split('\n')) {
    const m = /^([│ ]*)[├└]── (.*) \(([A-Z, ]+)\)$/.exec(line.replace(/ {4}|│ {3}/g, (s) => (s.startsWith('│') ? '│' : ' ')));
    if (!m) continue;
    const depth = (m[1] ?? '').length;
    stack.length = depth;
    stack.push(m[2] ?? '');
    const path = stack.join('');
    for (const method of (m[3] ?? '').split(', ')) out.push({ method, path });
  }
  return out;
}

const documented = (path: string) => !UNDOCUMENTED_PREFIXES.some((p) => path === p || path.startsWith(`${p}/`));
const toOpenApiPath = (path: string) => path.replace(/:([A-Za-z_]+)/g, '{$1}');
const propertiesOf = (schema: unknown) => Object.keys((schema as { properties?: Record<string, unknown> } | undefined)?.properties ?? {});

beforeAll(async () => {
  baton = await startTestBaton();
  app = await buildApp({
    core: baton.core,
    turnReports: baton.repos.turnReports,
    defaultProject: 'default',
    logger: silentLogger(),
    metrics: createBatonMetrics(),
    checks: {},
  });
  await app.ready();
  for (const r of registeredRoutes(app)) seen.set(`${r.method} ${r.url}`, r.schema);
  const res = await app.inject({ method: 'GET', url: OPENAPI_PATH });
  expect(res.statusCode).toBe(200);
  doc = res.json<Document>();
});

afterAll(async () => {
  await app?.close();
  await baton?.stop();
});

describe('the OpenAPI document', () => {
  it('is OpenAPI 3, open to callers without a token, and the UI at /docs serves its own files with no external asset', async () => {
    expect(doc.openapi).toMatch(/^3\./);
    const page = await app.inject({ method: 'GET', url: `${DOCS_PREFIX}/` });
    expect(page.statusCode).toBe(200);
    expect(page.headers['content-security-policy']).toContain("default-src 'self'");
    const assets = [...page.body.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1] as string);
    expect(assets.length).toBeGreaterThan(0);
    for (const asset of assets) {
      expect(asset, 'no external asset').not.toMatch(/^(https?:)?\/\//);
      const res = await app.inject({ method: 'GET', url: new URL(asset, `http://x${DOCS_PREFIX}/`).pathname });
      expect(res.statusCode, asset).toBe(200);
    }
    // The policy itself lets nothing load from another origin (the logo is a data: URL).
    expect(page.headers['content-security-policy']).toMatch(/img-src 'self' data:; .*script-src 'self'; style-src 'self'$/);
  });

  it('lists every route Fastify serves with its path, query and header parameters, its body and its responses', () => {
    const routes = routesOf(app).filter((r) => r.method !== 'HEAD' && documented(r.path));
    expect(routes.length).toBeGreaterThan(30);
    const problems: string[] = [];
    const check = (ok: boolean, what: string) => {
      if (!ok) problems.push(what);
    };
    const names = (schema: unknown) => propertiesOf(schema).sort().join(',');
    for (const { method, path } of routes) {
      const where = `${method} ${path}`;
      const op = doc.paths[toOpenApiPath(path)]?.[method.toLowerCase()];
      const schema = seen.get(where);
      check(op !== undefined, `${where} is not in the document`);
      check(schema !== undefined, `${where} has no schema`);
      if (!op || !schema) continue;
      const params = (kind: string) =>
        (op.parameters ?? [])
          .filter((p) => p.in === kind && p.schema !== undefined)
          .map((p) => p.name)
          .sort()
          .join(',');
      const inPath = [...path.matchAll(/:([A-Za-z_]+)/g)]
        .map((m) => m[1])
        .sort()
        .join(',');
      check(
        params('path') === inPath && names(schema.params) === inPath,
        `${where}: path parameters ${params('path')} / schema ${names(schema.params)}, want ${inPath}`,
      );
      check(params('query') === names(schema.querystring), `${where}: query ${params('query')}, schema ${names(schema.querystring)}`);
      check(params('header') === names(schema.headers), `${where}: headers ${params('header')}, schema ${names(schema.headers)}`);
      if (method === 'POST' || method === 'PUT' || method === 'PATCH') {
        check(schema.body !== undefined, `${where} declares no body`);
        check(op.requestBody?.content['application/json']?.schema !== undefined, `${where}: no body in the document`);
      }
      const codes = Object.keys(schema.response ?? {});
      check(codes.length > 0, `${where} declares no response`);
      for (const code of codes) {
        const response = op.responses[code.toUpperCase()] ?? op.responses[code];
        check(response !== undefined, `${where}: response ${code} not in the document`);
        if (code !== '204')
          check(
            Object.values(response?.content ?? {})[0]?.schema !== undefined,
            `${where}: response ${code} has no schema in the document`,
          );
      }
    }
    expect(problems).toEqual([]);
  });

  it('groups every operation under one declared area, so the UI shows no "default" group', () => {
    const declared = (doc.tags ?? []).map((t) => t.name);
    expect(declared).toEqual(OPENAPI_TAGS.map((t) => t.name));
    const untagged: string[] = [];
    const byTag = new Map<string, string[]>();
    for (const [path, ops] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(ops)) {
        const where = `${method.toUpperCase()} ${path}`;
        if (op.tags?.length !== 1 || !declared.includes(op.tags[0] as string)) untagged.push(`${where}: ${JSON.stringify(op.tags)}`);
        for (const t of op.tags ?? []) byTag.set(t, [...(byTag.get(t) ?? []), where]);
      }
    }
    expect(untagged).toEqual([]);
    // Every declared area holds something, and a few routes sit where a reader looks for them.
    for (const name of declared) expect(byTag.get(name)?.length ?? 0, name).toBeGreaterThan(0);
    expect(byTag.get('work')).toContain('POST /v1/handoffs/{id}/accept');
    expect(byTag.get('handoffs')).toContain('POST /v1/handoffs');
    expect(byTag.get('identity')).toContain('GET /v1/projects');
    expect(byTag.get('health')).toContain('GET /readyz');
  });

  it('documents no route that does not exist', () => {
    const served = new Set(routesOf(app).map((r) => `${r.method.toLowerCase()} ${toOpenApiPath(r.path)}`));
    for (const [path, ops] of Object.entries(doc.paths))
      for (const method of Object.keys(ops)) expect(served.has(`${method} ${path}`), `${method} ${path}`).toBe(true);
  });

  it("docs/API.md's route table lists exactly the document's routes (method and path)", () => {
    const fromDoc = Object.entries(doc.paths)
      .flatMap(([path, ops]) => Object.keys(ops).map((m) => `${m.toUpperCase()} ${path.replace(/\{([A-Za-z_]+)\}/g, ':$1')}`))
      .sort();
    const text = readFileSync(new URL('../../docs/API.md', import.meta.url), 'utf8');
    const table = text.slice(text.indexOf('## Routes'), text.indexOf('\n## ', text.indexOf('## Routes') + 1));
    const fromApiMd: string[] = [];
    for (const row of table.split('\n')) {
      const cells = row.split('|').map((c) => c.trim());
      if (cells.length < 4 || !/^[A-Z, ]+$/.test(cells[1] ?? '') || cells[1] === 'method') continue;
      const methods = (cells[1] ?? '').split(',').map((m) => m.trim());
      const paths = [...(cells[2] ?? '').matchAll(/`([^`]+)`/g)].map((m) => m[1] as string);
      // A row names one method per path, or one method for all of its paths.
      if (methods.length === paths.length && methods.length > 1) paths.forEach((p, i) => fromApiMd.push(`${methods[i]} ${p}`));
      else for (const m of methods) for (const p of paths) fromApiMd.push(`${m} ${p}`);
    }
    expect([...new Set(fromApiMd)].sort()).toEqual(fromDoc);
  });
});
