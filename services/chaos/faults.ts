import { setTimeout as sleep } from 'node:timers/promises';
import type { ChaosEnvironment, ProcessSlot } from './chaos-environment.ts';
import type { FaultProxy } from './fault-proxy.ts';
import type { Random } from './random.ts';

/** What the chaos run breaks. */
export const FAULT_KINDS = [
  'worker_kill',
  'api_kill',
  'redis_restart',
  'postgres_restart',
  'proxy_latency',
  'proxy_stall',
  'proxy_drop',
] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

/** How often each kind is drawn once every kind has been injected once. */
const WEIGHTS: Readonly<Record<FaultKind, number>> = {
  worker_kill: 3,
  api_kill: 1,
  redis_restart: 1,
  postgres_restart: 1,
  proxy_latency: 2,
  proxy_stall: 3,
  proxy_drop: 2,
};

export const FAULT_LABELS: Readonly<Record<FaultKind, string>> = {
  worker_kill: 'worker SIGKILL + restart',
  api_kill: 'API SIGKILL + restart',
  redis_restart: 'Redis restart',
  postgres_restart: 'Postgres restart',
  proxy_latency: 'proxy latency',
  proxy_stall: 'proxy stall',
  proxy_drop: 'proxy drop',
};

export type Server = 'postgres' | 'redis';

/** The longest a worker-kill fault waits for the restarted worker to serve (as long as a first start may take). */
const RESTART_SERVING_MS = 60_000;

/** One injected fault: when it began and ended (ms since the epoch), and what exactly it did. */
export interface FaultRecord {
  readonly kind: FaultKind;
  readonly at: number;
  endedAt: number;
  /** Whom it hit: slot names, or the server. */
  readonly targets: readonly string[];
  readonly server: Server | null;
  /** How long the server was gone, the process dead, the proxy stalled or slow (ms). */
  durationMs: number;
  /** Latency added (proxy_latency), connections broken (proxy_drop), shutdown mode (postgres_restart). */
  readonly detail: string;
}

export interface FaultTiming {
  /** Pause between two faults (ms), drawn from this range. */
  readonly gapMs: readonly [number, number];
}

/**
 * Injects faults one after another, at random (seeded), until told to stop: first every kind
 * once, in random order, so even a short run has each of them, then by weight. Latency is set
 * in the background (it overlaps the faults that follow); everything else is over before the
 * next fault starts. A fault ends when what it broke is back: the process restarted, the server
 * up, the proxy forwarding at full speed.
 */
export class FaultInjector {
  readonly records: FaultRecord[] = [];
  private readonly background = new Set<Promise<void>>();
  /** Aborted when the run stops injecting: background faults end at once. */
  private readonly healing = new AbortController();
  /** Latency set on a proxy, by the fault that set it (a later one may take it over). */
  private readonly latencyOwner = new Map<FaultProxy, FaultRecord>();

  constructor(
    private readonly env: ChaosEnvironment,
    private readonly rng: Random,
    private readonly timing: FaultTiming,
  ) {}

  /** When the last fault ended (0: none yet). */
  get lastEndedAt(): number {
    return this.records.reduce((m, r) => Math.max(m, r.endedAt), 0);
  }

  countOf(kind: FaultKind): number {
    return this.records.filter((r) => r.kind === kind).length;
  }

  /**
   * Injects until `until.done()` says so, but not before every kind was injected once (a
   * starved run's faults take longer, restarts most), unless `until.abort()` (checked between
   * faults); then ends the background faults at once: from then on nothing is broken, and the
   * time to all final is counted from there.
   */
  async run(until: { done: () => boolean; abort: () => boolean }): Promise<void> {
    const firstRound = this.rng.shuffle(FAULT_KINDS);
    const stop = () => until.abort() || (firstRound.length === 0 && until.done());
    while (!stop()) {
      await sleep(this.rng.int(this.timing.gapMs[0], this.timing.gapMs[1]));
      if (stop()) break;
      await this.inject(firstRound.shift() ?? this.rng.weighted(WEIGHTS));
    }
    this.healing.abort();
    await Promise.all(this.background);
  }

