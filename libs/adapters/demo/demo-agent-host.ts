/**
 * Simulated agents for the demo, tests and the benchmark. A host keeps sessions; each session
 * takes one turn at a time, "works" for `thinkMs`, and returns a result. A session can be told
 * (per agent settings, or per upcoming turn with `script`) to misbehave so every delivery path
 * can be driven. Every turn it receives is recorded with its request id, and every write
 * attempt (also those it answered busy, refused or saw twice) goes into a write log with what
 * was live in the session when it arrived, so tests can count exactly how many writes each
 * handoff caused and prove that no session was ever written to during another turn
 * (`findWriteViolations`).
 */

export const DEMO_BEHAVIORS = [
  /** accept, run, return a result */
  'ok',
  /** accept, run, end in error */
  'fail',
  /** refuse the write (nothing recorded) */
  'refuse',
  /** accept and run forever (until `finish`) */
  'hang',
  /** say busy (nothing recorded) */
  'busy',
  /** accept and run (as the agent's settings say), but the reply to the writer is lost */
  'lose_reply',
  /** the write is lost before it lands: nothing recorded, the writer sees a broken connection */
  'drop',
  /** accept, run, then the turn is interrupted */
  'interrupt',
  /** the session does not exist */
  'gone',
] as const;
export type DemoBehavior = (typeof DEMO_BEHAVIORS)[number];

export interface DemoSettings {
  thinkMs?: number;
  behavior?: DemoBehavior;
  /** Delay the answer to the writer (the turn is already recorded and running). */
  replyDelayMs?: number;
}

export interface DemoTurnInput {
  requestId: string;
  handoffId: string;
  from: string;
  title: string | null;
  message: string;
  /** The context packet the turn carried. */
  packet?: string;
}

export type DemoTurnStatus = 'accepted' | 'running' | 'returned' | 'failed' | 'interrupted';

export interface DemoTurn extends DemoTurnInput {
  session: string;
  status: DemoTurnStatus;
  receivedAt: number;
  finishedAt: number | null;
  summary: string | null;
  error: string | null;
}

export type ReceiveOutcome =
  | { status: 'accepted'; dropReply: boolean; replyDelayMs?: number; turn?: DemoObservation }
  | { status: 'busy' }
  | { status: 'refused'; reason: string }
  | { status: 'gone' }
  | { status: 'dropped' };

export type DemoObservation =
  { found: false; complete: true } | { found: true; status: DemoTurnStatus; summary: string | null; error: string | null };

/** How the host answered one write. */
export type DemoWriteAnswer = 'accepted' | 'busy' | 'refused' | 'gone' | 'dropped' | 'repeated';

/** One write attempt as the session saw it, whatever it answered. */
export interface DemoWrite {
  session: string;
  requestId: string;
  handoffId: string;
  /** Arrival time (ms since the epoch). */
  at: number;
  /** The request id of the turn that was live in the session when the write arrived, or null. */
  liveTurn: string | null;
  answer: DemoWriteAnswer;
}

/** A write that breaks Baton's promise to a session. */
export type DemoWriteViolation =
  { kind: 'overlap'; write: DemoWrite } | { kind: 'repeated_request_id'; requestId: string; writes: DemoWrite[] };

/**
 * What in a write log shows Baton misbehaving: a write that arrived while another turn of the
 * same session was live (whether the session then took it or answered busy: Baton's own lock
 * must keep it from writing at all; asking `isBusy` is not a write and is not logged), and a
 * request id written more than once (a resend Baton must never make).
 */
export function findWriteViolations(writes: readonly DemoWrite[]): DemoWriteViolation[] {
  const out: DemoWriteViolation[] = [];
  const byRequest = new Map<string, DemoWrite[]>();
  for (const w of writes) {
    if (w.liveTurn !== null && w.liveTurn !== w.requestId) out.push({ kind: 'overlap', write: w });
    byRequest.set(w.requestId, [...(byRequest.get(w.requestId) ?? []), w]);
  }
  for (const [requestId, same] of byRequest) if (same.length > 1) out.push({ kind: 'repeated_request_id', requestId, writes: same });
  return out;
}

export interface SessionStats {
  session: string;
  turnsReceived: number;
  /** Writes that arrived while another turn was live in the session (answered busy): must stay 0. */
  overlapAttempts: number;
  /** Writes that reused a request id the session had already received: must stay 0. */
  repeatedRequestIds: number;
  busyAnswers: number;
}

