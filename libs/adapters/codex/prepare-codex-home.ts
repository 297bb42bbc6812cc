import type { PrepareResult } from '../provider-adapter.ts';
import type { AppServerPool } from './app-server-pool.ts';
import { codexEnvOf, CODEX_DEFAULTS, type CodexSettings } from './codex-settings.ts';
import { ensureDaemonPackage, hasDaemonPackage } from './daemon-package.ts';

/**
 * Readies Codex homes ahead of their first turn, for one adapter. A fresh home's first daemon
 * start copies the Codex package into it (hundreds of MB, tens of seconds) unless the home's daemon package
 * names one (daemon-package.ts); Baton links the package of the agent's installed `binary` there
 * instead, which takes milliseconds, and starts the daemon. Where no installed package can be
 * found, the copy happens, but never inside a write's deadline: `beforeWrite` then starts the
 * preparation in the background and tells the write to wait (busy) until it is done.
 */
export class CodexHomePreparation {
  /** Preparations running in the background, by Codex home. */
  private readonly running = new Map<string, Promise<PrepareResult>>();

  constructor(
    private readonly pool: AppServerPool,
    private readonly baseEnv: Readonly<Record<string, string>>,
  ) {}

  /** Links the installed package if the home has none, and starts the home's daemon (with the agent's `env` if it starts it). */
  prepare(s: CodexSettings, codexHome: string): Promise<PrepareResult> {
    const existing = this.running.get(codexHome);
    if (existing) return existing;
    const run = this.run(s, codexHome).finally(() => this.running.delete(codexHome));
    this.running.set(codexHome, run);
    return run;
  }

  /**
   * Before a write: null when the home's daemon can start without a copy (its package is selected
   * or has just been linked), else why the write must wait; the preparation then runs in the
   * background and a later write finds the home ready.
   */
  async beforeWrite(s: CodexSettings, codexHome: string): Promise<string | null> {
    if (await hasDaemonPackage(codexHome)) return null;
    if (this.running.has(codexHome))
      return `the Codex home ${codexHome} is being prepared (its daemon's first start copies the Codex package)`;
    const binary = s.binary ?? CODEX_DEFAULTS.binary;
    const linked = await ensureDaemonPackage(codexHome, binary, codexEnvOf(s)['PATH'] ?? this.baseEnv['PATH']);
    if (linked.state !== 'unresolved') return null;
    // A failed preparation leaves the home unprepared: the next write starts it again and meets the error.
    void this.prepare(s, codexHome).catch(() => undefined);
    return `the Codex home ${codexHome} is being prepared: ${linked.reason}, so its daemon's first start copies the Codex package (about 424 MB)`;
  }

  private async run(s: CodexSettings, codexHome: string): Promise<PrepareResult> {
    const binary = s.binary ?? CODEX_DEFAULTS.binary;
    const env = codexEnvOf(s);
    const pkg = await ensureDaemonPackage(codexHome, binary, env['PATH'] ?? this.baseEnv['PATH']);
    const started = Date.now();
    const client = await this.pool.get({ binary, codexHome, env, needsEnv: false });
    const daemon = client.daemon;
    const how =
      pkg.state === 'linked'
        ? `linked the installed Codex ${pkg.version} package (${pkg.dir})`
        : pkg.state === 'selected'
          ? 'its Codex package was selected already'
          : `copied the Codex package (${pkg.reason})`;
    return {
      ready: true,
      detail: `the app-server daemon of ${codexHome} ${daemon?.status === 'started' ? 'started' : 'runs'}${daemon?.pid ? ` (pid ${daemon.pid})` : ''} in ${Date.now() - started} ms; ${how}`,
    };
  }
}
