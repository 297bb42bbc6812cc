/*
 * The capacity model of docs/CAPACITY.md, as pure functions of what the benchmark measures per
 * handoff and per live turn. `predictOnHost` says what one host carries with N worker
 * processes (the bench's `--workers` runs hold it against a measurement); `fleetCapacity` says
 * what a managed Postgres primary and a Redis cluster carry, and which resource runs out first.
 * No I/O: the inputs are measurements, the outputs predictions.
 */

/** A prediction with its band: `mid` the model's figure, `low`..`high` what a run may measure. */
export interface Band {
  low: number;
  mid: number;
  high: number;
}

/** CPU ms per handoff by process kind, as the bench measures it (usage.ts). */
export interface CpuPerHandoff {
  api: number;
  /** All worker processes together. */
  workers: number;
  postgres: number;
  redis: number;
  /** The simulated agents (the bench's demo host): the agents' side, not Baton's. */
  demoHost: number;
  /** The bench's HTTP clients and polling: the senders' side, not Baton's. */
  loadGenerator: number;
}

/** What one handoff cost in a measured run. */
export interface HandoffCosts {
  cpuMs: CpuPerHandoff;
  postgresStatements: number | null;
  postgresWalBytes: number | null;
  redisCommands: number | null;
}

/**
 * Share of the host's cores a CPU-bound run keeps busy: the full run of 2026-12-01 18:11 kept
 * 89% (10 agents: 887/s x 2.0 ms on 2 cores) to 95% (10,000 agents: 1,197/s x 1.59 ms) busy.
 */
export const HOST_UTILIZATION = 0.9;

/**
 * Half the band's width, as a share of the prediction: runs of the same code on these shared
 * hosts drift by 20-30% (docs/PERFORMANCE.md, "Judging a change on a shared machine").
 */
export const BAND = 0.25;

/** What limits throughput on one host: a process kind (one JavaScript thread each) or the host's cores. */
export type HostLimit = 'host cores' | 'worker processes' | 'API process' | 'Redis (one thread)' | 'load generator' | 'demo host';

export interface HostRun {
  /** Cores of the host. */
  cores: number;
  /**
   * Cores other work on the host kept busy meanwhile (a shared machine), measured: the host's
   * CPU (/proc/stat) minus the run's own processes'. 0 on a host of its own.
   */
  otherCores: number;
  workers: number;
  apiProcesses: number;
}

export interface HostPrediction {
  handoffsPerSec: Band;
  limitedBy: HostLimit;
  /** Every bound, handoffs/s, highest first is not implied: in the order of HostLimit. */
  bounds: Array<{ limit: HostLimit; handoffsPerSec: number }>;
  /** Postgres at that rate: cores busy, statements/s, WAL bytes/s (null: not measured). */
  postgres: { cores: Band; statementsPerSec: Band | null; walBytesPerSec: Band | null };
  redis: { commandsPerSec: Band | null; cores: Band };
}

const band = (mid: number): Band => ({ low: mid * (1 - BAND), mid, high: mid * (1 + BAND) });
const scale = (b: Band, k: number): Band => ({ low: b.low * k, mid: b.mid * k, high: b.high * k });
const perCore = (msPerHandoff: number, cores: number) => (msPerHandoff > 0 ? (cores * 1000) / msPerHandoff : Infinity);

/** How far a measurement lies from a band's middle, as a share of it (0.1: 10% off). */
export const offMid = (value: number, b: Band): number => (b.mid > 0 ? Math.abs(value / b.mid - 1) : Infinity);

/** Whether `value` lies inside the band (its bounds included). */
export const withinBand = (value: number, b: Band): boolean => value >= b.low && value <= b.high;

