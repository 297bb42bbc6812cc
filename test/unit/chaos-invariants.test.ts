import { describe, expect, it } from 'vitest';
import type { DemoWrite } from '../../libs/adapters/demo/demo-agent-host.ts';
import { checkAgentOrder } from '../../services/chaos/check-agent-order.ts';
import {
  checkAllFinal,
  checkClaims,
  checkNoOverlap,
  checkOutcomesMatchSessions,
  checkRequestIdsOnce,
  checkSendsKept,
  type AttemptRow,
  type ClaimCall,
  type EventRow,
  type HandoffRow,
  type NotBeforeRow,
} from '../../services/chaos/invariants.ts';
import { checkNoUnplannedExits, checkSettleTime } from '../../services/chaos/run-invariants.ts';
import { renderChaosReport, summarizeFaults, type ChaosResult } from '../../services/chaos/report.ts';
import type { UnexpectedExit } from '../../services/chaos/chaos-environment.ts';
import { renderUncertain, summarizeUncertain } from '../../services/chaos/uncertain-summary.ts';

/**
 * The chaos run's table can only be trusted if each check fails on the violation it names:
 * each test feeds one a fabricated record with exactly that violation (and a clean one beside
 * it, which must pass).
 */

const T = Date.parse('2026-12-01T10:00:00Z');
const write = (
  session: string,
  requestId: string,
  handoffId: string,
  liveTurn: string | null = null,
  answer: DemoWrite['answer'] = 'accepted',
): DemoWrite => ({
  session,
  requestId,
  handoffId,
  at: T,
  liveTurn,
  answer,
});
const handoff = (id: string, seq: number, state: HandoffRow['state'] = 'RETURNED', recipient: string | null = 'agent-1'): HandoffRow => ({
  id,
  seq,
  recipient,
  provider: 'demo',
  state,
});
let eventId = 0;
const event = (
  handoffId: string,
  to: EventRow['to'],
  event: string,
  at: number,
  work: { from?: string; to?: string; actor?: string } = {},
): EventRow => ({
  id: ++eventId,
  handoffId,
  to,
  event,
  actor: work.actor ?? null,
  workFrom: work.from ?? null,
  workTo: work.to ?? null,
  at,
});

describe('every handoff in a final state', () => {
  it('counts a handoff left open, and passes when all are settled', () => {
    expect(checkAllFinal([handoff('a', 1), handoff('b', 2, 'CANCELLED')]).violations).toBe(0);
    const r = checkAllFinal([handoff('a', 1), handoff('b', 2, 'SENDING'), handoff('c', 3, 'UNCERTAIN')]);
    expect(r.violations).toBe(2);
    expect(r.details[0]).toContain('SENDING');
  });
});

describe('request ids and overlapping turns (the demo host write log)', () => {
  it('counts a request id written twice', () => {
    const clean = [write('s1', 'r1', 'h1'), write('s1', 'r2', 'h2')];
    expect(checkRequestIdsOnce(clean).violations).toBe(0);
    const r = checkRequestIdsOnce([...clean, write('s1', 'r1', 'h1', null, 'repeated')]);
    expect(r.violations).toBe(1);
    expect(r.details[0]).toContain('r1');
  });

  it('counts a write that arrived while another turn of the session was live', () => {
    expect(checkNoOverlap([write('s1', 'r1', 'h1'), write('s1', 'r2', 'h2')]).violations).toBe(0);
    const r = checkNoOverlap([write('s1', 'r1', 'h1'), write('s1', 'r2', 'h2', 'r1', 'busy')]);
    expect(r.violations).toBe(1);
    expect(r.details[0]).toContain('while r1 was live');
  });
});

