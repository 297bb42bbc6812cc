/**
 * Delivery states of a handoff. The meaning of each value is documented in
 * prisma/schema.prisma (enum DeliveryState) and libs/handoffs/README.md.
 */
export const DELIVERY_STATES = [
  'WAITING',
  'BUSY',
  'HELD',
  'UNAVAILABLE',
  'OWNER_REJECTED',
  'SENDING',
  'UNCERTAIN',
  'ACCEPTED',
  'RUNNING',
  'RETURNED',
  'FAILED',
  'ACKNOWLEDGED',
  'CANCELLED',
  'DUPLICATE',
] as const;

export type DeliveryState = (typeof DELIVERY_STATES)[number];

/** States a delivery never leaves on its own (a sender may still ask for a revision of RETURNED work). */
export const SETTLED_STATES: ReadonlySet<DeliveryState> = new Set<DeliveryState>([
  'UNAVAILABLE',
  'RETURNED',
  'FAILED',
  'ACKNOWLEDGED',
  'CANCELLED',
  'DUPLICATE',
]);

/** States in which a worker may start a new attempt for the handoff. */
export const DISPATCHABLE_STATES: readonly DeliveryState[] = ['WAITING', 'BUSY', 'OWNER_REJECTED'];

/**
 * States in which a turn may be live and Baton must follow it: the holder of the recipient's
 * turn lock finishes these before starting anything new. (UNCERTAIN is not among them: it is
 * settled by history scans, and a live turn it may have started makes the session say busy.)
 */
export const LIVE_TURN_STATES: readonly DeliveryState[] = ['SENDING', 'ACCEPTED', 'RUNNING'];

/** Every state that still needs work from Baton (the reconciler's sweep set). */
export const OPEN_STATES: readonly DeliveryState[] = DELIVERY_STATES.filter((s) => !SETTLED_STATES.has(s));

export function isDeliveryState(value: unknown): value is DeliveryState {
  return typeof value === 'string' && (DELIVERY_STATES as readonly string[]).includes(value);
}

export function isSettled(state: DeliveryState): boolean {
  return SETTLED_STATES.has(state);
}
