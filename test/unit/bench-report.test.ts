import { describe, expect, it } from 'vitest';
import { renderReport } from '../../services/bench/report.ts';
import { BENCH_SCENARIOS, parseScenarios } from '../../services/bench/bench-scenarios.ts';
import type { LongTurnsResult } from '../../services/bench/scenarios/long-turns.ts';
import { evaluateTargets, type Measurements } from '../../services/bench/targets.ts';
import { evaluateGuarantees } from '../../services/bench/guarantees.ts';

const longTurns: LongTurnsResult = {
  turns: 1000,
  turnSeconds: 30,
  workers: 2,
  workerConcurrency: 256,
  queueShards: 4,
  slots: 2048,
  peakInFlight: 1000,
  turnsPerWorker: [510, 490],
  lastSendToAllReturnedSec: 33.5,
  firstSendToLastAcceptedSec: 6.1,
  returned: 1000,
  liveInWindow: 1000,
  quietSeconds: 5.01,
  quietWindowClean: true,
  activeJobsPerLiveTurn: 1,
  queuedJobsInWindow: 0,
  workerWarnings: { 'turn lock extension failed; retrying': 2 },
  workerRssIdleMiB: [240, 235],
  workerRssLiveMiB: [300, 290],
  workerRssKiBPerTurn: 117.8,
  redisCommandsPerSecPerTurn: 9.4,
  redisTopCommands: [{ name: 'get', perSecPerTurn: 2.3 }],
  postgresStatementsPerSecPerTurn: 0.5,
  postgresTopStatements: [{ name: 'SELECT h.id FROM handoffs h WHERE h.id = $1', perSecPerTurn: 0.5 }],
  cpuMsPerSecPerTurn: { workers: 0.9, total: 1.9 },
  handoffsNotWrittenOnce: 0,
  writeViolations: 0,
};

const onlyLongTurns: Measurements = {
  version: 1,
  mode: 'full',
  startedAt: '2026-11-30T10:00:00.000Z',
  seconds: 80,
  machine: { cpus: 2, node: '20.20.2', postgres: '18.4', redis: '7.0.15', embeddedPostgres: true, embeddedRedis: true },
  only: ['long-turns'],
  longTurns,
};

describe('bench scenario selection (--only)', () => {
  it('accepts a comma-separated list of known scenarios, in the order given', () => {
    expect(parseScenarios('long-turns')).toEqual(['long-turns']);
    expect(parseScenarios('recovery, long-turns')).toEqual(['recovery', 'long-turns']);
    expect(BENCH_SCENARIOS).toContain('long-turns');
  });

  it('refuses an unknown or empty scenario list, naming the valid ones', () => {
    expect(() => parseScenarios('long-turn')).toThrow(/unknown bench scenario "long-turn"; choose from ceilings, send, .*long-turns/);
    expect(() => parseScenarios(' , ')).toThrow(/choose from/);
  });
});

describe('bench report with only the long-turn scenario', () => {
  it('renders the long-turn table and its guarantee without the scenarios that did not run', () => {
    // Every issue-16 target reads a scenario that did not run: no row rather than n/a rows.
    expect(evaluateTargets(onlyLongTurns)).toEqual([]);
    const guarantees = evaluateGuarantees(onlyLongTurns);
    expect(guarantees).toEqual([
      {
        name: 'long turns: 1000 x 30 s all RETURNED, each written once, no violation',
        goal: 'all',
        measured: '1000 returned, 0 not once, 0 violations',
        met: true,
      },
    ]);
    const text = renderReport({ ...onlyLongTurns, targets: [], guarantees });
    expect(text).toContain('Baton benchmark (full, only long-turns)');
    expect(text).toMatch(/workers x shards x concurrency = job slots\s+2 x 4 x 256 = 2048/);
    expect(text).toMatch(/turns in flight at the peak \(ACCEPTED \+ RUNNING\)\s+1000/);
    expect(text).toMatch(/Redis commands \/s per live turn\s+9\.4; top: get 2\.3/);
    expect(text).toMatch(/worker warnings logged\s+turn lock extension failed; retrying x2/);
    expect(text).toMatch(/written exactly once\s+1000 of 1000, 0 write violations/);
    expect(text).not.toContain('raw Postgres');
    expect(text).not.toContain('e2e ');
    expect(text).toMatch(/guarantee\s+goal\s+measured\s+met/);
    expect(text).not.toContain('target (issue');
  });

  it('fails the long-turn guarantee when a handoff was written twice or not returned', () => {
    const twice = evaluateGuarantees({ ...onlyLongTurns, longTurns: { ...longTurns, handoffsNotWrittenOnce: 1, writeViolations: 1 } });
    expect(twice[0]?.met).toBe(false);
    const unfinished = evaluateGuarantees({ ...onlyLongTurns, longTurns: { ...longTurns, returned: 999 } });
    expect(unfinished[0]?.met).toBe(false);
  });
});
