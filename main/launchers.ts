import type { Launchers } from '../services/cli/launchers.ts';
import { UsageError } from '../services/cli/usage-error.ts';

/**
 * The composition root of the `baton` command: the one module that imports several services.
 * services/cli declares what its process commands start in another service (launchers.ts there);
 * these start it, each importing its service only when called, so `baton --help` and the client
 * commands load none of them.
 */
export const LAUNCHERS: Launchers = {
  // `serve`, `api`, `demo`: the HTTP API on the stack's connections.
  async startApi(parts) {
    const { startConfiguredApi } = await import('../services/api/server.ts');
    return startConfiguredApi(parts);
  },

  // `baton bench`: an unknown `--only` scenario or a bad `--workers` is a usage error, found before anything starts.
  async bench(config, { only, workers, html, ...request }, write) {
    const { runBench, renderReport, renderHtmlReport, parseScenarios, parseWorkerCounts } = await import('../services/bench/run-bench.ts');
    let scenarios: ReturnType<typeof parseScenarios> | undefined;
    let counts: number[] | undefined;
    try {
      scenarios = only !== undefined ? parseScenarios(only) : undefined;
      counts = workers !== undefined ? parseWorkerCounts(workers) : undefined;
    } catch (err) {
      throw new UsageError((err as Error).message);
    }
    if (counts && scenarios && !scenarios.includes('capacity'))
      throw new UsageError('--workers sets the capacity runs: add capacity to --only');
    const result = await runBench(
      config,
      { ...request, ...(scenarios ? { only: scenarios } : {}), ...(counts ? { workers: counts } : {}) },
      write,
    );
    return { result, report: renderReport(result), ...(html ? { html: renderHtmlReport(result) } : {}) };
  },

  // `baton chaos`: the sizes not given take the defaults of the run's length (full or --short).
  async chaos({ short, sizes, ...rest }, log, signal) {
    const { chaosDefaults, runChaos, renderChaosReport } = await import('../services/chaos/run-chaos.ts');
    const result = await runChaos({ ...chaosDefaults(short), ...sizes, ...rest }, log, signal);
    return { ok: result.ok, result, report: renderChaosReport(result) };
  },
};
