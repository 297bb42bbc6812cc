import { Type, type Static } from 'typebox';
import { Compile } from 'typebox/compile';
import { POOL_PATTERN } from '../domain/ids.ts';

/** The one job kind on a delivery queue: "look at this agent's queue in Postgres now". */
export const DISPATCH_JOB_NAME = 'dispatch';


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
    cause: Type.Union([Type.Literal('sent'), Type.Literal('after_turn'), Type.Literal('lock_retry'), Type.Literal('due'), Type.Literal('sweep')]),
    /** The handoff whose commit caused the job, when there is one. Informational: dispatch asks Postgres what is next. */
    handoffId: Type.Optional(Type.String({ format: 'uuid' })),
  },
  { additionalProperties: false },
);

export type DispatchJob = Static<typeof DispatchJobSchema>;

const checker = Compile(DispatchJobSchema);

/** Validates a job's data; throws with the first problem when it is not a DispatchJob. */
export function parseDispatchJob(data: unknown): DispatchJob {
  if (checker.Check(data)) return data;
  const first = [...checker.Errors(data)][0];
  throw new Error(`invalid dispatch job: ${first ? `${first.instancePath || '/'} ${first.message}` : 'unknown'}`);
}

/**
 * The routing part of a job for a handoff's recipient: agent, provider and (when named) pool,
 * as snapshotted on the handoff. Every producer builds its jobs from this, so none forgets the pool.
 */
export function routeOf(h: { readonly recipientId: string; readonly provider: string; readonly pool: string }): Pick<DispatchJob, 'agentId' | 'provider' | 'pool'> {
  return h.pool === '' ? { agentId: h.recipientId, provider: h.provider } : { agentId: h.recipientId, provider: h.provider, pool: h.pool };
}
