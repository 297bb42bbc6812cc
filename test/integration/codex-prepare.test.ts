import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chmodSync, copyFileSync, existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, realpathSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stopAppServerDaemon } from '../../libs/adapters/codex/app-server-daemon.ts';
import { CODEX_SPEC } from '../../libs/adapters/codex/codex-settings.ts';
import { createCodexAdapter } from '../../libs/adapters/codex/create-codex-adapter.ts';
import { daemonPackageLink, installedCodexPackage } from '../../libs/adapters/codex/daemon-package.ts';
import { createAdapters } from '../../libs/adapters/create-adapters.ts';
import type { DeliveryTarget, ProviderAdapter, TurnRequest } from '../../libs/adapters/provider-adapter.ts';
import { agentClisDir } from '../support/agent-clis.ts';
import { startCodexFixture, type CodexFixture } from '../support/codex-fixture.ts';
import { eventually } from '../support/eventually.ts';
import { startTestBaton, type TestBaton } from '../support/test-baton.ts';
import { waitForState } from '../support/wait-for-state.ts';
import { turnRequest } from '../support/turn-request.ts';

/**
 * Readying fresh Codex homes ahead of their first turn, with the REAL codex 0.171.0: a home with
 * no daemon package would make the first `daemon start` copy the CLI's package into it (424 MB);
 * Baton links the installed package instead, starts the daemon, and does it when the worker
 * starts, not inside a write's deadline. The fixture's homes are left unpinned here.
 */

let fx: CodexFixture;
let adapter: ProviderAdapter;
let baton: TestBaton | undefined;
const homes: string[] = [];
let n = 0;
const signal = () => AbortSignal.timeout(20_000);

const turn = (message: string): TurnRequest => turnRequest(message);

/** Another fresh Codex home with the fixture's config (the fake model, nothing that phones home), no daemon package. */
function freshHome(name: string): string {
  const home = join(fx.root, name);
  mkdirSync(home);
  copyFileSync(join(fx.codexHome, 'config.toml'), join(home, 'config.toml'));
  homes.push(home);
  return home;
}

const target = (codexHome: string, extra: Record<string, unknown> = {}): DeliveryTarget => ({
  agentId: `agent-prep-${++n}`,
  handle: 'eng',
  target: 'eng',
  settings: { cwd: fx.cwd, codexHome, binary: fx.binary, ...extra },
});

/** The platform package the installed CLI runs, as the fixture's own pin would name it. */
function installedPackageDir(): string {
  const vendor = join(agentClisDir(), 'node_modules', '@openai', `codex-${process.platform}-${process.arch}`, 'vendor');
  const triple = readdirSync(vendor).find((d) => existsSync(join(vendor, d, 'codex-package.json')));
  return realpathSync(join(vendor, triple ?? 'missing'));
}

beforeAll(async () => {
  fx = await startCodexFixture({ pinPackage: false });
  adapter = createCodexAdapter({ baseEnv: fx.env, pollMs: 100 });
});

afterAll(async () => {
  await adapter?.close();
  await baton?.stop();
  // The fixture stops its own home's daemon; these are the others'.
  for (const home of homes) await stopAppServerDaemon({ binary: fx.binary, codexHome: home, env: fx.env }, signal()).catch(() => undefined);
  await fx?.close();
});

