import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrate } from '../../libs/db/migrate.ts';
import { databaseBefore } from '../support/database-before.ts';

/**
 * The migration that binds tokens to an agent generation, run over tokens issued before it:
 * a token of a removed agent, and one issued before its handle was registered again, must come
 * out dead (revoked and of an older generation); a live agent's tokens keep working.
 */
const THIS = '20261130010000_token_generation';
let db: Awaited<ReturnType<typeof databaseBefore>>;
let url: string;
let before: string;

beforeAll(async () => {
  db = await databaseBefore(THIS, 'tokgen');
  url = db.url;
  before = db.migrationsBefore;
});

afterAll(async () => {
  await db?.drop();
});

describe('the token generation migration', () => {
  it('leaves tokens of a removed or since re-registered agent revoked and of an older generation, and live ones live', async () => {
    await migrate(url, before);
    const c = new pg.Client({ connectionString: url });
    await c.connect();
    try {
      const project = (await c.query<{ id: string }>(`SELECT id FROM projects LIMIT 1`)).rows[0]!.id;
      const agent = (id: string, handle: string, generation: number, created: string, updated: string, removed: string | null) =>
        c.query(
          `INSERT INTO agents (id, project_id, handle, display_name, provider, generation, created_at, updated_at, removed_at)
           VALUES ($1, $2, $3, $3, 'manual', $4, $5, $6, $7)`,
          [id, project, handle, generation, created, updated, removed],
        );
      const token = (id: string, agentId: string | null, created: string) =>
        c.query(
          `INSERT INTO agent_tokens (id, project_id, agent_id, name, secret_hash, is_admin, created_at) VALUES ($1::uuid, $2, $3, $1::text, $1::text, $4, $5)`,
          [id, agentId === null ? null : project, agentId, agentId === null, created],
        );
      const ids = {
        steady: '00000000-0000-7000-8000-000000000001',
        revived: '00000000-0000-7000-8000-000000000002',
        removed: '00000000-0000-7000-8000-000000000003',
      };
      await agent(ids.steady, 'steady', 1, '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z', null);
      // Removed at some point and registered again on 1 March.
      await agent(ids.revived, 'revived', 2, '2026-01-01T00:00:00Z', '2026-03-01T00:00:00Z', null);
      await agent(ids.removed, 'removed', 1, '2026-01-01T00:00:00Z', '2026-02-01T00:00:00Z', '2026-02-01T00:00:00Z');
      await token('10000000-0000-7000-8000-000000000001', ids.steady, '2026-01-02T00:00:00Z');
      await token('10000000-0000-7000-8000-000000000002', ids.revived, '2026-01-02T00:00:00Z');
      await token('10000000-0000-7000-8000-000000000003', ids.revived, '2026-03-02T00:00:00Z');
      await token('10000000-0000-7000-8000-000000000004', ids.removed, '2026-01-02T00:00:00Z');
      await token('10000000-0000-7000-8000-000000000005', null, '2026-01-02T00:00:00Z');

      expect(await migrate(url)).toContain(THIS);
      const { rows } = await c.query<{ id: string; generation: number | null; revoked: string | null }>(
        `SELECT id, agent_generation AS generation, to_char(revoked_at AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS revoked FROM agent_tokens ORDER BY id`,
      );
      expect(rows).toEqual([
        { id: '10000000-0000-7000-8000-000000000001', generation: 1, revoked: null },
        { id: '10000000-0000-7000-8000-000000000002', generation: 1, revoked: '2026-03-01' },
        { id: '10000000-0000-7000-8000-000000000003', generation: 2, revoked: null },
        { id: '10000000-0000-7000-8000-000000000004', generation: 1, revoked: '2026-02-01' },
        { id: '10000000-0000-7000-8000-000000000005', generation: null, revoked: null },
      ]);
      // From now on an agent token must name its generation, and an admin token none.
      await expect(token('10000000-0000-7000-8000-000000000006', ids.steady, '2026-04-01T00:00:00Z')).rejects.toThrow(
        /agent_tokens_agent_generation_check/,
      );
    } finally {
      await c.end();
    }
  });
});
