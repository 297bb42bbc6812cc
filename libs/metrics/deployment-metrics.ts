import { Counter, Gauge, Histogram } from 'prom-client';
import type { MetricsRepository, TurnEndRow } from '../db/metrics-repository.ts';
import type { Logger } from '../logging/create-logger.ts';
import { DELIVERY_BUCKETS, type BatonMetrics } from './baton-metrics.ts';
import { poolName } from '../domain/ids.ts';
import { DEPLOYMENT_METRICS_DEFAULTS } from '../config/component-defaults.ts';

export interface DeploymentSources {
  readonly repo: MetricsRepository;
  readonly queues: { jobCounts(provider: string, pool: string): Promise<{ waiting: number; delayed: number; active: number }> };
  readonly locks: { held(agentIds: readonly string[]): Promise<boolean[]> };
  readonly logger: Logger;
}

/**
 * What the whole deployment is doing, read at scrape time (nothing is computed between scrapes):
 * - transitions and send→accepted / send→returned times come from the event log in Postgres,
 *   which every process appends to: each scrape reads the rows after the last one it read
 *   (by primary key), starting from the newest row when the process started. So every process
 *   that serves /metrics counts every transition of the deployment since it started, whoever
 *   applied it (the API, any worker, the reconciler), and libs/handoffs stays free of metrics;
 * - queue depth from BullMQ (the delivery queues of every provider and pool that has agents);
 * - turns in flight from Postgres, and turn-lock holders from Redis.
 * Event ids are taken in insert order, not commit order: a row whose transaction commits after
 * a later id was already read is not counted (rare, and only an undercount).
 * Call (and await) once before the first transition that should be counted.
 */
export async function installDeploymentMetrics(metrics: BatonMetrics, sources: DeploymentSources): Promise<void> {
  const { repo } = sources;
  const { registry } = metrics;
  // Postgres down at start: counting begins at the first scrape that reaches it.
  let cursor: bigint | null = await repo.lastEventId().catch((err: unknown) => {
    sources.logger.warn({ err }, 'metrics: could not read the event log yet');
    return null;
  });
  let reading: Promise<void> | null = null;
  /** Reads the log since the cursor; the collects of one scrape share one read. */
  const catchUp = (): Promise<void> =>
    (reading ??= (async () => {
      cursor ??= await repo.lastEventId();
      const { transitionsPage, transitionsPerScrape } = DEPLOYMENT_METRICS_DEFAULTS;
      let read = 0;
      while (read < transitionsPerScrape) {
        const rows = await repo.transitionsAfter(cursor, transitionsPage);
        for (const r of rows) {
          const provider = r.provider ?? 'none';
          transitions.inc({ kind: r.kind, state: r.state, provider, pool: poolName(r.pool) });
          if (r.kind === 'delivery' && r.state === 'ACCEPTED') toAccepted.observe({ provider }, r.sinceSendMs / 1000);
          if (r.kind === 'delivery' && r.state === 'RETURNED') toReturned.observe({ provider }, r.sinceSendMs / 1000);
          if (r.turn) countTurn(provider, r.turn);
          cursor = r.id;
        }
        read += rows.length;
        if (rows.length < transitionsPage) break;
      }
    })().finally(() => {
      reading = null;
    }));

  const transitions = new Counter({
    name: 'baton_transitions_total',
    help:
      'Transitions recorded in the event log since this process started, by kind (delivery or work), the ' +
      'state reached, and the recipient provider and pool.',
    labelNames: ['kind', 'state', 'provider', 'pool'] as const,
    registers: [registry],
    collect: catchUp,
  });
  const toAccepted = new Histogram({
    name: 'baton_send_to_accepted_seconds',
    help: 'Seconds from a send to each acceptance of its turn by the recipient session, by provider.',
    labelNames: ['provider'] as const,
    buckets: DELIVERY_BUCKETS,
    registers: [registry],
    collect: catchUp,
  });
  const toReturned = new Histogram({
    name: 'baton_send_to_returned_seconds',
    help: 'Seconds from a send to its return (RETURNED), by provider.',
    labelNames: ['provider'] as const,
    buckets: DELIVERY_BUCKETS,
    registers: [registry],
    collect: catchUp,
  });

  // Turn accounting: each turn that ran and ended, by provider, recipient and model.
  const usageLabels = ['provider', 'agent', 'model'] as const;
  const turns = new Counter({
    name: 'baton_turns_total',
    help: 'Turns that ran and ended (returned, failed, interrupted) since this process started, by provider, recipient agent and model.',
    labelNames: usageLabels,
    registers: [registry],
    collect: catchUp,
  });
  const turnSeconds = new Counter({
    name: 'baton_turn_seconds_total',
    help: 'Wall time of those turns (accepted to ended), by provider, recipient agent and model.',
    labelNames: usageLabels,
    registers: [registry],
    collect: catchUp,
  });
  const tokens = new Counter({
    name: 'baton_turn_tokens_total',
    help: "Tokens those turns' runtimes reported, by provider, recipient agent, model and kind (input, output, cache_read, cache_write).",
    labelNames: [...usageLabels, 'kind'] as const,
    registers: [registry],
    collect: catchUp,
  });
  const cost = new Counter({
    name: 'baton_turn_cost_usd_total',
    help: "Cost in US dollars those turns' runtimes reported (Claude Code does; Codex does not), by provider, recipient agent and model.",
    labelNames: usageLabels,
    registers: [registry],
    collect: catchUp,
  });
  const countTurn = (provider: string, t: TurnEndRow) => {
    const labels = { provider, agent: t.agent, model: t.model ?? 'unknown' };
    turns.inc(labels);
    if (t.turnMs !== null) turnSeconds.inc(labels, t.turnMs / 1000);
    const kinds = [
      ['input', t.inputTokens],
      ['output', t.outputTokens],
      ['cache_read', t.cacheReadTokens],
      ['cache_write', t.cacheWriteTokens],
    ] as const;
    for (const [kind, n] of kinds) tokens.inc({ ...labels, kind }, n);
    cost.inc(labels, t.costUsd);
  };

  installWorkGauges(metrics, sources);
}

