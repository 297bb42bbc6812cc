/**
 * How long Baton waits for Postgres before it answers `database_unavailable` (libs/config:
 * BATON_DB_QUERY_TIMEOUT_MS, BATON_DB_CONNECT_TIMEOUT_MS). A request that reaches a silent
 * Postgres (frozen, partitioned) is answered within connectMs + queryMs.
 */
export interface DatabaseTimeouts {
  /** Longest wait for one statement's reply; Postgres also cancels the statement after it. */
  readonly queryMs: number;
  /** Longest wait for a connection: a new one's handshake, or a free one from the pool. */
  readonly connectMs: number;
}

export const DEFAULT_DATABASE_TIMEOUTS: DatabaseTimeouts = Object.freeze({ queryMs: 5_000, connectMs: 3_000 });
