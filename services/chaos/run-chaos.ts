import { setMaxListeners } from 'node:events';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { SETTLED_STATES } from '../../libs/domain/delivery-states.ts';
import { startBusyProcesses, type BusyProcesses } from './busy-processes.ts';
import { ChaosEnvironment, HEAD_READ_TO_RESERVE_MS } from './chaos-environment.ts';
import { FAULT_KINDS, FaultInjector } from './faults.ts';
import { checkAgentOrder } from './check-agent-order.ts';
import {
  checkAllFinal,
  checkClaims,
  checkNoOverlap,
  checkOutcomesMatchSessions,
  checkRequestIdsOnce,
  checkSendsKept,
} from './invariants.ts';
import { checkNoUnplannedExits, checkSettleTime } from './run-invariants.ts';
import { summarizeUncertain } from './uncertain-summary.ts';
import { collectObservations, openCount, recordsOf } from './observations.ts';
import { Random } from './random.ts';
import { renderChaosReport, summarizeFaults, type ChaosResult } from './report.ts';
import { ApiCaller, Claimers, planTraffic, Readers, Sender, SENDER, type TrafficPlan } from './traffic.ts';

export interface ChaosOptions {
  /** Demo agents (push deliveries through the workers). */
  readonly agents: number;
  /** Pull-only agents, each with a claimer loop. */
  readonly manualAgents: number;
  /** Handoffs to send in all (a tenth of them pull work). */
  readonly handoffs: number;
  /** How long the sends take (their rate is handoffs / duration) while faults go on. */
  readonly durationSec: number;
  /** The longest the run waits, after the last fault ended, for every handoff to be final. */
  readonly deadlineSec: number;
  readonly seed: number;
  readonly apis: number;
  readonly workers: number;
  /** Keep the processes' logs even when every invariant held. */
  readonly keepLogs: boolean;
  /**
   * `--starved`: busy processes per CPU that spin beside Baton from the first registration until
   * every handoff is final (0: none), so every process runs starved of CPU under the faults.
   */
  readonly starved: number;
}

/** The full run (`npm run chaos`) and the short one the test suite runs (`--short`). */
export function chaosDefaults(short: boolean): Omit<ChaosOptions, 'seed' | 'keepLogs' | 'starved'> {
  return short
    ? { agents: 60, manualAgents: 4, handoffs: 400, durationSec: 30, deadlineSec: 45, apis: 2, workers: 3 }
    : { agents: 500, manualAgents: 8, handoffs: 3_300, durationSec: 150, deadlineSec: 90, apis: 2, workers: 3 };
}

/** Raised when the run was interrupted (SIGINT/SIGTERM); everything was cleaned up first. */
export class ChaosInterrupted extends Error {
  constructor() {
    super('chaos run interrupted; every process and temp directory was cleaned up');
    this.name = 'ChaosInterrupted';
  }
}

const round1 = (ms: number) => Math.round(ms / 100) / 10;

/**
 * `baton chaos`: starts its own Postgres, Redis, demo sessions, API and worker processes behind
 * fault proxies, all on 127.0.0.1; sends the planned handoffs while faults are injected at
 * random (seeded); waits for every handoff to be final; then checks the invariants against the
 * demo host's write log and Postgres. Bounded: the sends stop at 3x the duration plus a minute,
 * the wait for final states at the deadline. Always stops every process and deletes every temp
 * directory (also when interrupted through `signal`, or failing); a failed run keeps the
 * processes' logs and says where.
 */
