import { briefError, type Logger } from '../logging/create-logger.ts';

/**
 * A process's view of its way to Postgres, fed by its pool (open-database.ts): a new connection
 * that fails, or an open one that dies, is `failed`; a new connection that succeeds is
 * `connected`. The first failure logs one warning (`postgres connection lost`); the first
 * connection after it logs `postgres connection restored` (with `downMs`). The failures in
 * between, and the requests and reconciler steps they fail (database_unavailable), log nothing
 * above debug. The pool connects again on the next statement; the callers back off (the
 * reconciler's next tick, a 503 with Retry-After).
 */
export class DatabaseLink {
  private lostAt: number | undefined;

  constructor(private readonly logger: Logger) {}

  /** Whether Postgres could not be reached since the last connection that succeeded. */
  get down(): boolean {
    return this.lostAt !== undefined;
  }

  failed(err: unknown): void {
    this.logger.debug({ err }, 'postgres connection error');
    if (this.lostAt !== undefined) return;
    this.lostAt = Date.now();
    this.logger.warn({ err: briefError(err) }, 'postgres connection lost: connecting again on the next statement');
  }

  connected(): void {
    if (this.lostAt === undefined) return;
    this.logger.info({ downMs: Date.now() - this.lostAt }, 'postgres connection restored');
    this.lostAt = undefined;
  }
}