/**
 * What one host carries with `run.workers` worker processes, from per-handoff costs measured in
 * another run (the bench calibrates with its first `--workers` count). Every process shares the
 * host's cores, so the rate is the lowest of: the cores left by other work, at HOST_UTILIZATION,
 * over every process's CPU per handoff; and, for each process kind with one JavaScript thread
 * per process (the API, the workers together, Redis, the load generator, the demo host), its
 * processes' cores over its CPU per handoff. The assumption a run tests: the per-handoff costs
 * do not change with the number of workers. On a 2-core host more workers than cores add no
 * capacity once the cores are full; the model says so rather than scaling by N.
 */
export function predictOnHost(costs: HandoffCosts, run: HostRun): HostPrediction {
  const c = costs.cpuMs;
  const total = c.api + c.workers + c.postgres + c.redis + c.demoHost + c.loadGenerator;
  const free = Math.max(0.1, run.cores - run.otherCores);
  // A process's one thread cannot use more than one core, nor more than the host's free cores.
  const threads = (n: number) => Math.min(n, free);
  const bounds: HostPrediction['bounds'] = [
    { limit: 'host cores', handoffsPerSec: perCore(total, free * HOST_UTILIZATION) },
    { limit: 'worker processes', handoffsPerSec: perCore(c.workers, threads(run.workers)) },
    { limit: 'API process', handoffsPerSec: perCore(c.api, threads(run.apiProcesses)) },
    { limit: 'Redis (one thread)', handoffsPerSec: perCore(c.redis, threads(1)) },
    { limit: 'load generator', handoffsPerSec: perCore(c.loadGenerator, threads(1)) },
    { limit: 'demo host', handoffsPerSec: perCore(c.demoHost, threads(1)) },
  ];
  const lowest = bounds.reduce((a, b) => (b.handoffsPerSec < a.handoffsPerSec ? b : a));
  const rate = band(lowest.handoffsPerSec);
  return {
    handoffsPerSec: rate,
    limitedBy: lowest.limit,
    bounds,
    postgres: {
      cores: scale(rate, c.postgres / 1000),
      statementsPerSec: costs.postgresStatements === null ? null : scale(rate, costs.postgresStatements),
      walBytesPerSec: costs.postgresWalBytes === null ? null : scale(rate, costs.postgresWalBytes),
    },
    redis: { commandsPerSec: costs.redisCommands === null ? null : scale(rate, costs.redisCommands), cores: scale(rate, c.redis / 1000) },
  };
}

/**
 * How Baton's Redis work per handoff spreads over a cluster, by hash tag (libs/queue/redis-names.ts),
 * from the command counts of docs/PERFORMANCE.md ("Where a handoff's time goes", 12.2 commands per
 * handoff at 10,000 agents): an agent's turn lock, fence and pending wake-up share the agent's tag
 * (10.9 of 12.2: spread over every primary); a delivery queue's keys share the queue's tag (wake-up
 * sets, BullMQ's lists: ~1.1, spread over at most as many primaries as there are queues); the
 * event stream is one key (XADD 0.19: one primary).
 */
export const REDIS_SPREAD = { perAgent: 0.89, perQueue: 0.095, oneKey: 0.015 } as const;

/** What a live long turn costs per second while it waits, as the long-turn scenario measures it. */
export interface LiveTurnCosts {
  redisCommandsPerSec: number;
  postgresStatementsPerSec: number;
  workerCpuMsPerSec: number;
  workerRssKiB: number;
}

/** A deployment to size: its servers and its processes' settings. */
export interface FleetSpec {
  postgres: {
    vcpus: number;
    /** Share of the primary's cores to plan for (headroom for vacuum, spikes, failover). */
    utilization: number;
    /** max_connections less the connections reserved for others (superuser, replication, tools). */
    connections: number;
    /** WAL the primary's disk and its replicas keep up with, bytes/s (null: not a limit to check). */
    walBytesPerSec: number | null;
  };
  redis: {
    primaries: number;
    /** Share of a primary's one command thread to plan for. */
    utilization: number;
    /** Memory per primary for Baton, bytes. */
    memoryBytes: number;
  };
  /** Delivery queues of the deployment: providers x worker pools x BATON_QUEUE_SHARDS. */
  deliveryQueues: number;
  /** BATON_DB_POOL_SIZE of each process. */
  dbPoolSize: number;
  /** Share of one core each API or worker process is run at (its one JavaScript thread). */
  processUtilization: number;
  /** BATON_WORKER_CONCURRENCY x BATON_QUEUE_SHARDS x providers x pools: turns one worker can follow at once. */
  turnSlotsPerWorker: number;
  /** Memory a worker may use for the turns it follows, bytes. */
  workerMemoryForTurnsBytes: number;
}

