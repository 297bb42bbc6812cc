import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../libs/config/load-config.ts';
import { parseRedisTarget } from '../../libs/config/redis-target.ts';

describe('REDIS_URL: one server or a cluster', () => {
  it('reads redis:// and rediss:// as one server, unchanged', () => {
    expect(parseRedisTarget('redis://127.0.0.1:6379/2')).toEqual({ kind: 'single', url: 'redis://127.0.0.1:6379/2' });
    expect(parseRedisTarget('rediss://user:pw@cache.example:6380')).toEqual({ kind: 'single', url: 'rediss://user:pw@cache.example:6380' });
  });

  it('reads redis+cluster:// as a list of seed nodes with credentials and TLS', () => {
    expect(parseRedisTarget('redis+cluster://127.0.0.1:7001,127.0.0.1:7002,[::1]:7003')).toEqual({
      kind: 'cluster',
      nodes: [
        { host: '127.0.0.1', port: 7001 },
        { host: '127.0.0.1', port: 7002 },
        { host: '::1', port: 7003 },
      ],
      tls: false,
    });
    expect(parseRedisTarget('rediss+cluster://baton:p%40ss@a.example:6379/')).toEqual({
      kind: 'cluster',
      nodes: [{ host: 'a.example', port: 6379 }],
      username: 'baton',
      password: 'p@ss',
      tls: true,
    });
  });

  it('refuses what would silently point somewhere else: a database on a cluster, a node without a port, an unknown scheme', () => {
    expect(() => parseRedisTarget('redis+cluster://127.0.0.1:7001/3')).toThrow(/no database/);
    expect(() => parseRedisTarget('redis+cluster://127.0.0.1')).toThrow(/host:port/);
    expect(() => parseRedisTarget('redis+cluster://127.0.0.1:7001,,127.0.0.1:7002')).toThrow(/host:port/);
    expect(() => parseRedisTarget('redis+cluster://127.0.0.1:99999')).toThrow(/host:port/);
    expect(() => parseRedisTarget('http://127.0.0.1:6379')).toThrow(/must start with/);
  });

  it('is how the config validates REDIS_URL', () => {
    expect(loadConfig({ REDIS_URL: 'redis+cluster://127.0.0.1:7001,127.0.0.1:7002' }).redisUrl).toBe(
      'redis+cluster://127.0.0.1:7001,127.0.0.1:7002',
    );
    expect(() => loadConfig({ REDIS_URL: 'redis+cluster://127.0.0.1' })).toThrow(/host:port/);
    expect(() => loadConfig({ REDIS_URL: 'memcached://x:1' })).toThrow(/REDIS_URL must start with/);
  });
});