describe('outcomes against the sessions', () => {
  const attempt = (handoffId: string, requestId: string, status: string): AttemptRow => ({ handoffId, requestId, reservedAt: T, status });

  it('passes one landed turn per RETURNED handoff, none for a CANCELLED one, and a second after a failed turn', () => {
    const handoffs = [handoff('r', 1), handoff('c', 2, 'CANCELLED'), handoff('f', 3)];
    const writes = [write('agent-1', 'r1', 'r'), write('agent-1', 'f1', 'f'), write('agent-1', 'f2', 'f')];
    const attempts = [
      attempt('r', 'r1', 'returned'),
      attempt('c', 'c1', 'cancelled'),
      attempt('f', 'f1', 'failed'),
      attempt('f', 'f2', 'returned'),
    ];
    expect(checkOutcomesMatchSessions(handoffs, writes, attempts).violations).toBe(0);
  });

  it('counts a RETURNED handoff that never landed, a CANCELLED one that did, and one landed twice without a resend', () => {
    const handoffs = [handoff('r', 1), handoff('c', 2, 'CANCELLED'), handoff('twice', 3)];
    const writes = [write('agent-1', 'c1', 'c'), write('agent-1', 't1', 'twice'), write('agent-1', 't2', 'twice')];
    const attempts = [attempt('c', 'c1', 'cancelled'), attempt('twice', 't1', 'lost'), attempt('twice', 't2', 'returned')];
    const r = checkOutcomesMatchSessions(handoffs, writes, attempts);
    expect(r.violations).toBe(3);
    expect(r.details.join('\n')).toContain('r to agent-1 is RETURNED but no turn of it reached the session');
    expect(r.details.join('\n')).toContain('c to agent-1 is CANCELLED (proven absent) but its turn reached the session 1 time(s)');
    expect(r.details.join('\n')).toContain('twice to agent-1 reached the session 2 times with 0 resend(s) allowed');
  });
});

describe('per-agent order', () => {
  // A (seq 1) and B (seq 2) to agent-1; B's attempt was reserved at T + 1000 and written first.
  const handoffs = [handoff('A', 1), handoff('B', 2)];
  const writes = [write('agent-1', 'rB', 'B'), write('agent-1', 'rA', 'A')];
  const attempts: AttemptRow[] = [
    { handoffId: 'B', requestId: 'rB', reservedAt: T + 1_000, status: 'returned' },
    { handoffId: 'A', requestId: 'rA', reservedAt: T + 5_000, status: 'returned' },
  ];
  const opts = { headReadToReserveMs: 500 };
  const enrolled = [event('A', 'WAITING', 'enrolled', T), event('B', 'WAITING', 'enrolled', T + 10)];

  it('passes when handoffs are first written in send order', () => {
    const inOrder = [write('agent-1', 'rA', 'A'), write('agent-1', 'rB', 'B')];
    expect(checkAgentOrder(handoffs, inOrder, attempts, enrolled, [], opts).violations).toBe(0);
  });

  it('counts a later handoff written while the earlier one could start an attempt', () => {
    const r = checkAgentOrder(handoffs, writes, attempts, enrolled, [], opts);
    expect(r.violations).toBe(1);
    expect(r.details[0]).toContain('A was WAITING');
  });

  it('allows the overtake of a head that was UNCERTAIN when the later one was reserved', () => {
    const events = [...enrolled, event('A', 'SENDING', 'attempt_reserved', T + 100), event('A', 'UNCERTAIN', 'reply_lost', T + 500)];
    const r = checkAgentOrder(handoffs, writes, attempts, events, [], opts);
    expect(r.violations).toBe(0);
    expect(r.checked).toContain('head UNCERTAIN 1');
  });

  it('allows the overtake of a head backing off, but not of one whose back-off was long over', () => {
    const events = [...enrolled, event('A', 'BUSY', 'recipient_busy', T + 200)];
    const backingOff: NotBeforeRow[] = [{ handoffId: 'A', notBefore: T + 1_200, at: T + 200 }];
    expect(checkAgentOrder(handoffs, writes, attempts, events, backingOff, opts).violations).toBe(0);
    const over: NotBeforeRow[] = [{ handoffId: 'A', notBefore: T + 300, at: T + 200 }];
    expect(checkAgentOrder(handoffs, writes, attempts, events, over, opts).violations).toBe(1);
  });

  it("judges the head by what had committed when the later one was chosen, not by the transitions' own times", () => {
    // A was UNCERTAIN; the move that settled it to BUSY was stamped before B's reservation but
    // committed after it (a slow connection): the snapshot that chose B still saw A UNCERTAIN.
    const slowCommit = { ...event('A', 'BUSY', 'session_busy', T + 900), committedAt: T + 1_400 };
    const uncertain = [...enrolled, event('A', 'UNCERTAIN', 'reply_lost', T + 100), slowCommit];
    const reservedB = { ...attempts[0]!, committedAt: T + 1_050 };
    const r = checkAgentOrder(handoffs, writes, [reservedB, attempts[1]!], uncertain, [], opts);
    expect(r.violations).toBe(0);
    expect(r.checked).toContain('head UNCERTAIN 1');
    // The same move committed at once: A was BUSY, due, and B overtook it.
    const quick = [...enrolled, event('A', 'UNCERTAIN', 'reply_lost', T + 100), event('A', 'BUSY', 'session_busy', T + 200)];
    const v = checkAgentOrder(handoffs, writes, [reservedB, attempts[1]!], quick, [], opts);
    expect(v.violations).toBe(1);
    expect(v.details[0]).toContain('A was BUSY when');
  });

  it('allows an overtake of a head whose send had not committed, but not of one the chooser saw', () => {
    const reservedB = { ...attempts[0]!, committedAt: T + 1_020 };
    const reserveEvent = () => event('B', 'SENDING', 'attempt_reserved', T + 1_000);
    // A's send committed after B's reservation: no snapshot that chose B held A.
    const lateA = [
      { ...event('A', 'WAITING', 'enrolled', T), committedAt: T + 1_100 },
      event('B', 'WAITING', 'enrolled', T + 10),
      reserveEvent(),
    ];
    const r = checkAgentOrder(handoffs, writes, [reservedB, attempts[1]!], lateA, [], opts);
    expect(r.violations).toBe(0);
    expect(r.checked).toContain('head not yet committed 1');
    // A committed before B's own send did: the snapshot that chose B (it saw B) saw A too,
    // even though both are within the head-read allowance of the reservation.
    const seenA = [
      { ...event('A', 'WAITING', 'enrolled', T + 800), committedAt: T + 850 },
      { ...event('B', 'WAITING', 'enrolled', T + 900), committedAt: T + 950 },
      reserveEvent(),
    ];
    const v = checkAgentOrder(handoffs, writes, [reservedB, attempts[1]!], seenA, [], opts);
    expect(v.violations).toBe(1);
    expect(v.details[0]).toContain('A was WAITING when');
  });

  it('counts an overtake whose head only became UNCERTAIN after the later one was reserved', () => {
    const events = [...enrolled, event('A', 'UNCERTAIN', 'reply_lost', T + 2_000)];
    expect(checkAgentOrder(handoffs, writes, attempts, events, [], opts).violations).toBe(1);
  });
});