/** The operations the demo adapter needs; the host itself and its HTTP client both provide them. */
export interface DemoHostPort {
  receiveTurn(session: string, turn: DemoTurnInput, settings: DemoSettings): Promise<ReceiveOutcome>;
  observe(session: string, requestId: string): Promise<DemoObservation>;
  /** Resolves when the turn's status differs from `known`, or after `timeoutMs` with the current one. */
  waitForChange(session: string, requestId: string, known: DemoTurnStatus | null, timeoutMs: number): Promise<DemoObservation>;
  isBusy(session: string): Promise<boolean>;
}

const END: ReadonlySet<DemoTurnStatus> = new Set(['returned', 'failed', 'interrupted']);

interface Session {
  name: string;
  active: DemoTurn | null;
  turns: Map<string, DemoTurn>;
  order: string[];
  script: DemoBehavior[];
  stats: SessionStats;
}

export class DemoAgentHost implements DemoHostPort {
  private readonly sessions = new Map<string, Session>();
  private writeLog: DemoWrite[] = [];
  private readonly waiters = new Map<string, Set<() => void>>();
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly defaultThinkMs: number;
  /** Called on every status change; the demo's live view listens here. */
  onTurn: ((turn: DemoTurn) => void) | undefined;

  constructor(opts: { defaultThinkMs?: number } = {}) {
    this.defaultThinkMs = opts.defaultThinkMs ?? 0;
  }

  private session(name: string): Session {
    let s = this.sessions.get(name);
    if (!s) {
      s = {
        name,
        active: null,
        turns: new Map(),
        order: [],
        script: [],
        stats: { session: name, turnsReceived: 0, overlapAttempts: 0, repeatedRequestIds: 0, busyAnswers: 0 },
      };
      this.sessions.set(name, s);
    }
    return s;
  }

  /** Queue behaviours for the session's next turns, in order (then it falls back to its settings). */
  script(session: string, behaviors: readonly DemoBehavior[]): void {
    this.session(session).script.push(...behaviors);
  }

  async receiveTurn(name: string, input: DemoTurnInput, settings: DemoSettings): Promise<ReceiveOutcome> {
    const s = this.session(name);
    const write: DemoWrite = {
      session: name,
      requestId: input.requestId,
      handoffId: input.handoffId,
      at: Date.now(),
      liveTurn: s.active?.requestId ?? null,
      answer: 'accepted',
    };
    this.writeLog.push(write);
    if (s.turns.has(input.requestId)) {
      // The same request id twice is a resend Baton must never make; record it, change nothing.
      write.answer = 'repeated';
      s.stats.repeatedRequestIds++;
      return { status: 'accepted', dropReply: false };
    }
    if (s.active) {
      // A write while a turn is live: refused, and counted (Baton's lock should prevent it).
      write.answer = 'busy';
      s.stats.overlapAttempts++;
      s.stats.busyAnswers++;
      return { status: 'busy' };
    }
    const scripted = s.script.shift();
    const behavior = scripted ?? settings.behavior ?? 'ok';
    if (behavior === 'gone') {
      write.answer = 'gone';
      return { status: 'gone' };
    }
    if (behavior === 'busy') {
      write.answer = 'busy';
      s.stats.busyAnswers++;
      return { status: 'busy' };
    }
    if (behavior === 'refuse') {
      write.answer = 'refused';
      return { status: 'refused', reason: `${name} refused the turn` };
    }
    if (behavior === 'drop') {
      write.answer = 'dropped';
      return { status: 'dropped' };
    }
    const turn: DemoTurn = {
      ...input,
      session: name,
      status: 'accepted',
      receivedAt: write.at,
      finishedAt: null,
      summary: null,
      error: null,
    };
    s.turns.set(input.requestId, turn);
    s.order.push(input.requestId);
    s.stats.turnsReceived++;
    s.active = turn;
    this.changed(turn);
    const thinkMs = Math.max(0, Number(settings.thinkMs ?? this.defaultThinkMs) || 0);
    // A lost reply is about the writer's connection; the turn itself runs as the agent's
    // settings say (so 'lose_reply' can be combined with 'fail', 'hang', ...).
    const outcome =
      behavior === 'lose_reply' ? (settings.behavior && settings.behavior !== 'lose_reply' ? settings.behavior : 'ok') : behavior;
    const finish = () => {
      if (outcome === 'fail') this.end(s, turn, 'failed', null, `${name} hit an error while working`);
      else if (outcome === 'interrupt') this.end(s, turn, 'interrupted', null, `${name}'s turn was interrupted`);
      else this.end(s, turn, 'returned', summarize(name, input), null);
    };
    const replyDelayMs = Math.max(0, Number(settings.replyDelayMs ?? 0) || 0);
    if (thinkMs === 0 && outcome !== 'hang') {
      // A zero-think agent (benchmarks) runs and ends its turn before it answers the write.
      this.setStatus(turn, 'running');
      finish();
      const seen = await this.observe(name, input.requestId);
      return { status: 'accepted', dropReply: behavior === 'lose_reply', turn: seen, ...(replyDelayMs > 0 ? { replyDelayMs } : {}) };
    }
    this.later(0, () => {
      this.setStatus(turn, 'running');
      if (outcome === 'hang') return;
      this.later(thinkMs, finish);
    });
    return { status: 'accepted', dropReply: behavior === 'lose_reply', ...(replyDelayMs > 0 ? { replyDelayMs } : {}) };
  }