/** Which providers and pools a process reports work gauges for; all of them when absent. */
export interface WorkScope {
  readonly providers: ReadonlySet<string>;
  /** Pool names as configured ('' is the default pool). */
  readonly pools: ReadonlySet<string>;
}

/**
 * The work gauges alone (queue depth, turns in flight, turn locks held), read at scrape time.
 * The API reports every provider and pool; a worker reports those it serves on its own
 * `/metrics` (`BATON_METRICS_PORT`), so an autoscaler (the KEDA ScaledObjects in
 * deploy/kubernetes) can scrape the workers themselves.
 */
export function installWorkGauges(metrics: BatonMetrics, sources: DeploymentSources, scope?: WorkScope): void {
  const { repo } = sources;
  const { registry } = metrics;
  const inScope = (p: { provider: string; pool: string | null }): boolean =>
    !scope || (scope.providers.has(p.provider) && scope.pools.has(p.pool ?? ''));
  new Gauge({
    name: 'baton_queue_jobs',
    help: 'Dispatch jobs in the delivery queues (BullMQ, summed over shards), by provider, pool and job state (waiting, delayed, active).',
    labelNames: ['provider', 'pool', 'state'] as const,
    registers: [registry],
    async collect() {
      this.reset();
      const pools = (await repo.providerPools()).filter(inScope);
      const counts = await Promise.all(pools.map(async (p) => ({ ...p, counts: await sources.queues.jobCounts(p.provider, p.pool) })));
      for (const { provider, pool, counts: c } of counts) {
        for (const state of ['waiting', 'delayed', 'active'] as const) this.set({ provider, pool: poolName(pool), state }, c[state]);
      }
    },
  });
  new Gauge({
    name: 'baton_turns_in_flight',
    help: 'Handoffs whose turn is live in the recipient session (SENDING, ACCEPTED, RUNNING), by provider and pool.',
    labelNames: ['provider', 'pool'] as const,
    registers: [registry],
    async collect() {
      this.reset();
      for (const r of (await repo.turnsInFlight()).filter(inScope)) this.set({ provider: r.provider, pool: poolName(r.pool) }, r.count);
    },
  });
  new Gauge({
    name: 'baton_turn_locks_held',
    help:
      'Agents whose per-agent turn lock is held right now (a worker is running or starting their turn), by ' +
      'provider and pool; agents with open handoffs are checked.',
    labelNames: ['provider', 'pool'] as const,
    registers: [registry],
    async collect() {
      this.reset();
      const agents = (await repo.agentsWithOpenWork(DEPLOYMENT_METRICS_DEFAULTS.lockAgentsMax)).filter(inScope);
      const held = await sources.locks.held(agents.map((a) => a.agentId));
      agents.forEach((a, i) => {
        if (held[i]) this.inc({ provider: a.provider, pool: poolName(a.pool) });
      });
    },
  });
}
