import { nameOf, type DemoSettled, type DemoTransition } from './demo-relay.ts';

/**
 * What `baton demo` prints about the relay. Text: one line per handoff when it settles (time,
 * id, from -> to, title, outcome and how long it took), a summary line when `summary()` is
 * called, and with `verbose` every transition too, each with its handoff's id. JSON (`emit`):
 * one object per transition, settlement and summary, whatever `verbose` says.
 */
export class DemoReport {
  private readonly outcomes = new Map<string, number>();

  constructor(
    private readonly opts: {
      readonly verbose: boolean;
      /** A text line (a no-op with --json). */
      readonly out: (line: string) => void;
      /** `--json`: one object per line instead of the text lines. */
      readonly emit?: ((record: Record<string, unknown>) => void) | undefined;
    },
  ) {}

  /** The column titles, printed once before the first handoff line. */
  header(): void {
    this.opts.out(row('time', 'handoff', 'from -> to', 'title', this.opts.verbose ? 'transition, or outcome when settled' : 'outcome'));
  }

  transition(t: DemoTransition): void {
    const { emit, out, verbose } = this.opts;
    if (emit)
      emit({
        type: 'transition',
        at: t.at,
        handoff: t.handoff,
        from: t.from,
        to: t.to,
        title: t.title,
        event: t.event,
        state: t.state,
        work: t.work,
      });
    else if (verbose) out(row(clock(t.at), t.handoff, who(t), `"${t.title}"`, move(t)));
  }

  settled(s: DemoSettled): void {
    this.outcomes.set(s.outcome, (this.outcomes.get(s.outcome) ?? 0) + 1);
    const { emit, out } = this.opts;
    if (emit)
      emit({
        type: 'settled',
        at: s.settledAt,
        handoff: s.handoff,
        from: s.from,
        to: s.to,
        title: s.title,
        outcome: s.outcome,
        tookMs: s.tookMs,
        busy: s.busy,
        detail: s.detail,
      });
    else out(row(clock(s.settledAt), s.handoff, who(s), `"${s.title}"`, outcomeText(s)));
  }

  /** The running summary: handoffs settled so far by outcome, and those in flight. */
  summary(counts: { sent: number; inFlight: number }): void {
    this.opts.emit?.({ type: 'summary', ...this.figures(counts) });
    this.opts.out(`${' '.repeat(10)}-- ${this.settledText()}, in flight ${counts.inFlight}`);
  }

  /** The last word, when the demo stops: everything it sent in `elapsedMs`. */
  final(counts: { sent: number; inFlight: number }, elapsedMs: number): void {
    this.opts.emit?.({ type: 'stopping', ...this.figures(counts), elapsedMs });
    this.opts.out(
      `demo summary: ${counts.sent} handoffs sent in ${duration(elapsedMs)}; ${this.settledText()}; ${counts.inFlight} still in flight at the stop`,
    );
  }

  /** The figures of `summary` and `stopping` (`returned` stays for readers of the older records). */
  private figures(counts: { sent: number; inFlight: number }): Record<string, unknown> {
    const outcomes = Object.fromEntries(this.outcomes);
    return {
      sent: counts.sent,
      returned: this.outcomes.get('RETURNED') ?? 0,
      settled: this.settledCount(),
      outcomes,
      inFlight: counts.inFlight,
    };
  }

  private settledCount(): number {
    return [...this.outcomes.values()].reduce((a, b) => a + b, 0);
  }

  private settledText(): string {
    const parts = [...this.outcomes].sort(([, a], [, b]) => b - a).map(([outcome, n]) => `${outcome} ${n}`);
    return `settled ${this.settledCount()}${parts.length > 0 ? ` (${parts.join(', ')})` : ''}`;
  }
}

const ID_WIDTH = 36;
const WHO_WIDTH = 20;
const TITLE_WIDTH = 40;

function row(time: string, id: string, whoText: string, title: string, last: string): string {
  return `${time.padEnd(8)}  ${id.padEnd(ID_WIDTH)}  ${whoText.padEnd(WHO_WIDTH)}  ${title.padEnd(TITLE_WIDTH)}  ${last}`;
}

const who = (h: { from: string; to: string }) => `${nameOf(h.from)} -> ${nameOf(h.to)}`;

const two = (n: number) => String(n).padStart(2, '0');

/** Local wall-clock time of an ISO timestamp: `14:05:09`. */
function clock(iso: string): string {
  const d = new Date(iso);
  return `${two(d.getHours())}:${two(d.getMinutes())}:${two(d.getSeconds())}`;
}

/** `0.8 s`, `12 s`, `2 min 05 s`. */
function duration(ms: number): string {
  const s = Math.max(0, ms) / 1000;
  if (s < 10) return `${s.toFixed(1)} s`;
  if (s < 60) return `${Math.round(s)} s`;
  const whole = Math.round(s);
  return `${Math.floor(whole / 60)} min ${two(whole % 60)} s`;
}

/**
 * A delivery move (`SENDING -> ACCEPTED`), with the work's move beside it when both changed; a
 * work event that leaves the delivery state as it was shows the work's move only (never `RETURNED -> RETURNED`).
 */
function move(t: DemoTransition): string {
  const work = t.work ? `work ${t.work.from ?? 'new'} -> ${t.work.to}` : '';
  if (t.state.from === t.state.to && work) return `${work} (${t.event})`;
  const delivery = `${(t.state.from ?? 'new').padEnd(8)} -> ${t.state.to}`;
  return work ? `${delivery}  (${work})` : delivery;
}

/** `RETURNED in 1.4 s`, `RETURNED in 3.1 s (waited while busy: 1x)`, `FAILED in 12 s: <why>`. */
function outcomeText(s: DemoSettled): string {
  const busy = s.busy > 0 ? ` (waited while busy: ${s.busy}x)` : '';
  const why = s.detail ? `: ${s.detail.length > 80 ? `${s.detail.slice(0, 79)}…` : s.detail}` : '';
  return `${s.outcome} in ${duration(s.tookMs)}${busy}${why}`;
}
