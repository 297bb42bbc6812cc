import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BatonError } from '../../libs/domain/errors.ts';
import { removeAgent, registerAgent, type RemoveAgentDeps } from '../../libs/handoffs/manage-agents.ts';
import { authenticate, createToken, revokeToken, type AuthDeps, type RevokeDeps } from '../../libs/handoffs/manage-tokens.ts';
import { TokenCache } from '../../libs/handoffs/token-cache.ts';
import { AuthChanges } from '../../libs/queue/auth-changes.ts';
import { duplicateRedis, openRedis, type RedisClient } from '../../libs/queue/open-redis.ts';
import { RedisNames } from '../../libs/queue/redis-names.ts';
import { eventually } from '../support/eventually.ts';
import { REDIS_TARGETS } from '../support/redis-targets.ts';
import { silentLogger, startTestBaton, type TestBaton } from '../support/test-baton.ts';

/**
 * Two API processes of one deployment, as the API server wires them (a token cache each, and
 * token changes announced over Redis pub/sub), sharing one database and one Redis. The caches
 * are given a long life here (60 s) so that only the announcement can explain a refusal in the
 * other process.
 */
describe.each(REDIS_TARGETS)('token revocation across API processes on a $name', ({ url }) => {
  let baton: TestBaton;
  const opened: RedisClient[] = [];
  const channels: AuthChanges[] = [];

  /** One process: its own cache, announcer and subscriber; counts its Postgres look-ups. */
  /** What one process's calls below touch: authenticate, revoke, remove an agent. */
  type ProcessDeps = AuthDeps & RevokeDeps & RemoveAgentDeps;

  async function process(): Promise<{ deps: ProcessDeps; lookups: () => number }> {
    const publisher = openRedis(url, 'producer', silentLogger());
    opened.push(publisher);
    const changes = new AuthChanges({
      publisher,
      subscriber: duplicateRedis(publisher, { connectionName: 'test-auth', maxRetriesPerRequest: null }),
      names: new RedisNames(baton.prefix),
      logger: silentLogger(),
    });
    channels.push(changes);
    const cache = new TokenCache({ maxAgeMs: 60_000, announce: () => changes.announce() });
    let subscribed = false;
    await changes.start(() => {
      subscribed = true;
      cache.forget();
    });
    await eventually(() => subscribed, { what: 'the subscription is live', timeoutMs: 10_000 });
    let n = 0;
    const tokens = {
      findBySecretHash: (hash: string) => {
        n++;
        return baton.repos.tokens.findBySecretHash(hash);
      },
      revoke: (id: string, at: Date) => baton.repos.tokens.revoke(id, at),
    };
    return { deps: { ...baton.core, tokens, tokenCache: cache }, lookups: () => n };
  }

  const refused = async (deps: AuthDeps, token: string) => {
    try {
      await authenticate(deps, `Bearer ${token}`);
      return false;
    } catch (err) {
      if (err instanceof BatonError && err.code === 'invalid_token') return true;
      throw err;
    }
  };

  beforeAll(async () => {
    baton = await startTestBaton({ redisUrl: url });
  });

  afterAll(async () => {
    for (const c of channels) c.close();
    for (const r of opened) r.disconnect();
    await baton?.stop();
  });

  it('a cached token: refused at the next request where it was revoked, and in the other process as soon as the announcement arrives', async () => {
    const a = await process();
    const b = await process();
    await registerAgent(baton.core, { project: 'default', handle: 'rev-1', provider: 'manual' });
    const { token, record } = await createToken(baton.core, { admin: false, agent: 'rev-1' });
    for (const p of [a, b]) {
      await authenticate(p.deps, `Bearer ${token}`);
      await authenticate(p.deps, `Bearer ${token}`);
      // The second request was answered from the cache.
      expect(p.lookups()).toBe(1);
    }
    await revokeToken(a.deps, record.id);
    expect(await refused(a.deps, token)).toBe(true);
    await eventually(() => refused(b.deps, token), {
      what: 'the other process refuses the revoked token',
      timeoutMs: 1_000,
      intervalMs: 10,
    });
  });

  it('removing an agent ends its cached tokens the same way', async () => {
    const a = await process();
    const b = await process();
    await registerAgent(baton.core, { project: 'default', handle: 'rev-2', provider: 'manual' });
    const { token } = await createToken(baton.core, { admin: false, agent: 'rev-2' });
    for (const p of [a, b]) await authenticate(p.deps, `Bearer ${token}`);
    await removeAgent(a.deps, 'default', 'rev-2');
    expect(await refused(a.deps, token)).toBe(true);
    await eventually(() => refused(b.deps, token), {
      what: 'the other process refuses the removed agent’s token',
      timeoutMs: 1_000,
      intervalMs: 10,
    });
  });
});