describe('sends answered 201', () => {
  const handoffs = [handoff('h1', 1), handoff('h2', 2, 'WAITING')];
  it('passes when every answered id exists and is final', () => {
    expect(checkSendsKept([{ index: 0, to: 'agent-1', status: 201, id: 'h1', tries: 1 }], handoffs).violations).toBe(0);
  });

  it('counts an id answered 201 that does not exist, one that is not final, and a send never answered', () => {
    const r = checkSendsKept(
      [
        { index: 0, to: 'agent-1', status: 201, id: 'h1', tries: 1 },
        { index: 1, to: 'agent-1', status: 201, id: 'h2', tries: 1 },
        { index: 2, to: 'agent-1', status: 201, id: 'lost', tries: 2 },
        { index: 3, to: 'agent-1', status: null, id: null, tries: 9 },
      ],
      handoffs,
    );
    expect(r.violations).toBe(3);
    expect(r.details.join('\n')).toContain('(h2) is WAITING, not final');
    expect(r.details.join('\n')).toContain('lost, which does not exist');
    expect(r.details.join('\n')).toContain('never answered');
  });
});

describe('claims', () => {
  const claimed = (id: string, actor: string, at: number) => event(id, 'ACCEPTED', 'claimed', at, { from: 'open', to: 'claimed', actor });
  const expired = (id: string, at: number) => event(id, 'WAITING', 'lease_expired', at, { from: 'claimed', to: 'open' });
  const returned = (id: string, actor: string, at: number) =>
    event(id, 'RETURNED', 'returned', at, { from: 'claimed', to: 'returned', actor });

  it('passes a claim, an expiry, a new claim by another agent and a return', () => {
    const events = [claimed('w', 'x', T), expired('w', T + 2_000), claimed('w', 'y', T + 2_100), returned('w', 'y', T + 3_000)];
    const calls: ClaimCall[] = [
      { agent: 'x', handoffId: 'w', op: 'heartbeat', sentAt: T + 500, answeredAt: T + 600, held: true },
      { agent: 'y', handoffId: 'w', op: 'return', sentAt: T + 2_900, answeredAt: T + 3_010, held: true },
    ];
    expect(checkClaims(events, calls, T + 10_000).violations).toBe(0);
  });

  it('counts a claim recorded while another agent held the work', () => {
    const r = checkClaims([claimed('w', 'x', T), claimed('w', 'y', T + 100)], [], T + 10_000);
    expect(r.violations).toBe(1);
    expect(r.details[0]).toContain('while x held it');
  });

  it("counts a call the API answered as x's while the log says y held the claim", () => {
    const events = [claimed('w', 'x', T), expired('w', T + 2_000), claimed('w', 'y', T + 2_100)];
    const late: ClaimCall = { agent: 'x', handoffId: 'w', op: 'heartbeat', sentAt: T + 2_500, answeredAt: T + 2_600, held: true };
    const r = checkClaims(events, [late], T + 10_000);
    expect(r.violations).toBe(1);
    expect(r.details[0]).toContain("x's heartbeat succeeded while y held the claim");
  });
});