  /** Ends a turn by hand (for 'hang'). Returns false when the turn is unknown or already over. */
  finish(session: string, requestId: string, status: 'returned' | 'failed' | 'interrupted' = 'returned'): boolean {
    const s = this.sessions.get(session);
    const turn = s?.turns.get(requestId);
    if (!s || !turn || END.has(turn.status)) return false;
    this.end(
      s,
      turn,
      status,
      status === 'returned' ? summarize(session, turn) : null,
      status === 'returned' ? null : `${session}: ${status}`,
    );
    return true;
  }

  async observe(session: string, requestId: string): Promise<DemoObservation> {
    const turn = this.sessions.get(session)?.turns.get(requestId);
    return turn ? { found: true, status: turn.status, summary: turn.summary, error: turn.error } : { found: false, complete: true };
  }

  async waitForChange(session: string, requestId: string, known: DemoTurnStatus | null, timeoutMs: number): Promise<DemoObservation> {
    const current = await this.observe(session, requestId);
    if ((current.found ? current.status : null) !== known || timeoutMs <= 0) return current;
    const key = `${session}\u0000${requestId}`;
    await new Promise<void>((resolve) => {
      const set = this.waiters.get(key) ?? new Set();
      const done = () => {
        clearTimeout(timer);
        set.delete(done);
        if (set.size === 0) this.waiters.delete(key);
        resolve();
      };
      const timer = setTimeout(done, timeoutMs);
      set.add(done);
      this.waiters.set(key, set);
    });
    return this.observe(session, requestId);
  }

  async isBusy(session: string): Promise<boolean> {
    return this.sessions.get(session)?.active != null;
  }

  /** Every turn the session received, in arrival order. */
  history(session: string): DemoTurn[] {
    const s = this.sessions.get(session);
    return s ? s.order.map((id) => s.turns.get(id)).filter((t): t is DemoTurn => t !== undefined) : [];
  }

  /** Every write attempt, in arrival order (of one session when named), whatever the answer. */
  writes(session?: string): DemoWrite[] {
    return this.writeLog.filter((w) => session === undefined || w.session === session).map((w) => ({ ...w }));
  }

  stats(): SessionStats[] {
    return [...this.sessions.values()].map((s) => ({ ...s.stats }));
  }

  /** Writes per handoff id over all sessions (each entry is one turn that landed). */
  writesByHandoff(): Map<string, string[]> {
    const out = new Map<string, string[]>();
    for (const s of this.sessions.values()) {
      for (const id of s.order) {
        const t = s.turns.get(id);
        if (!t) continue;
        out.set(t.handoffId, [...(out.get(t.handoffId) ?? []), t.requestId]);
      }
    }
    return out;
  }

  /** Forgets every session (between benchmark scenarios). */
  reset(): void {
    this.close();
    this.sessions.clear();
    this.writeLog = [];
  }

  /** Stops every timer; live turns stay as they are. */
  close(): void {
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    for (const set of this.waiters.values()) for (const w of [...set]) w();
  }

  private later(ms: number, fn: () => void): void {
    if (ms <= 0) {
      setImmediate(fn);
      return;
    }
    const t = setTimeout(() => {
      this.timers.delete(t);
      fn();
    }, ms);
    this.timers.add(t);
  }

  private setStatus(turn: DemoTurn, status: DemoTurnStatus): void {
    if (END.has(turn.status)) return;
    turn.status = status;
    this.changed(turn);
  }

  private end(s: Session, turn: DemoTurn, status: DemoTurnStatus, summary: string | null, error: string | null): void {
    if (END.has(turn.status)) return;
    turn.status = status;
    turn.summary = summary;
    turn.error = error;
    turn.finishedAt = Date.now();
    if (s.active === turn) s.active = null;
    this.changed(turn);
  }

  private changed(turn: DemoTurn): void {
    const set = this.waiters.get(`${turn.session}\u0000${turn.requestId}`);
    if (set) for (const w of [...set]) w();
    this.onTurn?.(turn);
  }
}

function summarize(session: string, turn: { title: string | null; message: string }): string {
  const what = turn.title ?? turn.message.slice(0, 60);
  return `${session} finished: ${what}`;
}
