import { ROLE_SHARE_GAP_BOUND } from './scenarios/role-routing.ts';
import type { Guarantee } from './bench-result.ts';
import { round } from './measure.ts';
import { fewRun, manyRun, type Measurements } from './targets.ts';

/** The guarantees the bench checks beside the targets (those of the scenarios that ran). */
export function evaluateGuarantees(m: Measurements): Guarantee[] {
  const g: Guarantee[] = [];
  const add = (name: string, goal: string, measured: string, met: boolean) => g.push({ name, goal, measured, met });
  const few = fewRun(m);
  const many = manyRun(m);
  if (few && many) {
    const a = few.cost.redisConnectionsPerWorker;
    const b = many.cost.redisConnectionsPerWorker;
    add(
      `Redis connections per worker, ${many.agents} vs ${few.agents} agents`,
      'the same',
      `${b.join('/')} vs ${a.join('/')}`,
      JSON.stringify(a) === JSON.stringify(b),
    );
  }
  if (m.recovery) {
    add('worker SIGKILL -> UNCERTAIN', '<= 5 s', `${m.recovery.killToUncertainSec} s`, m.recovery.killToUncertainSec <= 5);
    add('Redis wipe -> all handoffs final', '<= 10 s', `${m.recovery.wipeToFinalSec} s`, m.recovery.wipeToFinalSec <= 10);
  }
  const b = m.busyAgents;
  if (b) {
    add(
      'busy agents: no overlapping turns, order held, one write each',
      'all 0',
      `${b.overlappingTurns}/${b.agentsOutOfOrder}/${b.handoffsNotWrittenOnce}`,
      b.overlappingTurns + b.agentsOutOfOrder + b.handoffsNotWrittenOnce === 0,
    );
  }
  const rr = m.roleRouting;
  if (rr) {
    add(
      `role routing: ${rr.handoffs} to a role of ${rr.turnMs.length} finish before round-robin at send time`,
      'sooner',
      `${rr.role.seconds} s vs ${rr.roundRobin.seconds} s`,
      rr.role.seconds < rr.roundRobin.seconds,
    );
    add(
      'role routing: each agent within the bound of its speed-proportional share, no overlap, one write each',
      `<= ${ROLE_SHARE_GAP_BOUND * 100}% of all, 0, 0`,
      `${round(rr.maxShareGap * 100, 1)}%, ${rr.overlappingTurns}, ${rr.handoffsNotWrittenOnce}`,
      rr.maxShareGap <= ROLE_SHARE_GAP_BOUND && rr.overlappingTurns === 0 && rr.handoffsNotWrittenOnce === 0,
    );
  }
  const l = m.longTurns;
  if (l) {
    const ok = l.returned === l.turns && l.handoffsNotWrittenOnce === 0 && l.writeViolations === 0;
    add(
      `long turns: ${l.turns} x ${l.turnSeconds} s all RETURNED, each written once, no violation`,
      'all',
      `${l.returned} returned, ${l.handoffsNotWrittenOnce} not once, ${l.writeViolations} violations`,
      ok,
    );
  }
  return g;
}
