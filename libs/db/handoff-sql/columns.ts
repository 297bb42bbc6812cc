import type { DeliveryState } from '../../domain/delivery-states.ts';
import type { AttemptRecord, EventRecord, HandoffRecord } from '../records.ts';

/**
 * The one source of the column lists the handoff statements select: each list names the fields
 * of its record (so the compiler holds it to the record: a field missing from a list is an
 * error), and a field's column is its snake_case (`recipientGeneration` → `recipient_generation`),
 * which is the `@map` prisma/schema.prisma gives it. test/unit/sql-columns.test.ts holds each
 * list against the schema's model (every column exists under that field's name, and every
 * scalar field of the model is selected or named in `LEFT_OUT`). The lists are broken into
 * lines as the statements print them, so a statement's text stays byte for byte what it was.
 */

/** Each line of a list, with every key of `R` somewhere in it (a compile error names one that is not). */
type FieldLines<R> = ReadonlyArray<ReadonlyArray<keyof R & string>>;
type Covering<R, L extends FieldLines<R>> = [Exclude<keyof R, L[number][number]>] extends [never]
  ? L
  : { missingFields: Exclude<keyof R, L[number][number]> };

function fieldsOf<R>() {
  return <const L extends FieldLines<R>>(lines: L & Covering<R, L>): L => lines;
}

/** The column a field is stored in. */
export const columnOf = (field: string): string => field.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

/** One field as a select item: `alias.column`, named for the field when the two differ. */
function selectItem(alias: string, field: string): string {
  const column = columnOf(field);
  const qualified = alias ? `${alias}.${column}` : column;
  return column === field ? qualified : `${qualified} AS "${field}"`;
}

/** A list's select items, its lines joined by `,` and `lineBreak`. */
function selectList(lines: ReadonlyArray<readonly string[]>, alias: string, lineBreak: string): string {
  return lines.map((line) => line.map((field) => selectItem(alias, field)).join(', ')).join(`,${lineBreak}`);
}

export const HANDOFF_FIELDS = fieldsOf<HandoffRecord>()([
  ['id', 'seq', 'projectId', 'senderId'],
  ['recipientId', 'recipientGeneration'],
  ['provider', 'pool', 'deliveryTarget', 'sessionId'],
  ['title', 'message', 'focus', 'doneWhen'],
  ['contextSummary', 'openQuestions'],
  ['nextSteps', 'dueAt', 'idempotencyKey'],
  ['contentHash', 'duplicateOfId'],
  ['deliveryState', 'deliveryDetail', 'revision'],
  ['attemptCount', 'refusals', 'errorResends'],
  ['interruptResends', 'notBefore'],
  ['workState', 'reminderSentAt'],
  ['workRevision', 'workAttempt', 'claimToken'],
  ['claimedById', 'leaseExpiresAt', 'workResolution'],
  ['closeNote', 'returnOutcome', 'resultFactIds'],
  ['returnedAt', 'createdByTokenId'],
  ['resultSummary', 'result'],
  ['createdAt', 'updatedAt', 'settledAt'],
  ['recipientRole', 'routedAt'],
]);

export const ATTEMPT_FIELDS = fieldsOf<AttemptRecord>()([
  ['id', 'handoffId', 'number', 'requestId', 'status', 'workerId'],
  ['deliveryTarget', 'error', 'absentScans', 'startedAt'],
  ['acceptedAt', 'finishedAt'],
]);

export const EVENT_FIELDS = fieldsOf<EventRecord>()([
  ['id', 'handoffId', 'fromState', 'toState', 'workFromState'],
  ['workToState', 'event'],
  ['actorKind', 'actorId', 'tokenId', 'reason', 'detail', 'revision', 'attemptId'],
  ['createdAt'],
]);

/**
 * Scalar fields of a model no statement here selects, with why (the schema test requires every
 * other one to be in its list).
 */
export const LEFT_OUT: Readonly<Record<'Handoff' | 'DeliveryAttempt' | 'HandoffEvent', readonly string[]>> = {
  /** The duplicate guard's key: written by enrollment, cleared by a transition's patch, never read back. */
  Handoff: ['inProgressKey'],
  /**
   * The fence is checked in the reservation statement; the scan bookkeeping by the UNCERTAIN scans
   * (uncertain-due.ts); the usage a turn's runtime reported by turn accounting (usage-repository.ts).
   */
  DeliveryAttempt: [
    'fence',
    'firstAbsentAt',
    'lastObservedAt',
    'model',
    'inputTokens',
    'outputTokens',
    'cacheReadTokens',
    'cacheWriteTokens',
    'costUsd',
  ],
  HandoffEvent: [],
};

/** The HandoffRecord columns of a handoffs row aliased `alias`, for any statement that returns one. */
export const handoffColumns = (alias: string): string => `\n  ${selectList(HANDOFF_FIELDS, alias, '\n  ')}`;

/** The AttemptRecord columns of `delivery_attempts` (unaliased). */
export const ATTEMPT_COLUMNS = selectList(ATTEMPT_FIELDS, '', '\n         ');

/** The EventRecord columns of `handoff_events` (unaliased). */
export const EVENT_COLUMNS = selectList(EVENT_FIELDS, '', '\n         ');

/** A HandoffView: the handoff `h` with its sender's, recipient's and claimant's handles (FROM `VIEW_FROM`). */
export const VIEW_COLUMNS = `${handoffColumns('h')}, s.handle AS "senderHandle", r.handle AS "recipientHandle", c.handle AS "claimedByHandle"`;
export const VIEW_FROM = `handoffs h JOIN agents s ON s.id = h.sender_id LEFT JOIN agents r ON r.id = h.recipient_id LEFT JOIN agents c ON c.id = h.claimed_by_id`;

/**
 * States as SQL literals (`'WAITING', 'BUSY'`), enum values from the code, never from input:
 * with literals the planner can use a partial index whose predicate names them
 * (handoffs_open_work_idx), which an array parameter never proves.
 */
export const stateList = (states: readonly DeliveryState[]): string => states.map((st) => `'${st}'`).join(', ');
