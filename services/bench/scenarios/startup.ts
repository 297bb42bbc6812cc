import type { BenchEnvironment } from '../bench-environment.ts';
import { percentile, round } from '../measure.ts';

/** Starts of one process kind: spawn -> ready (its ready line), and the CPU it spent until then. */
export interface StartTimes {
  starts: number;
  readyP50Sec: number;
  readyMaxSec: number;
  /** CPU of the process from spawn to ready (median), ms: what the start costs, whatever the host's load. */
  cpuP50Ms: number | null;
}

export interface StartupResult {
  api: StartTimes;
  worker: StartTimes;
}

/**
 * Time to ready: the API and a worker, each started `starts` times on its own (nothing else of
 * Baton running but the demo host) and timed from spawn to the line the bench waits for
 * ("Baton API on", "delivery worker started"). One start of each comes first, unmeasured: the
 * first API start of a run writes the admin token, and the first reads of the files warm the
 * page cache, as every start of an installed Baton finds it.
 */
export async function measureStartup(env: BenchEnvironment, starts: number, tick: (label: string) => void): Promise<StartupResult> {
  await env.releaseProcesses(true);
  const times = async (role: 'api' | 'worker'): Promise<StartTimes> => {
    await env.timeStart(role);
    const runs: Array<{ readyMs: number; cpuMs: number | null }> = [];
    for (let i = 0; i < starts; i++) runs.push(await env.timeStart(role));
    const cpu = runs.map((r) => r.cpuMs);
    return {
      starts,
      readyP50Sec: round(
        percentile(
          runs.map((r) => r.readyMs),
          50,
        ) / 1000,
        3,
      ),
      readyMaxSec: round(Math.max(...runs.map((r) => r.readyMs)) / 1000, 3),
      cpuP50Ms: cpu.some((c) => c === null) ? null : round(percentile(cpu as number[], 50), 0),
    };
  };
  const api = await times('api');
  tick('API starts timed');
  const worker = await times('worker');
  tick('worker starts timed');
  return { api, worker };
}
