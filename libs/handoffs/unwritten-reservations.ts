import { DELIVERY_WORKER_DEFAULTS } from '../config/component-defaults.ts';

/**
 * What one worker process knows and nobody else can: the request ids it reserved (SENDING
 * committed, or possibly committed) and has NOT handed to an adapter. Only the reserving worker
 * can prove a write never happened; if it dies, this knowledge dies with it and the next lock
 * holder rightly treats the attempt as UNCERTAIN.
 *
 * A request id is added before its reservation is written and removed right before the adapter
 * is called, so "present" always means "never written". Bounded: when full, the oldest entries
 * are forgotten, which only sends those attempts down the conservative UNCERTAIN path.
 */
export class UnwrittenReservations {
  private readonly ids = new Set<string>();

  constructor(private readonly max = DELIVERY_WORKER_DEFAULTS.unwrittenKept) {}

  /** Before the reservation is written. */
  add(requestId: string): void {
    this.ids.add(requestId);
    while (this.ids.size > this.max) {
      const oldest = this.ids.values().next().value;
      if (oldest === undefined) break;
      this.ids.delete(oldest);
    }
  }

  /** True when this process reserved `requestId` and never handed it to an adapter. */
  has(requestId: string): boolean {
    return this.ids.has(requestId);
  }

  /** Right before the adapter is called with `requestId`: from here on it may have been written. */
  delete(requestId: string): void {
    this.ids.delete(requestId);
  }
}