/** Measured costs the fleet model reads: Baton's own per handoff, Redis's per command and memory, per live turn. */
export interface FleetCosts {
  handoff: HandoffCosts;
  /** Redis CPU per command, ms (its CPU per handoff over its commands per handoff in the same run). */
  redisMsPerCommand: number;
  /** Postgres CPU per statement a live turn sends (a watcher's re-read by primary key), ms. */
  postgresMsPerTurnStatement: number;
  /** Redis memory an agent keeps once it has had a turn (its fence counter), bytes. */
  redisBytesPerAgent: number;
  /** Redis memory per handoff waiting for delivery, bytes. */
  redisBytesPerQueuedHandoff: number;
  liveTurn: LiveTurnCosts;
}

/** Share of Redis memory planned for agents' fence counters; the rest for queued handoffs, jobs and the event stream. */
export const AGENT_MEMORY_SHARE = 0.5;

export type FleetLimit = 'Postgres CPU' | 'Postgres WAL' | 'Postgres connections' | 'Redis CPU (busiest primary)';

export interface FleetCapacity {
  /** Handoffs/s with no live long turns, by what would stop them; the lowest decides. */
  handoffsPerSec: { value: number; limitedBy: FleetLimit; bounds: Array<{ limit: FleetLimit; handoffsPerSec: number }> };
  /** API and worker processes that rate needs (each at processUtilization of a core). */
  processesAtLimit: { api: number; workers: number };
  /** Live long turns at once with no other traffic, by what would stop them. */
  liveTurns: {
    value: number;
    limitedBy: string;
    bounds: Array<{ limit: string; turns: number }>;
    /** Workers needed to follow that many (their slots and memory). */
    workers: number;
  };
  /** Agents whose fence counters fit into their share of Redis memory (an idle agent costs nothing else there). */
  agents: number;
  /** Handoffs waiting for delivery that fit into the rest of it. */
  queuedHandoffs: number;
  /** Share of the busiest Redis primary's work per handoff: 1 with one primary. */
  redisBusiestShare: number;
}

/** The share of a handoff's Redis work on the busiest of `primaries`, with `queues` delivery queues spread round the slots. */
export function busiestPrimaryShare(primaries: number, queues: number): number {
  const n = Math.max(1, Math.floor(primaries));
  const q = Math.max(1, Math.floor(queues));
  return REDIS_SPREAD.perAgent / n + (REDIS_SPREAD.perQueue * Math.ceil(q / n)) / q + REDIS_SPREAD.oneKey;
}

/**
 * What one Postgres primary and a Redis cluster of `spec.redis.primaries` carry for one
 * deployment: handoffs/s (Postgres CPU, WAL, connections of the processes the rate needs, the
 * busiest Redis primary's thread), live long turns (Postgres and Redis per second, worker
 * slots and memory), and agents (Redis memory). Costs are measured ones; fsync, replication and
 * network round trips are outside it (docs/CAPACITY.md says what that leaves out).
 */
