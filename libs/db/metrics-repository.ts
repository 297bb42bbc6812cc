import { LIVE_TURN_STATES, OPEN_STATES } from '../domain/delivery-states.ts';
import type pg from 'pg';
import { stateList } from './handoff-sql/columns.ts';

/** One row of the event log as the metrics read it: what moved, to where, for which provider and pool. */
export interface TransitionRow {
  readonly id: bigint;
  /** 'delivery' for a move of the delivery state, 'work' for a move of the work alone. */
  readonly kind: 'delivery' | 'work';
  readonly state: string;
  /** The recipient's provider at enrollment; null for work addressed to the project. */
  readonly provider: string | null;
  readonly pool: string;
  /** Milliseconds from the send (the handoff's creation) to this transition. */
  readonly sinceSendMs: number;
  /** For an event that ended a turn that ran (TURN_END_EVENTS): its recipient and what its runtime reported. */
  readonly turn?: TurnEndRow;
}

/** A turn's end as the metrics count it: by recipient and model, with its tokens, cost and wall time. */
export interface TurnEndRow {
  readonly agent: string;
  readonly model: string | null;
  readonly inputTokens: number;
  readonly outputTokens: number;
  readonly cacheReadTokens: number;
  readonly cacheWriteTokens: number;
  readonly costUsd: number;
  /** Accepted to finished; null when the attempt has no acceptance time. */
  readonly turnMs: number | null;
}

/** The events that end a turn that ran (the attempt then carries what its runtime reported). */
export const TURN_END_EVENTS = [
  'turn_returned',
  'observed_returned',
  'turn_failed',
  'turn_failed_resend',
  'turn_interrupted',
  'turn_interrupted_resend',
] as const;

export interface PoolCount {
  readonly provider: string;
  readonly pool: string;
  readonly count: number;
}

/**
 * The reads behind /metrics: the event log from a cursor on (transitions and their times since
 * the send), turns in flight, and the agents and queues that exist. Reads only; every query is
 * bounded by an index (the event log by its primary key, handoffs by delivery state).
 */
export class MetricsRepository {
  constructor(private readonly pool: pg.Pool) {}

  /** The newest event id (0 when the log is empty): where a process starts counting. */
  async lastEventId(): Promise<bigint> {
    const { rows } = await this.pool.query<{ id: string | null }>('SELECT max(id)::text AS id FROM handoff_events');
    return BigInt(rows[0]?.id ?? '0');
  }

  /** Events after `afterId`, oldest first, at most `limit`. */
  async transitionsAfter(afterId: bigint, limit: number): Promise<TransitionRow[]> {
    const { rows } = await this.pool.query<{
      id: string;
      work_to_state: string | null;
      from_state: string | null;
      to_state: string;
      provider: string | null;
      pool: string;
      since_ms: number;
      turn_agent: string | null;
      turn_ended: boolean;
      turn_model: string | null;
      input_tokens: number;
      output_tokens: number;
      cache_read_tokens: number;
      cache_write_tokens: number;
      cost_usd: number;
      turn_ms: number | null;
    }>(
      `SELECT e.id::text AS id, e.from_state, e.to_state, e.work_to_state, h.provider, h.pool,
              greatest(0, extract(epoch FROM (e.created_at - h.created_at)) * 1000)::float8 AS since_ms,
              r.handle AS turn_agent, a.id IS NOT NULL AS turn_ended, a.model AS turn_model,
              coalesce(a.input_tokens, 0)::float8 AS input_tokens, coalesce(a.output_tokens, 0)::float8 AS output_tokens,
              coalesce(a.cache_read_tokens, 0)::float8 AS cache_read_tokens, coalesce(a.cache_write_tokens, 0)::float8 AS cache_write_tokens,
              coalesce(a.cost_usd, 0)::float8 AS cost_usd,
              greatest(0, extract(epoch FROM (a.finished_at - a.accepted_at)) * 1000)::float8 AS turn_ms
         FROM handoff_events e JOIN handoffs h ON h.id = e.handoff_id
         LEFT JOIN delivery_attempts a ON a.id = e.attempt_id AND e.event IN (${TURN_END_EVENTS.map((n) => `'${n}'`).join(', ')})
         LEFT JOIN agents r ON r.id = h.recipient_id AND a.id IS NOT NULL
        WHERE e.id > $1 ORDER BY e.id LIMIT $2`,
      [afterId.toString(), limit],
    );
    return rows.map((r) => {
      const turn: TurnEndRow | undefined =
        r.turn_ended && r.turn_agent !== null
          ? {
              agent: r.turn_agent,
              model: r.turn_model,
              inputTokens: r.input_tokens,
              outputTokens: r.output_tokens,
              cacheReadTokens: r.cache_read_tokens,
              cacheWriteTokens: r.cache_write_tokens,
              costUsd: r.cost_usd,
              turnMs: r.turn_ms,
            }
          : undefined;
      // A work move leaves the delivery state where it was and names the work's new state.
      const work = r.work_to_state !== null && r.from_state === r.to_state;
      return {
        id: BigInt(r.id),
        kind: work ? 'work' : 'delivery',
        state: work ? (r.work_to_state as string) : r.to_state,
        provider: r.provider,
        pool: r.pool,
        sinceSendMs: r.since_ms,
        ...(turn ? { turn } : {}),
      };
    });
  }

  /**
   * Handoffs whose turn is live (SENDING, ACCEPTED, RUNNING) per provider and pool. Manual agents
   * have no turns; saying so (and that the handoff has a recipient) lets the scan use
   * handoffs_open_work_idx, whose condition names both.
   */
  async turnsInFlight(): Promise<PoolCount[]> {
    const { rows } = await this.pool.query<{ provider: string; pool: string; n: number }>(
      `SELECT provider::text AS provider, pool, count(*)::int AS n FROM handoffs
        WHERE delivery_state IN (${stateList(LIVE_TURN_STATES)}) AND recipient_id IS NOT NULL AND provider <> 'manual' GROUP BY 1, 2`,
    );
    return rows.map((r) => ({ provider: r.provider, pool: r.pool, count: r.n }));
  }

  /** The provider and pool of every registered agent (where delivery queues can have jobs). */
  async providerPools(): Promise<Array<{ provider: string; pool: string }>> {
    const { rows } = await this.pool.query<{ provider: string; pool: string }>(
      `SELECT DISTINCT provider::text AS provider, pool FROM agents WHERE removed_at IS NULL AND provider::text <> 'manual'`,
    );
    return rows;
  }

  /** Agents with open handoffs (the ones whose turn lock may be held), with their provider and pool. */
  async agentsWithOpenWork(limit: number): Promise<Array<{ agentId: string; provider: string; pool: string }>> {
    const { rows } = await this.pool.query<{ id: string; provider: string; pool: string }>(
      `SELECT a.id, a.provider::text AS provider, a.pool FROM agents a
        WHERE a.removed_at IS NULL AND EXISTS (SELECT 1 FROM handoffs h WHERE h.recipient_id = a.id AND h.delivery_state = ANY($1::delivery_state[]))
        LIMIT $2`,
      [OPEN_STATES, limit],
    );
    return rows.map((r) => ({ agentId: r.id, provider: r.provider, pool: r.pool }));
  }
}
