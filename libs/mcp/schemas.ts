import { z } from 'zod';
import { FACT_KINDS } from '../domain/context-packet.ts';
import { DELIVERY_STATES } from '../domain/delivery-states.ts';
import { HANDLE_PATTERN } from '../domain/ids.ts';
import { LIMITS } from '../domain/limits.ts';

/**
 * Zod pieces the tools share. Limits come from libs/domain/limits.ts, as the API's own schemas'
 * do, so a call the API would refuse as too long is refused here first, as malformed.
 * Output schemas list what Baton guarantees and let further fields through (the API may add).
 */

export const HandoffId = z.uuid().describe('handoff id (a UUID)');
export const SessionId = z.uuid().describe('tracked session id (a UUID)');
export const FactId = z.uuid().describe('fact id (a UUID)');
export const Handle = z.string().regex(new RegExp(HANDLE_PATTERN)).max(LIMITS.handle);
export const Text = (max: number, what: string) => z.string().min(1).max(max).describe(what);
export const FactKind = z.enum(FACT_KINDS);
export const LeaseSeconds = z
  .number()
  .int()
  .min(1)
  .max(LIMITS.leaseSecondsMax)
  .describe(`how long the claim lives without a heartbeat, in seconds (default ${LIMITS.leaseSecondsDefault})`);

const nullableString = z.string().nullable();
const timestamp = z.string();
const nullableTimestamp = timestamp.nullable();

export const WorkOut = z.looseObject({
  state: z.string(),
  attempt: z.number().int(),
  revision: z.number().int(),
  claimedBy: nullableString,
  leaseExpiresAt: nullableTimestamp,
  returnOutcome: nullableString,
  resolution: nullableString,
  note: nullableString,
  resultFactIds: z.array(z.string()),
  returnedAt: nullableTimestamp,
});

export const HandoffOut = z.looseObject({
  id: z.string(),
  from: z.string(),
  to: nullableString.describe('the recipient; null for unowned work sent to @project, and for a role handoff not bound yet'),
  toRole: nullableString.optional().describe('the role it was sent to (@role:<name>), bound to one of its agents at dispatch time'),
  title: nullableString,
  message: z.string(),
  focus: nullableString,
  doneWhen: nullableString,
  context: z.looseObject({ summary: nullableString, openQuestions: z.array(z.string()), nextSteps: z.array(z.string()) }),
  dueAt: nullableTimestamp,
  deliveryState: z.enum(DELIVERY_STATES),
  workState: nullableString,
  work: WorkOut.nullable(),
  sessionId: nullableString,
  detail: nullableString,
  attemptCount: z.number().int(),
  result: z.looseObject({ summary: nullableString, output: z.unknown() }).nullable(),
  createdAt: timestamp,
  updatedAt: timestamp,
});

export const EventOut = z.looseObject({
  seq: z.string(),
  from: nullableString,
  to: z.string(),
  workFrom: nullableString,
  workTo: nullableString,
  event: z.string(),
  actor: z.looseObject({ kind: z.string(), id: nullableString, tokenId: nullableString }),
  reason: nullableString,
  at: timestamp,
});

export const AttemptOut = z.looseObject({
  number: z.number().int(),
  status: z.string(),
  error: nullableString,
  startedAt: timestamp,
  acceptedAt: nullableTimestamp,
  finishedAt: nullableTimestamp,
});

export const PacketOut = z.looseObject({
  text: z.string(),
  factIds: z.array(z.string()),
  omittedFacts: z.number().int(),
  truncated: z.boolean(),
});

export const FactOut = z.looseObject({
  id: z.string(),
  kind: z.string(),
  text: z.string(),
  author: z.string(),
  supersedes: nullableString,
  supersededBy: nullableString,
  createdAt: timestamp,
});

export const SessionOut = z.looseObject({ id: z.string(), title: z.string(), summary: nullableString, createdAt: timestamp });

export type HandoffJson = z.infer<typeof HandoffOut>;