export function fleetCapacity(costs: FleetCosts, spec: FleetSpec): FleetCapacity {
  const h = costs.handoff;
  const pgBudgetMs = spec.postgres.vcpus * spec.postgres.utilization * 1000;
  const share = busiestPrimaryShare(spec.redis.primaries, spec.deliveryQueues);
  const redisBudgetMs = spec.redis.utilization * 1000;
  const processMs = h.cpuMs.api + h.cpuMs.workers;
  const bounds: FleetCapacity['handoffsPerSec']['bounds'] = [
    { limit: 'Postgres CPU', handoffsPerSec: h.cpuMs.postgres > 0 ? pgBudgetMs / h.cpuMs.postgres : Infinity },
    {
      limit: 'Postgres WAL',
      handoffsPerSec:
        spec.postgres.walBytesPerSec !== null && h.postgresWalBytes ? spec.postgres.walBytesPerSec / h.postgresWalBytes : Infinity,
    },
    {
      // Each process opens dbPoolSize connections; the rate needs processMs / (1000 x utilization) processes per handoff/s.
      limit: 'Postgres connections',
      handoffsPerSec:
        processMs > 0 ? ((spec.postgres.connections / spec.dbPoolSize) * 1000 * spec.processUtilization) / processMs : Infinity,
    },
    { limit: 'Redis CPU (busiest primary)', handoffsPerSec: h.cpuMs.redis > 0 ? redisBudgetMs / (h.cpuMs.redis * share) : Infinity },
  ];
  const lowest = bounds.reduce((a, b) => (b.handoffsPerSec < a.handoffsPerSec ? b : a));
  const rate = lowest.handoffsPerSec;
  const processes = (ms: number) => Math.ceil((rate * ms) / (1000 * spec.processUtilization));

  const t = costs.liveTurn;
  const turnRedisMs = t.redisCommandsPerSec * costs.redisMsPerCommand;
  const turnPgMs = t.postgresStatementsPerSec * costs.postgresMsPerTurnStatement;
  // A turn's keys are its agent's: they spread over every primary like the per-agent work.
  const turnShare = REDIS_SPREAD.perAgent / Math.max(1, spec.redis.primaries) + (1 - REDIS_SPREAD.perAgent);
  const connectionsWorkers = Math.floor(spec.postgres.connections / spec.dbPoolSize);
  const perWorkerTurns = Math.min(
    spec.turnSlotsPerWorker,
    t.workerRssKiB > 0 ? spec.workerMemoryForTurnsBytes / (t.workerRssKiB * 1024) : Infinity,
    t.workerCpuMsPerSec > 0 ? (1000 * spec.processUtilization) / t.workerCpuMsPerSec : Infinity,
  );
  const turnBounds = [
    { limit: 'Postgres CPU', turns: turnPgMs > 0 ? pgBudgetMs / turnPgMs : Infinity },
    { limit: 'Redis CPU (busiest primary)', turns: turnRedisMs > 0 ? redisBudgetMs / (turnRedisMs * turnShare) : Infinity },
    // Workers are added until Postgres has no connection left for another one.
    { limit: 'worker slots (as many workers as Postgres connections allow)', turns: perWorkerTurns * connectionsWorkers },
  ];
  const fewestTurns = turnBounds.reduce((a, b) => (b.turns < a.turns ? b : a));
  const memory = spec.redis.memoryBytes * spec.redis.primaries;
  const fit = (bytes: number, share: number) => (bytes > 0 ? Math.floor((memory * share) / bytes) : Infinity);
  return {
    handoffsPerSec: { value: rate, limitedBy: lowest.limit, bounds },
    processesAtLimit: { api: processes(h.cpuMs.api), workers: processes(h.cpuMs.workers) },
    liveTurns: {
      value: Math.floor(fewestTurns.turns),
      limitedBy: fewestTurns.limit,
      bounds: turnBounds.map((b) => ({ ...b, turns: Math.floor(b.turns) })),
      workers: Math.ceil(fewestTurns.turns / perWorkerTurns),
    },
    agents: fit(costs.redisBytesPerAgent, AGENT_MEMORY_SHARE),
    queuedHandoffs: fit(costs.redisBytesPerQueuedHandoff, 1 - AGENT_MEMORY_SHARE),
    redisBusiestShare: share,
  };
}
