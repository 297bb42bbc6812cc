import type pg from 'pg';
import type { JsonClient, LoadResult } from '../http-load.ts';
import { runLoad } from '../http-load.ts';
import { percentile, round } from '../measure.ts';
import { latencyHistogram, perSecondCounts, type DeliverySeries } from '../plot-data.ts';
import { BENCH_SQL } from '../usage.ts';
import { stateList } from '../../../libs/db/handoff-sql/columns.ts';
import { DISPATCHABLE_STATES, LIVE_TURN_STATES } from '../../../libs/domain/delivery-states.ts';

/** Registers agents through the API (32 at a time). */
export async function registerAgents(
  client: JsonClient,
  project: string,
  handles: readonly string[],
  settings: Record<string, unknown> = {},
): Promise<void> {
  const result = await runLoad(handles.length, 32, (i) =>
    client.request('POST', '/v1/agents', { id: handles[i], provider: 'demo', settings }, { 'x-baton-project': project }),
  );
  if (result.errors > 0) throw new Error(`registering agents failed: ${JSON.stringify(result.statuses)}`);
}

/** Sends `count` handoffs through the API with `concurrency` clients; `body(i)` makes each one. */
export function sendMany(
  client: JsonClient,
  project: string,
  count: number,
  concurrency: number,
  body: (i: number) => Record<string, unknown>,
  onProgress?: (done: number) => void,
): Promise<LoadResult> {
  return runLoad(count, concurrency, (i) => client.request('POST', '/v1/handoffs', body(i), { 'x-baton-project': project }), onProgress);
}

async function projectId(pool: pg.Pool, slug: string): Promise<string> {
  const { rows } = await pool.query<{ id: string }>(`${BENCH_SQL} SELECT id FROM projects WHERE slug = $1`, [slug]);
  if (!rows[0]) throw new Error(`no project ${slug}`);
  return rows[0].id;
}

/**
 * Whether any handoff of any project is still open work (the worker's partial index of it, so
 * the probe costs Postgres next to nothing however many handoffs have settled).
 */
const ANY_OPEN_SQL = `${BENCH_SQL} SELECT EXISTS (SELECT 1 FROM handoffs WHERE delivery_state IN (${stateList([...LIVE_TURN_STATES, ...DISPATCHABLE_STATES])})
  AND recipient_id IS NOT NULL AND provider <> 'manual') AS open`;

async function countSettled(pool: pg.Pool, projectId: string): Promise<{ settled: number; total: number }> {
  const { rows } = await pool.query<{ settled: number; total: number }>(
    `${BENCH_SQL} SELECT count(*) FILTER (WHERE settled_at IS NOT NULL)::int AS settled, count(*)::int AS total FROM handoffs WHERE project_id = $1`,
    [projectId],
  );
  return rows[0]!;
}

/** Polls between two counts of the project's settled handoffs while open work remains (2 s). */
const COUNT_EVERY = 8;

/**
 * Waits (bounded) until every handoff of the project is settled; returns seconds waited.
 * Every 250 ms it asks whether any open work remains, which is cheap; it counts the project's
 * handoffs (a scan of all of them, tens of ms at 10,000) only when none does, or every 2 s
 * (the progress line, and a project whose handoffs are held or UNCERTAIN, which that probe
 * does not see). The bench's polling is the load generator's CPU, and counts in the total.
 */
export async function waitSettled(
  pool: pg.Pool,
  project: string,
  expected: number,
  timeoutMs: number,
  onProgress?: (settled: number) => void,
): Promise<number> {
  const id = await projectId(pool, project);
  const started = performance.now();
  for (let poll = 0; ; poll++) {
    const open = poll % COUNT_EVERY !== 0 && (await pool.query<{ open: boolean }>(ANY_OPEN_SQL)).rows[0]!.open;
    if (!open) {
      const r = await countSettled(pool, id);
      onProgress?.(r.settled);
      if (r.total >= expected && r.settled >= r.total) return (performance.now() - started) / 1000;
    }
    if (performance.now() - started > timeoutMs) {
      const r = await countSettled(pool, id);
      throw new Error(`only ${r.settled} of ${r.total} handoffs settled after ${timeoutMs} ms`);
    }
    // Rates and latencies come from the rows' own times (deliveryMetrics), so polling every
    // 250 ms loses no precision.
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

export interface DeliveryMetrics {
  handoffs: number;
  returned: number;
  acceptedPerSec: number;
  returnedPerSec: number;
  acceptedP50Ms: number;
  acceptedP99Ms: number;
  returnedP50Ms: number;
  returnedP99Ms: number;
  dispatchP50Ms: number;
  dispatchP99Ms: number;
  /**
   * The same handoffs' latency distributions and rates over time, for the HTML report's plots
   * (absent in results of older bench versions).
   */
  series?: DeliverySeries;
}

/**
 * Delivery figures from Postgres (the truth): per handoff, commit -> attempt reserved (the
 * adapter is called right after), -> accepted, -> returned; throughput over the whole run.
 * `afterSeq`: only the project's handoffs sent after the one with this seq (a warm-up before).
 */
export async function deliveryMetrics(pool: pg.Pool, project: string, afterSeq = '0'): Promise<DeliveryMetrics> {
  const id = await projectId(pool, project);
  const { rows } = await pool.query<{ created: Date; started: Date | null; accepted: Date | null; finished: Date | null; state: string }>(
    `SELECT h.created_at AS created, a.started_at AS started, a.accepted_at AS accepted, a.finished_at AS finished, h.delivery_state AS state
     FROM handoffs h LEFT JOIN delivery_attempts a ON a.handoff_id = h.id AND a.number = 1
     WHERE h.project_id = $1 AND h.seq > $2::bigint`,
    [id, afterSeq],
  );
  const ms = (a: Date | null, b: Date) => (a ? a.getTime() - b.getTime() : NaN);
  const first = Math.min(...rows.map((r) => r.created.getTime()));
  const lastAccepted = Math.max(...rows.map((r) => r.accepted?.getTime() ?? 0));
  const lastFinished = Math.max(...rows.map((r) => r.finished?.getTime() ?? 0));
  const accepted = rows.map((r) => ms(r.accepted, r.created)).filter(Number.isFinite);
  const returned = rows.map((r) => ms(r.finished, r.created)).filter(Number.isFinite);
  const dispatch = rows.map((r) => ms(r.started, r.created)).filter(Number.isFinite);
  return {
    handoffs: rows.length,
    returned: rows.filter((r) => r.state === 'RETURNED').length,
    acceptedPerSec: round(rows.length / Math.max(0.001, (lastAccepted - first) / 1000), 0),
    returnedPerSec: round(rows.length / Math.max(0.001, (lastFinished - first) / 1000), 0),
    acceptedP50Ms: percentile(accepted, 50),
    acceptedP99Ms: percentile(accepted, 99),
    returnedP50Ms: percentile(returned, 50),
    returnedP99Ms: percentile(returned, 99),
    dispatchP50Ms: percentile(dispatch, 50),
    dispatchP99Ms: percentile(dispatch, 99),
    series: {
      latency: { dispatch: latencyHistogram(dispatch), accepted: latencyHistogram(accepted), returned: latencyHistogram(returned) },
      perSecond: {
        sent: perSecondCounts(
          rows.map((r) => r.created.getTime()),
          first,
        ),
        returned: perSecondCounts(
          rows.map((r) => r.finished?.getTime() ?? NaN),
          first,
        ),
      },
    },
  };
}