describe('preparing a Codex home ahead of the first turn, with the real codex CLI', () => {
  it('finds the installed package behind the npm launcher', async () => {
    expect(await installedCodexPackage(fx.binary, fx.env['PATH'])).toEqual({ dir: installedPackageDir(), version: '0.171.0' });
  });

  it('links the installed package into a fresh home (no copy) and starts its daemon; the first write then takes a fraction of its deadline', async () => {
    const t = target(fx.codexHome);
    expect(existsSync(daemonPackageLink(fx.codexHome))).toBe(false);
    const prepared = await adapter.prepare!(t, signal());
    expect(prepared.ready).toBe(true);
    expect(prepared.detail).toContain('linked the installed Codex 0.171.0 package');
    const link = daemonPackageLink(fx.codexHome);
    expect(lstatSync(link).isSymbolicLink()).toBe(true);
    expect(realpathSync(link), 'the home runs the installed package in place').toBe(installedPackageDir());
    expect(existsSync(join(fx.codexHome, 'packages', 'app-server-daemon', 'releases')), 'nothing was copied').toBe(false);
    expect(fx.daemonPid(), 'the daemon runs before any turn').not.toBeNull();
    // Preparing again changes nothing.
    expect((await adapter.prepare!(t, signal())).detail).toContain('selected already');
    fx.fake.script(() => ({ kind: 'reply', text: 'first turn done' }));
    const req = turn('the first turn of a fresh home');
    const started = Date.now();
    expect(await adapter.sendTurn(t, req, signal())).toEqual({ outcome: 'accepted' });
    const writeMs = Date.now() - started;
    expect(writeMs, `the first write took ${writeMs} ms`).toBeLessThan(CODEX_SPEC.deadlines.writeMs / 10);
    expect(await adapter.waitForTurn(t, req.requestId, { onRunning: async () => undefined }, signal())).toMatchObject({
      status: 'returned',
      result: { summary: 'first turn done' },
    });
  }, 30_000);

  it('a worker prepares the codex agents it serves when it starts, and only those', async () => {
    baton = await startTestBaton();
    const served = freshHome('home-served');
    const elsewhere = freshHome('home-elsewhere');
    expect((await baton.post('/v1/agents', { id: 'lead', provider: 'manual' })).status).toBe(201);
    const settings = (codexHome: string) => ({ cwd: fx.cwd, codexHome, binary: fx.binary });
    expect((await baton.post('/v1/agents', { id: 'served', provider: 'codex', settings: settings(served) })).status).toBe(201);
    expect(
      (await baton.post('/v1/agents', { id: 'other-pool', provider: 'codex', pool: 'elsewhere', settings: settings(elsewhere) })).status,
    ).toBe(201);
    const worker = baton.startWorker({
      adapters: createAdapters(['codex'], { demoHost: undefined, codex: { baseEnv: fx.env, pollMs: 100 } }),
    });
    try {
      const report = await worker.prepared;
      expect(report.map((r) => [r.handle, r.ready])).toEqual([['served', true]]);
      expect(realpathSync(daemonPackageLink(served))).toBe(installedPackageDir());
      expect(existsSync(daemonPackageLink(elsewhere)), "an agent of another pool is not this worker's to prepare").toBe(false);
      fx.fake.script(() => ({ kind: 'reply', text: 'served' }));
      const res = await baton.post('/v1/handoffs', { from: 'lead', to: 'served', title: 'first', message: 'the first handoff' });
      expect(res.status).toBe(201);
      const h = await waitForState(baton, res.body.id as string, 'RETURNED', 20_000);
      expect(h.resultSummary ?? h.result?.summary).toBe('served');
    } finally {
      await worker.stop();
    }
  }, 40_000);

  it("when no installed package can be found, the write waits (busy) while the daemon's first start copies one, outside the write's deadline", async () => {
    const home = freshHome('home-copied');
    // A wrapper script is not a package Baton can link: Codex copies its own on the first start.
    const wrapper = join(fx.root, 'codex-wrapper');
    writeFileSync(wrapper, `#!/bin/sh\nexec '${fx.binary}' "$@"\n`);
    chmodSync(wrapper, 0o755);
    const t = target(home, { binary: wrapper });
    const req = turn('the first turn of a home that must copy');
    fx.fake.script(() => ({ kind: 'reply', text: 'after the copy' }));
    const started = Date.now();
    const first = await adapter.sendTurn(t, req, signal());
    expect(first).toMatchObject({ outcome: 'busy', retryAfterMs: 5_000 });
    expect(first.outcome === 'busy' && first.detail).toMatch(/being prepared/);
    expect(Date.now() - started, 'answered at once, not after the copy').toBeLessThan(CODEX_SPEC.deadlines.writeMs / 10);
    // The copy (424 MB: 10-25 s on a quiet host, over 90 s on a loaded one) runs in the
    // background; a later write finds the home ready. The bound is the disk's, not Baton's.
    const accepted = await eventually(
      async () => {
        const r = await adapter.sendTurn(t, req, signal());
        if (r.outcome !== 'accepted') throw new Error(`still ${JSON.stringify(r)}`);
        return r;
      },
      { timeoutMs: 240_000, intervalMs: 1_000, what: 'the home is prepared and the write accepted' },
    );
    expect(accepted).toEqual({ outcome: 'accepted' });
    expect(readFileSync(join(home, 'packages', 'app-server-daemon', 'selection-history'), 'utf8')).toContain('0.171.0');
    expect(await adapter.waitForTurn(t, req.requestId, { onRunning: async () => undefined }, signal())).toMatchObject({
      status: 'returned',
    });
  }, 300_000);

  it('made no connection beyond loopback', () => {
    expect(fx.tripwire.attempts).toEqual([]);
    expect(fx.fake.refusedConnections).toBe(0);
  });
});