describe('time from the last fault to all final', () => {
  it('passes within the deadline, and counts a late or missing end', () => {
    expect(checkSettleTime(T, T + 5_000, 10_000).violations).toBe(0);
    expect(checkSettleTime(T, T + 15_000, 10_000).violations).toBe(1);
    expect(checkSettleTime(T, null, 10_000).violations).toBe(1);
  });
});

describe('no Baton process exited unplanned', () => {
  const exit = (slot: string, wasServing: boolean, extra: Partial<UnexpectedExit> = {}): UnexpectedExit => ({
    slot,
    at: T + 83_200,
    code: 1,
    signal: null,
    wasServing,
    reason: '{"level":60,"msg":"uncaught exception"}',
    ...extra,
  });

  it('passes when the only exits were the kills the run made on purpose', () => {
    const r = checkNoUnplannedExits([], { started: 20, killedOnPurpose: 15 }, T);
    expect(r.violations).toBe(0);
    expect(r.checked).toBe('20 processes started, 15 of them SIGKILLed on purpose; no other exit');
  });

  it('counts an API that exited by itself while serving, and a start that failed', () => {
    const r = checkNoUnplannedExits(
      [exit('api-2', true), exit('worker-1', false, { reason: 'cannot start: Postgres went away during the start' })],
      { started: 20, killedOnPurpose: 15 },
      T,
    );
    expect(r.violations).toBe(2);
    expect(r.details[0]).toBe('api-2 exited (code 1) while serving, 83.2 s into the run: {"level":60,"msg":"uncaught exception"}');
    expect(r.details[1]).toContain('worker-1 exited (code 1) before it served');
  });

  it('counts a process ended by a signal the run did not send', () => {
    const r = checkNoUnplannedExits([exit('demo-host', true, { code: null, signal: 'SIGKILL' })], { started: 6, killedOnPurpose: 0 }, T);
    expect(r.violations).toBe(1);
    expect(r.details[0]).toContain('demo-host exited (signal SIGKILL) while serving');
  });

  it('does not count an API start that found the port the harness picked taken', () => {
    const r = checkNoUnplannedExits(
      [exit('api-1', false, { portTaken: true, reason: 'cannot start: 127.0.0.1:4000 is already in use' })],
      { started: 6, killedOnPurpose: 0 },
      T,
    );
    expect(r.violations).toBe(0);
    expect(r.checked).toContain('not counted: 1 API start(s) on a port the harness picked');
  });
});

