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
 */
export class GroupCommit<I, O> {
  private pending: Array<{ item: I; resolve: (o: O) => void; reject: (err: unknown) => void }> = [];
  private inFlight = 0;
  private scheduled = false;

  constructor(
    private readonly run: (items: I[]) => Promise<O[]>,
    private readonly opts: { maxInFlight: number; maxBatch: number; isolate: (err: unknown) => boolean },
  ) {}

  submit(item: I): Promise<O> {
    return new Promise<O>((resolve, reject) => {
      this.pending.push({ item, resolve, reject });
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => {
          this.scheduled = false;
          this.flush();
        });
      }
    });
  }

  private flush(): void {
    while (this.pending.length > 0 && this.inFlight < this.opts.maxInFlight) {
      const batch = this.pending.splice(0, this.opts.maxBatch);
      this.inFlight++;
      void this.send(batch).finally(() => {
        this.inFlight--;
        this.flush();
      });
    }
  }

  private async send(batch: typeof this.pending): Promise<void> {
    try {
      const out = await this.run(batch.map((b) => b.item));
      batch.forEach((b, i) => b.resolve(out[i]!));
    } catch (err) {
      if (batch.length === 1 || !this.opts.isolate(err)) {
        for (const b of batch) b.reject(err);
        return;
      }
      await Promise.all(batch.map((b) => this.run([b.item]).then((o) => b.resolve(o[0]!), b.reject)));
    }
  }
}
