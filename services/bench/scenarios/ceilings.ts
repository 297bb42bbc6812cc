import { Queue, Worker } from 'bullmq';
import pg from 'pg';
import { Redis } from 'ioredis';
import { round } from '../measure.ts';
import type { BenchEnvironment } from '../bench-environment.ts';

export interface Ceilings {
  postgres1: number;
  postgres8: number;
  bullmq: number;
}

/**
 * What Postgres and BullMQ can do on this machine right now, measured the same way as Baton's
 * own figures (which are reported as ratios of these):
 * - Postgres: a handoff-sized row plus its event row, inserted in one transaction (one
 *   statement, one round trip) through `pg`, at 1 and 8 connections;
 * - BullMQ: adding and processing no-op jobs (bulk adds, 64 concurrent processors).
 */
export async function measureCeilings(env: BenchEnvironment, opts: { seconds: number; jobs: number }): Promise<Ceilings> {
  await env.pool.query(`
    CREATE TABLE IF NOT EXISTS bench_raw_handoffs (
      id uuid PRIMARY KEY, seq bigserial UNIQUE, sender_id uuid NOT NULL, recipient_id uuid NOT NULL,
      title text, message text NOT NULL, content_hash text NOT NULL, state text NOT NULL,
      revision int NOT NULL DEFAULT 0, created_at timestamptz(3) NOT NULL, updated_at timestamptz(3) NOT NULL);
    CREATE INDEX IF NOT EXISTS bench_raw_handoffs_recipient ON bench_raw_handoffs (recipient_id, state, seq);
    CREATE TABLE IF NOT EXISTS bench_raw_events (
      id bigserial PRIMARY KEY, handoff_id uuid NOT NULL REFERENCES bench_raw_handoffs (id), from_state text, to_state text NOT NULL,
      event text NOT NULL, actor text, revision int NOT NULL, created_at timestamptz(3) NOT NULL);
    CREATE INDEX IF NOT EXISTS bench_raw_events_handoff ON bench_raw_events (handoff_id, id);`);
  const postgres1 = await rawPostgres(env.databaseUrl, 1, opts.seconds);
  const postgres8 = await rawPostgres(env.databaseUrl, 8, opts.seconds);
  await env.pool.query('DROP TABLE bench_raw_events; DROP TABLE bench_raw_handoffs;');
  const bullmq = await rawBullmq(env, opts.jobs);
  return { postgres1, postgres8, bullmq };
}

async function rawPostgres(url: string, connections: number, seconds: number): Promise<number> {
  const pool = new pg.Pool({ connectionString: url, max: connections });
  const message = 'x'.repeat(400);
  const sender = '00000000-0000-7000-8000-0000000000aa';
  const recipient = '00000000-0000-7000-8000-0000000000bb';
  const sql = `WITH h AS (
      INSERT INTO bench_raw_handoffs (id, sender_id, recipient_id, title, message, content_hash, state, created_at, updated_at)
      VALUES (gen_random_uuid(), $1, $2, 'bench title', $3, md5($3), 'WAITING', now(), now()) RETURNING id, state, revision, created_at)
    INSERT INTO bench_raw_events (handoff_id, from_state, to_state, event, actor, revision, created_at)
    SELECT id, NULL, state, 'enrolled', 'sender', revision, created_at FROM h`;
  // Warm up the connections first.
  await Promise.all(Array.from({ length: connections }, () => pool.query('SELECT 1')));
  let count = 0;
  const deadline = performance.now() + seconds * 1000;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: connections }, async () => {
      while (performance.now() < deadline) {
        await pool.query(sql, [sender, recipient, message]);
        count++;
      }
    }),
  );
  const elapsed = (performance.now() - started) / 1000;
  await pool.end();
  return round(count / elapsed, 0);
}

async function rawBullmq(env: BenchEnvironment, jobs: number): Promise<number> {
  const connection = new Redis(env.redisUrl, { maxRetriesPerRequest: null });
  const name = '{bench-raw}';
  const queue = new Queue(name, { connection, prefix: env.prefix, defaultJobOptions: { removeOnComplete: true } });
  let done = 0;
  let resolveAll: () => void = () => undefined;
  const all = new Promise<void>((r) => (resolveAll = r));
  const worker = new Worker(
    name,
    async () => {
      done++;
      if (done === jobs) resolveAll();
    },
    { connection, prefix: env.prefix, concurrency: 64, autorun: true },
  );
  await worker.waitUntilReady();
  const started = performance.now();
  for (let i = 0; i < jobs; i += 500) {
    await queue.addBulk(Array.from({ length: Math.min(500, jobs - i) }, (_, k) => ({ name: 'noop', data: { i: i + k } })));
  }
  await all;
  const elapsed = (performance.now() - started) / 1000;
  await worker.close();
  await queue.obliterate({ force: true });
  await queue.close();
  connection.disconnect();
  return round(jobs / elapsed, 0);
}