describe('the UNCERTAIN summary', () => {
  const attempt = (handoffId: string, requestId: string, reservedAt: number): AttemptRow => ({
    handoffId,
    requestId,
    reservedAt,
    status: 'cancelled',
  });
  const ev = (handoffId: string, to: EventRow['to'], name: string, at: number, actor: string, reason: string | null = null) => ({
    ...event(handoffId, to, name, at),
    actor,
    reason,
  });
  const fates = (actor: string | null) => (actor === 'host-11' ? ('sigkilled by the run' as const) : ('alive to the end' as const));

  it('tells a never-written UNCERTAIN handoff from one whose write reached its session, and how each ended', () => {
    const events = [
      ev('a', 'SENDING', 'attempt_reserved', T, 'host-11'),
      ev('a', 'UNCERTAIN', 'reply_lost', T + 1_500, 'host-12', 'the worker that was writing this turn stopped'),
      ev('a', 'UNCERTAIN', 'scan_missed', T + 2_000, 'host-12'),
      ev('a', 'CANCELLED', 'proven_absent', T + 4_100, 'host-12'),
      ev('b', 'SENDING', 'attempt_reserved', T, 'host-12'),
      ev('b', 'UNCERTAIN', 'reply_lost', T + 1_000, 'host-13'),
      ev('b', 'RETURNED', 'observed_returned', T + 1_600, 'host-13'),
      ev('c', 'SENDING', 'attempt_reserved', T, 'host-12'),
      ev('c', 'UNCERTAIN', 'reply_lost', T + 1_000, 'host-13'),
    ];
    const attempts = [attempt('a', 'r-a', T), attempt('b', 'r-b', T), attempt('c', 'r-c', T)];
    const s = summarizeUncertain(events, attempts, [write('agent-1', 'r-b', 'b')], fates);
    expect([s.handoffs, s.written, s.neverWritten.total]).toEqual([3, 1, 2]);
    expect(s.neverWritten.outcomes).toEqual({ proven_absent: 1, 'still UNCERTAIN': 1 });
    expect(s.neverWritten.cancelledByReserverFate).toEqual({ 'sigkilled by the run': 1 });
    expect(s.neverWritten.list[0]).toMatchObject({
      handoffId: 'a',
      requestId: 'r-a',
      reservedBy: 'host-11',
      markedBy: 'host-12',
      absenceScans: 1,
      firstScanAfterMs: 500,
      uncertainMs: 2_600,
      reservedToUncertainMs: 1_500,
    });
    expect(s.neverWritten.cancelledToFirstScanMs).toEqual({ min: 500, median: 500, max: 500 });
    expect(renderUncertain(s).join('\n')).toContain(
      '3 handoffs went UNCERTAIN (3 times); 1 of those writes had reached a session, 2 never had',
    );
  });
});

describe('the report', () => {
  it('says FAIL, with the broken invariant and the kinds of fault never injected', () => {
    const invariants = [checkAllFinal([handoff('a', 1, 'SENDING')]), checkSettleTime(T, T + 1_000, 10_000)];
    const result: ChaosResult = {
      version: 1,
      ok: false,
      startedAt: new Date(T).toISOString(),
      seed: 7,
      options: { agents: 1, manualAgents: 0, handoffs: 1, apis: 2, workers: 3, durationSec: 1, deadlineSec: 10, starved: 1 },
      starvation: { busyProcesses: 2, cpus: 2, seconds: 40 },
      maxLoadAverage: 9.5,
      seconds: { setup: 1, chaos: 1, lastFaultToFinal: 1, total: 3 },
      traffic: {
        sends: 1,
        answered: 1,
        sendRetries: 0,
        writes: 0,
        turnsLanded: 0,
        workerProcessesStarted: 3,
        claims: { claims: 0, heartbeats: 0, returns: 0, abandoned: 0, lost: 0, packets: 0 },
        reads: { reads: 0, ok: 0, unavailable: 0, unanswered: 0 },
      },
      faults: summarizeFaults([
        { kind: 'proxy_drop', at: T, endedAt: T, targets: ['api-1'], server: 'redis', durationMs: 0, detail: '3 connections broken' },
      ]),
      unexpectedExits: [{ slot: 'worker-2', at: T, code: 1, signal: null, wasServing: false, reason: 'cannot start: Postgres failed' }],
      invariants,
      uncertain: summarizeUncertain([], [], [], () => 'unknown'),
      logs: '/tmp/logs',
    };
    const text = renderChaosReport(result);
    expect(text).toMatch(/every handoff in a final state\s+1\s/);
    expect(text).toContain('FAIL: 1 invariant(s) broken; never injected: worker SIGKILL + restart');
    expect(text).toMatch(/proxy drop\s+1\s+3 connections broken/);
    expect(text).toContain('process logs: /tmp/logs');
    expect(text).toContain('1 x worker at start-up (exit 1): cannot start: Postgres failed');
    expect(text).toContain('starved: 2 busy processes on 2 CPUs for 40 s; load average up to 9.5');
  });
});
