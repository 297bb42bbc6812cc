import cliProgress from 'cli-progress';

/**
 * Progress of long work (the benchmark, `watch <id>`): a cli-progress bar redrawn on a terminal
 * (`stream`), and one plain line per step elsewhere (a pipe or a log file gets no control
 * characters).
 */
export class Progress {
  private done = 0;
  private bar: cliProgress.SingleBar | undefined;
  constructor(
    private readonly total: number,
    private readonly enabled: boolean,
    private readonly tty: boolean,
    private readonly write: (s: string) => void,
    private readonly stream: NodeJS.WritableStream = process.stderr,
  ) {}

  step(label: string): void {
    this.done = Math.min(this.total, this.done + 1);
    this.show(label);
  }

  /** Jumps to step `done` (never backwards past 0, never beyond the total). */
  set(done: number, label: string): void {
    this.done = Math.max(0, Math.min(this.total, done));
    this.show(label);
  }

  show(label: string): void {
    if (!this.enabled) return;
    if (!this.tty) {
      this.write(`[${this.done}/${this.total}] ${label}\n`);
      return;
    }
    if (!this.bar) {
      this.bar = new cliProgress.SingleBar(
        { stream: this.stream, format: '{bar} {value}/{total} {label}', hideCursor: true, clearOnComplete: true, barsize: 24 },
        cliProgress.Presets.shades_classic,
      );
      this.bar.start(this.total, this.done, { label });
    } else this.bar.update(this.done, { label });
  }

  end(): void {
    this.bar?.stop();
    this.bar = undefined;
  }
}
