import { Type, type Static, type TSchema } from 'typebox';
import { Compile } from 'typebox/compile';
import { POOL_PATTERN } from '../domain/ids.ts';

/** A job for one agent: "look at this agent's queue in Postgres" (when it is due: a delayed job). */
export const DISPATCH_JOB_NAME = 'dispatch';

/**
 * A job for the queue: "take the agents in this queue's wake-up set and look at each one's
 * queue". Every immediate wake-up goes to the set (DeliveryQueues), so one job serves many agents.
 */
export const WAKE_JOB_NAME = 'wake';

/**
 * A dispatch job's payload, declared once. It names an agent, not a handoff to deliver: the
 * worker that takes the agent's turn lock delivers whatever Postgres says is next, so order
 * and exactly-once never depend on job order or on Redis keeping the job.
 */
export const DispatchJobSchema = Type.Object(
  {
    agentId: Type.String({ format: 'uuid' }),
    provider: Type.String({ minLength: 1, maxLength: 32 }),
    /** The recipient's worker pool; absent for the unnamed pool. Picks the queue, with the provider. */
    pool: Type.Optional(Type.String({ pattern: POOL_PATTERN })),
    /**
     * Why the agent was woken. `sent_behind_turn`: a handoff enrolled while the recipient had a
     * turn in flight (BUSY), for which the API adds no wake-up while the lock is held (see
     * DeliveryQueueOptions.heldLocks); `sent`: one enrolled with no turn in flight.
     */
    cause: Type.Union([
      Type.Literal('wake'),
      Type.Literal('sent'),
      Type.Literal('sent_behind_turn'),
      Type.Literal('after_turn'),
      Type.Literal('lock_retry'),
      Type.Literal('due'),
      Type.Literal('sweep'),
    ]),
    /** The handoff whose commit caused the job, when there is one. Informational: dispatch asks Postgres what is next. */
    handoffId: Type.Optional(Type.String({ format: 'uuid' })),
  },
  { additionalProperties: false },
);

export type DispatchJob = Static<typeof DispatchJobSchema>;

/** A validator that throws with the first problem, naming what it expected. */
function parserFor<T extends TSchema>(schema: T, what: string): (data: unknown) => Static<T> {
  const checker = Compile(schema);
  return (data) => {
    if (checker.Check(data)) return data;
    const first = [...checker.Errors(data)][0];
    throw new Error(`invalid ${what}: ${first ? `${first.instancePath || '/'} ${first.message}` : 'unknown'}`);
  };
}

/** Validates a job's data; throws with the first problem when it is not a DispatchJob. */
export const parseDispatchJob: (data: unknown) => DispatchJob = parserFor(DispatchJobSchema, 'dispatch job');

/**
 * The routing part of a job for a handoff's recipient: agent, provider and (when named) pool,
 * as snapshotted on the handoff. Every producer builds its jobs from this, so none forgets the pool.
 */
export function routeOf(h: {
  readonly recipientId: string;
  readonly provider: string;
  readonly pool: string;
}): Pick<DispatchJob, 'agentId' | 'provider' | 'pool'> {
  return h.pool === '' ? { agentId: h.recipientId, provider: h.provider } : { agentId: h.recipientId, provider: h.provider, pool: h.pool };
}

/** A wake job's payload: the queue's provider and pool (the worker knows the queue it consumes). */
export const WakeJobSchema = Type.Object(
  {
    provider: Type.String({ minLength: 1, maxLength: 32 }),
    pool: Type.Optional(Type.String({ pattern: POOL_PATTERN })),
  },
  { additionalProperties: false },
);

export type WakeJob = Static<typeof WakeJobSchema>;

/** A queue's route, as a wake job names it: the provider, and the pool when it is named ('' or absent: the unnamed pool). */
export function queueRoute(provider: string, pool: string | undefined): WakeJob {
  return pool === undefined || pool === '' ? { provider } : { provider, pool };
}

/** Validates a wake job's data; throws with the first problem when it is not a WakeJob. */
export const parseWakeJob: (data: unknown) => WakeJob = parserFor(WakeJobSchema, 'wake job');
