import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../libs/config/load-config.ts';
import { migrate } from '../../libs/db/migrate.ts';
import { databaseBefore } from '../support/database-before.ts';

/**
 * The migration that records which deployment owns each agent, run over agents registered
 * before it: they belong to the deployment every process had until then, the default Redis
 * prefix (so an upgraded single deployment goes on delivering to all of them), and from then on
 * a registration must name its deployment.
 */
const THIS = '20261201000000_agent_deployment';
let db: Awaited<ReturnType<typeof databaseBefore>>;
let url: string;
let before: string;

beforeAll(async () => {
  db = await databaseBefore(THIS, 'agdep');
  url = db.url;
  before = db.migrationsBefore;
});

afterAll(async () => {
  await db?.drop();
});

describe('the agent deployment migration', () => {
  it('gives agents registered before it the default deployment (the default BATON_REDIS_PREFIX), and no default afterwards', async () => {
    await migrate(url, before);
    const c = new pg.Client({ connectionString: url });
    await c.connect();
    try {
      const project = (await c.query<{ id: string }>(`SELECT id FROM projects LIMIT 1`)).rows[0]!.id;
      const insert = (id: string, handle: string) =>
        c.query(
          `INSERT INTO agents (id, project_id, handle, display_name, provider, created_at, updated_at) VALUES ($1, $2, $3, $3, 'demo', now(), now())`,
          [id, project, handle],
        );
      await insert('00000000-0000-7000-8000-000000000001', 'old');

      expect(await migrate(url)).toContain(THIS);
      const { rows } = await c.query<{ handle: string; deployment: string }>(`SELECT handle, deployment FROM agents`);
      expect(rows).toEqual([{ handle: 'old', deployment: loadConfig({}).redisPrefix }]);
      // A registration that names no deployment is refused rather than given to `baton`.
      await expect(insert('00000000-0000-7000-8000-000000000002', 'new')).rejects.toThrow(/deployment/);
    } finally {
      await c.end();
    }
  });
});