export async function runChaos(opts: ChaosOptions, log: (line: string) => void, signal: AbortSignal): Promise<ChaosResult> {
  const startedAt = new Date();
  const t0 = Date.now();
  const runId = `${opts.seed.toString(36)}${t0.toString(36)}`;
  log(`chaos: seed ${opts.seed}; starting Postgres, Redis, the demo sessions and ${opts.apis + opts.workers} proxied processes`);
  const env = await ChaosEnvironment.start({ apis: opts.apis, workers: opts.workers });
  const onAbort = () => env.stopRestarting();
  signal.addEventListener('abort', onAbort, { once: true });
  let busy: BusyProcesses | null = null;
  let starvedMs = 0;
  const sendCapMs = opts.durationSec * 3_000 + 60_000;
  try {
    const [firstApi, ...otherApis] = env.apis;
    if (!firstApi) throw new Error('a chaos run needs at least one API process');
    await env.start(firstApi, true);
    env.readAdminToken();
    await Promise.all([...otherApis, ...env.workers].map((s) => env.start(s, true)));
    if (opts.starved > 0) {
      // Their own bound, should every stop below be missed: the longest the run can last from here.
      busy = startBusyProcesses(opts.starved, REGISTRATION_ALLOWANCE_MS + sendCapMs + opts.deadlineSec * 1_000 + 60_000);
      starvedMs = Date.now();
      log(`chaos: starved: ${busy.count} busy processes spinning on ${busy.cpus} CPUs beside Baton until every handoff is final`);
    }
    const api = new ApiCaller(() => env.apis.map((s) => s.apiUrl!), env.adminToken);
    const plan = planTraffic(new Random(opts.seed), {
      agents: opts.agents,
      handoffs: opts.handoffs,
      manualAgents: opts.manualAgents,
      runId,
    });
    await registerAgents(api, plan);
    const setupMs = Date.now() - t0;
    if (signal.aborted) throw new ChaosInterrupted();
    log(
      `chaos: ${plan.demoAgents.length} demo and ${plan.manualAgents.length} manual agents registered in ${round1(setupMs)} s; sending ${plan.sends.length} handoffs over ${opts.durationSec} s under faults`,
    );

    const claimers = new Claimers(api, plan.manualAgents, new Random(opts.seed ^ 0x5bd1e995));
    const sender = new Sender(api, plan, (s, id) => {
      if (s.pull) claimers.add(id, s.pull.owner);
    });
    const injector = new FaultInjector(env, new Random(opts.seed ^ 0x27d4eb2d), {
      gapMs: opts.durationSec < 60 ? [400, 1_400] : [800, 2_500],
    });
    const chaosStart = Date.now();
    const stopSending = new AbortController();
    const stopClaiming = new AbortController();
    const sendSignal = AbortSignal.any([signal, stopSending.signal, AbortSignal.timeout(sendCapMs)]);
    // Each of the 32 send lanes waits on it (its pacing and retry sleeps): not a leak.
    setMaxListeners(64, sendSignal);
    const sending = sender.run(plan.sends.length / opts.durationSec, 32, sendSignal);
    const claiming = claimers.run(AbortSignal.any([signal, stopClaiming.signal]));
    const readers = new Readers(api, () => sender.ids, new Random(opts.seed ^ 0x165667b1));
    const reading = readers.run(READ_LANES, AbortSignal.any([signal, stopClaiming.signal]));
    const refresh = setInterval(() => void claimers.refresh(env.pool), 1_000);
    let maxLoad = loadavg()[0] ?? 0;
    const progress = setInterval(() => {
      maxLoad = Math.max(maxLoad, loadavg()[0] ?? 0);
      void openCount(env.pool, [...SETTLED_STATES]).then((c) => {
        const faults = FAULT_KINDS.map((k) => `${k} ${injector.countOf(k)}`).join(', ');
        log(
          `chaos ${round1(Date.now() - chaosStart)} s: ${sender.answered}/${plan.sends.length} sent, ${c ? `${c.total - c.open} final, ${c.open} open` : 'Postgres away'}; faults: ${faults}`,
        );
      });
    }, 5_000);
    let chaosMs = 0;
    let allFinalAt: number | null = null;
    let lastFaultEndedAt = 0;
    try {
      await injector.run({
        done: () => sender.done && Date.now() - chaosStart >= opts.durationSec * 1_000,
        abort: () => signal.aborted || sendSignal.aborted,
      });
      lastFaultEndedAt = injector.lastEndedAt;
      chaosMs = Date.now() - chaosStart;
      if (!sender.done) stopSending.abort();
      await sending;
      if (signal.aborted) throw new ChaosInterrupted();
      log(
        `chaos: faults over after ${round1(chaosMs)} s (${injector.records.length} injected); waiting up to ${opts.deadlineSec} s for every handoff to be final`,
      );
      allFinalAt = await waitAllFinal(env, sender, lastFaultEndedAt + opts.deadlineSec * 1_000, signal);
      if (signal.aborted) throw new ChaosInterrupted();
    } finally {
      // The checks below are the run's own work, not Baton's: they need not be starved.
      if (busy) starvedMs = Date.now() - starvedMs;
      await busy?.stop();
      stopSending.abort();
      stopClaiming.abort();
      clearInterval(refresh);
      clearInterval(progress);
      await Promise.allSettled([sending, claiming, reading]);
    }

    log('chaos: checking the invariants');
    const obs = await collectObservations(env.pool, env.demoHostUrl);
    const invariants = [
      checkAllFinal(obs.handoffs),
      checkRequestIdsOnce(obs.writes),
      checkNoOverlap(obs.writes),
      checkOutcomesMatchSessions(obs.handoffs, obs.writes, obs.attempts),
      checkAgentOrder(obs.handoffs, obs.writes, obs.attempts, obs.events, obs.notBefore, { headReadToReserveMs: HEAD_READ_TO_RESERVE_MS }),
      checkSendsKept(sender.records, obs.handoffs),
      checkClaims(obs.events, claimers.calls, Date.now()),
      checkSettleTime(lastFaultEndedAt, allFinalAt, opts.deadlineSec * 1_000),
      checkNoUnplannedExits(env.unexpectedExits, { started: env.processesStarted, killedOnPurpose: env.killedOnPurpose }, t0),
    ];
    const ok = invariants.every((i) => i.violations === 0) && FAULT_KINDS.every((k) => injector.countOf(k) > 0);
    const uncertain = summarizeUncertain(obs.events, obs.attempts, obs.writes, (actor) => env.fateOf(actor));
    let logs: string | null = null;
    if (!ok || opts.keepLogs) {
      logs = mkdtempSync(join(tmpdir(), 'baton-chaos-logs-'));
      await env.writeLogs(logs);
      // The handoffs a violation names and those never written that went UNCERTAIN, as recorded.
      const named = invariants.flatMap((i) => i.details.flatMap((d) => d.match(UUID) ?? []));
      const ids = new Set([...named, ...uncertain.neverWritten.list.map((e) => e.handoffId)]);
      writeFileSync(join(logs, 'records.json'), JSON.stringify(recordsOf(obs, ids), null, 1));
    }
    const result: ChaosResult = {
      version: 1,
      ok,
      startedAt: startedAt.toISOString(),
      seed: opts.seed,
      options: {
        agents: opts.agents,
        manualAgents: opts.manualAgents,
        handoffs: opts.handoffs,
        apis: opts.apis,
        workers: opts.workers,
        durationSec: opts.durationSec,
        deadlineSec: opts.deadlineSec,
        starved: opts.starved,
      },
      starvation: busy ? { busyProcesses: busy.count, cpus: busy.cpus, seconds: round1(starvedMs) } : null,
      maxLoadAverage: Math.round(maxLoad * 10) / 10,
      seconds: {
        setup: round1(setupMs),
        chaos: round1(chaosMs),
        lastFaultToFinal: allFinalAt === null ? null : round1(allFinalAt - lastFaultEndedAt),
        total: round1(Date.now() - t0),
      },
      traffic: {
        sends: plan.sends.length,
        answered: sender.answered,
        sendRetries: sender.records.filter((r) => r.tries > 1).length,
        writes: obs.writes.length,
        turnsLanded: obs.writes.filter((w) => w.answer === 'accepted').length,
        workerProcessesStarted: env.workers.reduce((s, w) => s + w.starts, 0),
        claims: (({ outstanding: _, ...c }) => c)(claimers.stats),
        reads: { ...readers.stats },
      },
      faults: summarizeFaults(injector.records),
      unexpectedExits: [...env.unexpectedExits],
      invariants,
      uncertain,
      logs,
    };
    return result;
  } finally {
    await busy?.stop();
    signal.removeEventListener('abort', onAbort);
    log('chaos: stopping every process and removing the temp directories');
    await env.close();
  }
}

