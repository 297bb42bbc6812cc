import { collectDefaultMetrics, Counter, Histogram, Registry } from 'prom-client';
import type { ReconcileReport } from '../handoffs/reconcile-once.ts';
import type { SubscriptionCounters } from '../handoffs/subscription-dispatcher.ts';

/** Seconds from a send to its acceptance or return: a demo turn takes well under a second, a real agent's minutes. */
const DELIVERY_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 1800, 3600];
const HTTP_BUCKETS = [0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];

/**
 * One process's Prometheus registry (prom-client): process metrics, and the metrics this
 * process itself produces (HTTP requests it answered, reconciler passes it ran). What the
 * deployment as a whole is doing (transitions, queues, turns, locks) is added by
 * installDeploymentMetrics (deployment-metrics.ts) where Postgres and Redis are at hand.
 * prom-client stays in libs/metrics: no other lib imports it.
 */
export interface BatonMetrics {
  readonly registry: Registry;
  /** Counts a request the API answered, by route pattern (never the raw URL: ids would explode the series). */
  observeRequest(method: string, route: string | undefined, status: number, seconds: number): void;
  /** Counts what one reconciler pass did, by action. */
  reconcilerPass(report: ReconcileReport): void;
  /** What this process's subscription dispatcher did: events delivered, retries scheduled, dead letters, pauses. */
  readonly subscriptions: SubscriptionCounters;
}

export function createBatonMetrics(): BatonMetrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const http = new Histogram({
    name: 'baton_http_request_duration_seconds',
    help: 'Time the API took to answer, by method, route pattern and status code.',
    labelNames: ['method', 'route', 'status_code'] as const,
    buckets: HTTP_BUCKETS,
    registers: [registry],
  });
  const reconciler = new Counter({
    name: 'baton_reconciler_actions_total',
    help: 'What the reconciler passes of this process did: holds lifted, reminders sent, UNCERTAIN scans, claims expired, agents re-queued.',
    labelNames: ['action'] as const,
    registers: [registry],
  });
  const passes = new Counter({
    name: 'baton_reconciler_passes_total',
    help: 'Reconciler passes this process ran (as the leader).',
    registers: [registry],
  });
  const subscriptionOutcomes = new Counter({
    name: 'baton_subscription_deliveries_total',
    help: 'Event subscription outcomes in this process: delivered (a 2xx), retried (a failed attempt to be tried again), dead_lettered, paused.',
    labelNames: ['outcome'] as const,
    registers: [registry],
  });
  for (const outcome of ['delivered', 'retried', 'dead_lettered', 'paused']) subscriptionOutcomes.inc({ outcome }, 0);
  return {
    registry,
    subscriptions: {
      delivered: () => subscriptionOutcomes.inc({ outcome: 'delivered' }),
      retried: () => subscriptionOutcomes.inc({ outcome: 'retried' }),
      deadLettered: () => subscriptionOutcomes.inc({ outcome: 'dead_lettered' }),
      paused: () => subscriptionOutcomes.inc({ outcome: 'paused' }),
    },
    observeRequest(method, route, status, seconds) {
      http.observe({ method, route: route ?? 'unmatched', status_code: String(status) }, seconds);
    },
    reconcilerPass(report) {
      passes.inc();
      reconciler.inc({ action: 'hold_lifted' }, report.liftedHolds);
      reconciler.inc({ action: 'reminder_sent' }, report.reminders);
      reconciler.inc({ action: 'uncertain_scanned' }, report.uncertain);
      reconciler.inc({ action: 'claim_expired' }, report.expiredClaims);
      reconciler.inc({ action: 'agent_requeued' }, report.queuedAgents);
    },
  };
}

export { DELIVERY_BUCKETS };