  async inject(kind: FaultKind): Promise<void> {
    switch (kind) {
      case 'worker_kill':
        return this.killAndRestart('worker_kill', this.env.workers, this.rng.chance(0.25) ? 2 : 1);
      case 'api_kill':
        // Never every API: the sends go on through the other one while this one comes back.
        return this.killAndRestart('api_kill', this.env.apis, Math.min(1, this.env.apis.length - 1));
      case 'redis_restart': {
        const down = this.rng.int(0, 800);
        const at = Date.now();
        await this.env.restartRedis(down);
        this.done({
          kind,
          at,
          targets: ['redis-server'],
          server: 'redis',
          durationMs: Date.now() - at,
          detail: `down ${down} ms before the start`,
        });
        return;
      }
      case 'postgres_restart': {
        const mode = this.rng.chance(0.5) ? 'fast' : 'immediate';
        const down = this.rng.int(0, 1_500);
        const at = Date.now();
        await this.env.postgres.restart(mode, down);
        this.done({ kind, at, targets: ['postgres'], server: 'postgres', durationMs: Date.now() - at, detail: mode });
        return;
      }
      case 'proxy_latency':
        return this.addLatency();
      case 'proxy_stall': {
        const { slots, server } = this.targets();
        const ms = this.rng.int(500, 4_000);
        const at = Date.now();
        for (const s of slots) proxyOf(s, server).stall();
        await sleep(ms);
        for (const s of slots) proxyOf(s, server).resume();
        this.done({ kind, at, targets: slots.map((s) => s.name), server, durationMs: Date.now() - at, detail: '' });
        return;
      }
      case 'proxy_drop': {
        const { slots, server } = this.targets();
        const at = Date.now();
        const broken = slots.reduce((sum, s) => sum + proxyOf(s, server).drop(), 0);
        this.done({ kind, at, targets: slots.map((s) => s.name), server, durationMs: 0, detail: `${broken} connections broken` });
        return;
      }
      default: {
        const never: never = kind;
        throw new Error(`unknown fault ${String(never)}`);
      }
    }
  }

  /**
   * SIGKILLs `count` of the processes in `slots` (a worker or two; one API), wherever they are,
   * and starts a new process in each place a moment later; the fault ends once the new ones
   * serve (at most RESTART_SERVING_MS).
   */
  private async killAndRestart(kind: 'worker_kill' | 'api_kill', slots: readonly ProcessSlot[], count: number): Promise<void> {
    const alive = slots.filter((s) => s.process !== null);
    const victims = this.rng.shuffle(alive).slice(0, count);
    const at = Date.now();
    await Promise.all(victims.map((s) => this.env.kill(s)));
    const down = this.rng.int(100, 1_500);
    await sleep(down);
    for (const s of victims) await this.env.start(s, false);
    await Promise.all(victims.map((s) => this.env.serving(s, RESTART_SERVING_MS)));
    this.done({
      kind,
      at,
      targets: victims.map((s) => s.name),
      server: null,
      durationMs: Date.now() - at,
      detail: `restarted after ${down} ms`,
    });
  }

  /** Slows some processes' connections to one server (or both) for a few seconds, in the background. */
  private async addLatency(): Promise<void> {
    const { slots } = this.targets();
    const servers: Server[] = this.rng.chance(0.3) ? ['postgres', 'redis'] : [this.rng.pick(['postgres', 'redis'] as const)];
    const ms = this.rng.int(20, 150);
    const jitter = this.rng.int(0, 50);
    const lasts = this.rng.int(2_000, 6_000);
    const record: FaultRecord = {
      kind: 'proxy_latency',
      at: Date.now(),
      endedAt: Number.POSITIVE_INFINITY,
      targets: slots.map((s) => s.name),
      server: servers.length === 1 ? servers[0]! : null,
      durationMs: lasts,
      detail: `${ms}+${jitter} ms`,
    };
    const proxies = slots.flatMap((s) => servers.map((server) => proxyOf(s, server)));
    for (const p of proxies) {
      p.setLatency(ms, jitter);
      this.latencyOwner.set(p, record);
    }
    this.records.push(record);
    const ending = (async () => {
      // An abort (healing) only ends the wait early.
      await sleep(lasts, undefined, { signal: this.healing.signal }).catch(() => undefined);
      for (const p of proxies) {
        if (this.latencyOwner.get(p) !== record) continue;
        p.setLatency(0, 0);
        this.latencyOwner.delete(p);
      }
      record.endedAt = Date.now();
      record.durationMs = record.endedAt - record.at;
    })();
    this.background.add(ending);
    void ending.finally(() => this.background.delete(ending));
  }

  /** Which processes a proxy fault hits (all of them, or one or two) and on which server. */
  private targets(): { slots: ProcessSlot[]; server: Server } {
    const server = this.rng.pick(['postgres', 'redis'] as const);
    const slots = this.rng.chance(0.3) ? [...this.env.slots] : this.rng.shuffle(this.env.slots).slice(0, this.rng.int(1, 2));
    return { slots, server };
  }

  private done(r: Omit<FaultRecord, 'endedAt'>): void {
    this.records.push({ ...r, endedAt: Date.now() });
  }
}

function proxyOf(slot: ProcessSlot, server: Server): FaultProxy {
  return server === 'postgres' ? slot.postgresProxy : slot.redisProxy;
}
