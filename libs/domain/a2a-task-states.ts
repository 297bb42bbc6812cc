import { DELIVERY_STATES, type DeliveryState } from './delivery-states.ts';
import { WORK_STATES, type WorkState } from './work-states.ts';

/**
 * How a handoff reads as an A2A task (protocol 1.0, `TASK_STATE_*`): one ordered table over
 * the delivery state and the work state (null: a plain message, no work), first matching row
 * wins. The A2A gateway (services/api/routes/a2a) answers GetTask, CancelTask and SendMessage
 * with it; docs/API.md shows the same rows (scripts/docs-tables.ts), and a unit test walks
 * every delivery × work state through it.
 */
export const A2A_TASK_STATES = ['submitted', 'working', 'input-required', 'completed', 'failed', 'canceled', 'rejected'] as const;
export type A2aTaskState = (typeof A2A_TASK_STATES)[number];

/** `any`: the row matches every value of that column. */
export interface A2aTaskRule {
  readonly delivery: readonly DeliveryState[] | 'any';
  readonly work: ReadonlyArray<WorkState | null> | 'any';
  readonly state: A2aTaskState;
  /** The task's status message: what the state means for this handoff. */
  readonly note: string;
}

export const A2A_TASK_RULES: readonly A2aTaskRule[] = [
  { delivery: 'any', work: ['cancelled'], state: 'canceled', note: 'the sender cancelled the work' },
  { delivery: 'any', work: ['expired'], state: 'failed', note: 'the work expired before it was returned' },
  {
    delivery: ['UNCERTAIN'],
    work: 'any',
    state: 'working',
    note: 'the outcome is being checked: the turn may have reached the agent, and Baton is looking for it in its session',
  },
  { delivery: ['CANCELLED'], work: 'any', state: 'canceled', note: 'the delivery was cancelled' },
  { delivery: ['FAILED'], work: 'any', state: 'failed', note: "the agent's turn failed" },
  { delivery: ['UNAVAILABLE'], work: 'any', state: 'rejected', note: 'the agent was removed or moved; the handoff is not redirected' },
  { delivery: ['DUPLICATE'], work: 'any', state: 'rejected', note: 'the same content is already in progress; this copy is not delivered' },
  { delivery: 'any', work: ['closed'], state: 'completed', note: 'the work was returned and closed by the sender' },
  {
    delivery: 'any',
    work: ['returned'],
    state: 'input-required',
    note: 'the work was returned with its result: the sender accepts it or asks for a revision',
  },
  { delivery: 'any', work: ['claimed'], state: 'working', note: 'an agent claimed the work' },
  { delivery: ['RETURNED', 'ACKNOWLEDGED'], work: [null], state: 'completed', note: "the agent's turn returned" },
  { delivery: ['WAITING', 'BUSY', 'HELD', 'OWNER_REJECTED'], work: 'any', state: 'submitted', note: 'recorded, waiting for its turn' },
  { delivery: ['SENDING', 'ACCEPTED', 'RUNNING'], work: 'any', state: 'working', note: "the turn is in the agent's session" },
  { delivery: ['RETURNED', 'ACKNOWLEDGED'], work: ['open'], state: 'submitted', note: 'the work waits to be taken up again' },
];

function matches(rule: A2aTaskRule, delivery: DeliveryState, work: WorkState | null): boolean {
  return (rule.delivery === 'any' || rule.delivery.includes(delivery)) && (rule.work === 'any' || rule.work.includes(work));
}

/** The first rule of A2A_TASK_RULES that matches; every pair has one (the unit test proves it). */
export function a2aTaskRule(delivery: DeliveryState, work: WorkState | null): A2aTaskRule {
  const rule = A2A_TASK_RULES.find((r) => matches(r, delivery, work));
  if (!rule) throw new Error(`no A2A task state for delivery ${delivery} and work ${String(work)}`);
  return rule;
}

/** Every (delivery state, work state) pair that reads as A2A state `state`: a list filter that SQL applies exactly. */
export function statePairsOf(state: A2aTaskState): Array<{ delivery: DeliveryState; work: WorkState | null }> {
  return DELIVERY_STATES.flatMap((delivery) =>
    [null, ...WORK_STATES].filter((work) => a2aTaskRule(delivery, work).state === state).map((work) => ({ delivery, work })),
  );
}

/** `input-required` → `TASK_STATE_INPUT_REQUIRED`, the protocol 1.0 spelling. */
export function protocolStateName(state: A2aTaskState): string {
  return `TASK_STATE_${state.replace('-', '_').toUpperCase()}`;
}

/** The rows as docs/API.md shows them (scripts/docs-tables.ts). */
export const A2A_TASK_TABLE_HEADER = '| delivery state | work state | A2A task state | status message |\n| --- | --- | --- | --- |';
export function a2aTaskTableRows(): string[] {
  const list = (v: ReadonlyArray<string | null> | 'any') =>
    v === 'any' ? 'any' : v.map((s) => (s === null ? 'none (a message)' : s)).join(', ');
  return A2A_TASK_RULES.map((r) => `| ${list(r.delivery)} | ${list(r.work)} | \`${protocolStateName(r.state)}\` | ${r.note} |`);
}
