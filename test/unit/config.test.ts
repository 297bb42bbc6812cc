import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../libs/config/load-config.ts';

describe('loadConfig', () => {
  it('gives working defaults with nothing set (no database or Redis: the demo embeds them)', () => {
    const c = loadConfig({});
    expect(c.databaseUrl).toBeUndefined();
    expect(c.redisUrl).toBeUndefined();
    expect(c.api.publicUrl).toBe('http://127.0.0.1:8787');
    expect(c.workerProviders).toEqual(['demo']);
    expect(Object.isFrozen(c)).toBe(true);
  });

  it('reads every variable it documents', () => {
    const c = loadConfig({
      DATABASE_URL: 'postgresql://u@h:5432/d',
      REDIS_URL: 'redis://h:6379',
      BATON_API_PORT: '9000',
      BATON_QUEUE_SHARDS: '16',
      BATON_WORKER_PROVIDERS: 'demo, codex',
      BATON_TURN_LOCK_TTL_MS: '3000',
      BATON_PROJECT: 'Alpha',
    });
    expect(c.api.port).toBe(9000);
    expect(c.queueShards).toBe(16);
    expect(c.workerProviders).toEqual(['demo', 'codex']);
    expect(c.turnLockTtlMs).toBe(3000);
    expect(c.defaultProject).toBe('alpha');
  });

  it('names the variable and what it accepts when a value is bad', () => {
    expect(() => loadConfig({ BATON_API_PORT: 'eighty' })).toThrow(/BATON_API_PORT must be a whole number/);
    expect(() => loadConfig({ BATON_QUEUE_SHARDS: '0' })).toThrow(ConfigError);
    expect(() => loadConfig({ DATABASE_URL: 'mysql://x' })).toThrow(/DATABASE_URL must start with postgres/);
    expect(() => loadConfig({ BATON_REDIS_PREFIX: 'a:b' })).toThrow(/no ":"/);
    expect(() => loadConfig({ BATON_LOG_LEVEL: 'loud' })).toThrow(/BATON_LOG_LEVEL/);
  });
});