const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g;

/** Loops reading handoffs (GET /v1/handoffs/:id) through the APIs during the faults. */
const READ_LANES = 2;

/** What registering the agents may take under starvation, for the busy processes' own bound. */
const REGISTRATION_ALLOWANCE_MS = 120_000;

/** Registers the sender, the manual agents and the demo agents (16 at a time) through the API. */
async function registerAgents(api: ApiCaller, plan: TrafficPlan): Promise<void> {
  const bodies = [
    { id: SENDER, provider: 'manual' },
    ...plan.manualAgents.map((id) => ({ id, provider: 'manual' })),
    ...plan.demoAgents.map((a) => ({ id: a.handle, provider: 'demo', settings: { thinkMs: a.thinkMs } })),
  ];
  let next = 0;
  await Promise.all(
    Array.from({ length: 16 }, async (_, lane) => {
      for (let i = next++; i < bodies.length; i = next++) {
        for (let attempt = 0; ; attempt++) {
          const a = await api.call(lane + attempt, 'POST', '/v1/agents', bodies[i]);
          if (a.status === 201 || a.status === 200) break;
          // An earlier try that got no answer in time (a starved API) may have registered it.
          if (attempt > 0 && a.status === 409 && 'body' in a && a.body?.error?.code === 'agent_exists') break;
          if (attempt >= 10 || (a.status >= 400 && a.status < 500))
            throw new Error(`registering ${JSON.stringify(bodies[i])} failed: ${JSON.stringify(a)}`);
          await sleep(200);
        }
      }
    }),
  );
}

/** Polls Postgres until every send was answered and every handoff is final; the time that happened, or null at `until`. */
async function waitAllFinal(env: ChaosEnvironment, sender: Sender, until: number, signal: AbortSignal): Promise<number | null> {
  while (!signal.aborted && Date.now() <= until) {
    const c = await openCount(env.pool, [...SETTLED_STATES]);
    if (c && sender.done && c.open === 0 && c.total >= sender.answered) return Date.now();
    await sleep(250);
  }
  return null;
}

export { renderChaosReport };
