import { Pool } from 'undici';
import { percentile, round } from './measure.ts';
import { latencyHistogram, type LatencyHistogram } from './plot-data.ts';

export interface LoadResult {
  requests: number;
  errors: number;
  seconds: number;
  perSecond: number;
  p50Ms: number;
  p99Ms: number;
  statuses: Record<string, number>;
  /** Every request's latency, counted per bucket (the HTML report's plot; absent in older results). */
  latency?: LatencyHistogram;
}

/**
 * A keep-alive JSON client for one base URL, sized for `concurrency` connections: an undici
 * pool, which costs the load generator half the CPU per request of node:http's request (the
 * load generator shares the machine's cores with Baton and counts in its CPU rows).
 */
export class JsonClient {
  private readonly pool: Pool;
  constructor(
    baseUrl: string,
    concurrency: number,
    private readonly headers: Record<string, string> = {},
  ) {
    this.pool = new Pool(new URL(baseUrl).origin, { connections: concurrency, pipelining: 1 });
  }

  async request(
    method: string,
    path: string,
    body?: unknown,
    headers: Record<string, string> = {},
  ): Promise<{ status: number; body: any }> {
    const payload = body === undefined ? null : JSON.stringify(body);
    const res = await this.pool.request({
      path,
      method: method,
      headers: { ...this.headers, ...headers, ...(payload === null ? {} : { 'content-type': 'application/json' }) },
      body: payload,
    });
    const text = await res.body.text();
    return { status: res.statusCode, body: text ? JSON.parse(text) : null };
  }

  close(): void {
    // Closing: a pool that fails to close has no request left to answer.
    void this.pool.destroy().catch(() => undefined);
  }
}

/**
 * Runs `count` calls of `make(i)` with `concurrency` in flight, timing each; `onProgress` is
 * called every 1,000 requests.
 */
export async function runLoad(
  count: number,
  concurrency: number,
  call: (i: number) => Promise<{ status: number }>,
  onProgress?: (done: number) => void,
): Promise<LoadResult> {
  const latencies: number[] = [];
  const statuses: Record<string, number> = {};
  let next = 0;
  let errors = 0;
  const started = performance.now();
  const workers = Array.from({ length: Math.min(concurrency, count) }, async () => {
    for (;;) {
      const i = next++;
      if (i >= count) return;
      const t0 = performance.now();
      try {
        const { status } = await call(i);
        statuses[status] = (statuses[status] ?? 0) + 1;
        if (status >= 300) errors++;
      } catch {
        errors++;
        statuses['error'] = (statuses['error'] ?? 0) + 1;
      }
      latencies.push(performance.now() - t0);
      if (onProgress && (i + 1) % 1000 === 0) onProgress(i + 1);
    }
  });
  await Promise.all(workers);
  const seconds = (performance.now() - started) / 1000;
  return {
    requests: count,
    errors,
    seconds: round(seconds, 2),
    perSecond: round(count / seconds, 0),
    p50Ms: round(percentile(latencies, 50), 2),
    p99Ms: round(percentile(latencies, 99), 2),
    statuses,
    latency: latencyHistogram(latencies),
  };
}
