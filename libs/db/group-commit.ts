import { BatonError } from '../domain/errors.ts';

/**
 * What a call whose deadline passes while its batch is already in Postgres is told:
 * - `answer`: it fails at its deadline with `database_unavailable`, and the statement may still
 *   commit after that answer. Only for calls whose callers are told that a 503 may or may not
 *   have been recorded (a send: docs/ERRORS.md), and that retry safely (an idempotency key).
 * - `wait`: it waits for the statement, which its own timeouts bound (a caller that reads back
 *   after a failure must not do so while the statement may still commit).
 * Either way a call still waiting for a batch when its deadline passes is never sent.
 */
export type InFlightAtDeadline = 'answer' | 'wait';

export interface GroupCommitOptions {
  readonly maxInFlight: number;
  readonly maxBatch: number;
  /** Whether a failed batch's error is about its items (then each is run again alone). */
  readonly isolate: (err: unknown) => boolean;
  /** Each call's deadline, in ms from its submit (absent: none); past it the call fails with `database_unavailable`. */
  readonly deadlineMs?: number | undefined;
  readonly inFlightAtDeadline?: InFlightAtDeadline;
}

/** A call's place: waiting for a batch, in a batch in Postgres, or answered (its promise settled). */
type Stage = 'waiting' | 'sent' | 'answered';

interface Call<I, O> {
  readonly item: I;
  readonly deadline: number;
  stage: Stage;
  timer: NodeJS.Timeout | null;
  resolve: (o: O) => void;
  reject: (err: unknown) => void;
}

/** The error of a call whose deadline passed: `database_unavailable` (503), as for a statement past its timeout. */
export function deadlinePassed(): BatonError {
  return new BatonError('database_unavailable', 'the database did not answer in time; a write may or may not have been recorded');
}

/**
 * Group commit on the client side: calls made while the process already has `maxInFlight`
 * batches in Postgres wait and go together, as one statement, when one of them returns.
 * Below that, a call waits only for the end of the current turn of the event loop (calls of
 * the same turn go together), so a quiet process adds no latency. A statement costs Postgres
 * mostly its commit (and the round trip its process switches), not its rows, so under load
 * many rows per commit is what raises the rate.
 *
 * `run` gets the items of one batch and answers one result per item, in order. When a batch
 * of several fails, each of its items is run again alone, so one bad item fails only its own
 * call (unless `isolate` says the error is not about the items, e.g. Postgres is away).
 *
 * With `deadlineMs`, every call has the deadline its caller has (the database bound, connect +
 * query timeout, from its submit): a call still waiting for a batch then fails at once with
 * `database_unavailable` and is never sent, not in a later batch nor run again alone; a call
 * already in Postgres is answered as `inFlightAtDeadline` says. Without it, a stalled Postgres
 * would make what waits behind `maxInFlight` batches wait one statement timeout per round.
 */
export class GroupCommit<I, O> {
  private pending: Array<Call<I, O>> = [];
  private inFlight = 0;
  private scheduled = false;

  constructor(
    private readonly run: (items: I[]) => Promise<O[]>,
    private readonly opts: GroupCommitOptions,
  ) {}

  submit(item: I): Promise<O> {
    return new Promise<O>((resolve, reject) => {
      const deadlineMs = this.opts.deadlineMs;
      const call: Call<I, O> = {
        item,
        deadline: deadlineMs === undefined ? Infinity : Date.now() + deadlineMs,
        stage: 'waiting',
        timer: null,
        resolve: (o) => this.settle(call, () => resolve(o)),
        reject: (err) => this.settle(call, () => reject(err)),
      };
      if (deadlineMs !== undefined) {
        call.timer = setTimeout(() => this.deadlineOf(call), deadlineMs);
        // A bound, not work: it must not keep a process alive that has nothing else to do.
        call.timer.unref();
      }
      this.pending.push(call);
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => {
          this.scheduled = false;
          this.flush();
        });
      }
    });
  }

  /** Settles a call once: a late result or error of a call already answered is dropped. */
  private settle(call: Call<I, O>, answer: () => void): void {
    if (call.stage === 'answered') return;
    call.stage = 'answered';
    if (call.timer) clearTimeout(call.timer);
    call.timer = null;
    answer();
  }

  /** A waiting call answered here stays in `pending` until the next flush drops it (answered calls are never sent). */
  private deadlineOf(call: Call<I, O>): void {
    if (call.stage === 'waiting' || (call.stage === 'sent' && this.opts.inFlightAtDeadline === 'answer')) call.reject(deadlinePassed());
  }

  /** Calls past their deadline are failed here too: a timer can fire late on a busy event loop. */
  private stillDue(calls: Array<Call<I, O>>): Array<Call<I, O>> {
    const now = Date.now();
    return calls.filter((c) => {
      if (c.stage === 'answered') return false;
      if (c.deadline > now) return true;
      c.reject(deadlinePassed());
      return false;
    });
  }

  private flush(): void {
    this.pending = this.stillDue(this.pending);
    while (this.pending.length > 0 && this.inFlight < this.opts.maxInFlight) {
      const batch = this.pending.splice(0, this.opts.maxBatch);
      for (const c of batch) c.stage = 'sent';
      this.inFlight++;
      void this.send(batch).finally(() => {
        this.inFlight--;
        this.flush();
      });
    }
  }

  private async send(batch: Array<Call<I, O>>): Promise<void> {
    try {
      const out = await this.run(batch.map((b) => b.item));
      batch.forEach((b, i) => b.resolve(out[i]!));
    } catch (err) {
      if (batch.length === 1 || !this.opts.isolate(err)) {
        for (const b of batch) b.reject(err);
        return;
      }
      // Nothing of the failed batch committed: each item is a new write, sent only while its
      // caller still waits for it and its deadline has not passed.
      await Promise.all(this.stillDue(batch).map((b) => this.run([b.item]).then((o) => b.resolve(o[0]!), b.reject)));
    }
  }
}
