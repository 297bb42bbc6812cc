import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../libs/config/config-error.ts';
import { CONFIG_VARIABLES, loadConfig } from '../../libs/config/load-config.ts';
import { CODEX_ENV_NAMES, PROGRAM_ENV_NAMES } from '../../libs/domain/inherited-env.ts';
import { INHERITED_ENV_NAMES } from '../../libs/adapters/command/command-settings.ts';
import { CODEX_INHERITED_ENV_NAMES } from '../../libs/adapters/codex/codex-settings.ts';
import { heapGrowthFlag } from '../../services/cli/tune-heap.ts';

describe('loadConfig', () => {
  it('gives working defaults with nothing set (no database or Redis: the demo embeds them)', () => {
    const c = loadConfig({});
    expect(c.databaseUrl).toBeUndefined();
    expect(c.redisUrl).toBeUndefined();
    expect(c.api.publicUrl).toBe('http://127.0.0.1:8787');
    expect(c.workerProviders).toEqual(['demo']);
    expect(Object.isFrozen(c)).toBe(true);
  });

  it("allows browsers only on the loopback names, the listen host and BATON_URL's host, or exactly BATON_ALLOWED_HOSTS", () => {
    expect(loadConfig({ BATON_URL: 'https://baton.example.com' }).api.allowedHosts).toEqual([
      'localhost',
      '127.0.0.1',
      '[::1]',
      'baton.example.com',
    ]);
    expect(loadConfig({ BATON_API_HOST: '0.0.0.0' }).api.allowedHosts).not.toContain('0.0.0.0');
    expect(loadConfig({ BATON_ALLOWED_HOSTS: 'Baton.internal, 10.0.0.5' }).api.allowedHosts).toEqual(['baton.internal', '10.0.0.5']);
    expect(() => loadConfig({ BATON_ALLOWED_HOSTS: 'http://x:80' })).toThrow(/BATON_ALLOWED_HOSTS/);
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

  it("lets a long-running process's heap grow 30% past its live size unless told otherwise, and refuses a value V8 would not take", () => {
    expect(loadConfig({}).heapGrowthPercent).toBe(30);
    expect(heapGrowthFlag(loadConfig({}).heapGrowthPercent)).toBe('--heap-growing-percent=30');
    expect(heapGrowthFlag(loadConfig({ BATON_HEAP_GROWTH_PERCENT: '75' }).heapGrowthPercent)).toBe('--heap-growing-percent=75');
    // 0: V8's own growing factor, no flag set.
    expect(heapGrowthFlag(loadConfig({ BATON_HEAP_GROWTH_PERCENT: '0' }).heapGrowthPercent)).toBeNull();
    expect(() => loadConfig({ BATON_HEAP_GROWTH_PERCENT: '1.5' })).toThrow(/BATON_HEAP_GROWTH_PERCENT must be a whole number/);
    expect(() => loadConfig({ BATON_HEAP_GROWTH_PERCENT: '301' })).toThrow(/BATON_HEAP_GROWTH_PERCENT must be between 0 and 300/);
  });

  it('bounds every database call and keeps the reconciliation windows at their documented defaults when unset', () => {
    const c = loadConfig({});
    expect(c.dbTimeouts).toEqual({ queryMs: 5_000, connectMs: 3_000 });
    expect(c.deliveryWindows).toEqual({
      unobservableAfterMs: 600_000,
      interruptResendDelayMs: 600_000,
      errorResendDelayMs: 30_000,
      absenceScans: 3,
      absenceWindowMs: 3_600_000,
      unreachableGiveUpMs: 3_600_000,
      roleRerouteAfterMs: 300_000,
    });
    expect(Object.isFrozen(c.dbTimeouts) && Object.isFrozen(c.deliveryWindows)).toBe(true);
  });

  it('reads the database timeouts and the reconciliation windows from their variables', () => {
    const c = loadConfig({
      BATON_DB_QUERY_TIMEOUT_MS: '1500',
      BATON_DB_CONNECT_TIMEOUT_MS: '800',
      BATON_UNOBSERVABLE_AFTER_MS: '120000',
      BATON_INTERRUPTED_RESEND_AFTER_MS: '0',
      BATON_ERROR_RESEND_AFTER_MS: '500',
      BATON_UNCERTAIN_SCANS: '5',
      BATON_UNCERTAIN_SCAN_WINDOW_MS: '7200000',
      BATON_UNREACHABLE_GIVE_UP_MS: '0',
      BATON_ROLE_REROUTE_AFTER_MS: '2500',
    });
    expect(c.dbTimeouts).toEqual({ queryMs: 1_500, connectMs: 800 });
    expect(c.deliveryWindows).toEqual({
      unobservableAfterMs: 120_000,
      interruptResendDelayMs: 0,
      errorResendDelayMs: 500,
      absenceScans: 5,
      absenceWindowMs: 7_200_000,
      unreachableGiveUpMs: 0,
      roleRerouteAfterMs: 2_500,
    });
  });

  it('refuses database timeouts and reconciliation windows outside their documented bounds', () => {
    expect(() => loadConfig({ BATON_DB_QUERY_TIMEOUT_MS: '0' })).toThrow(/BATON_DB_QUERY_TIMEOUT_MS must be between 100 and 600000/);
    expect(() => loadConfig({ BATON_DB_CONNECT_TIMEOUT_MS: '5s' })).toThrow(/BATON_DB_CONNECT_TIMEOUT_MS must be a whole number/);
    expect(() => loadConfig({ BATON_UNOBSERVABLE_AFTER_MS: '99' })).toThrow(/BATON_UNOBSERVABLE_AFTER_MS must be between 100 and/);
    expect(() => loadConfig({ BATON_INTERRUPTED_RESEND_AFTER_MS: '-1' })).toThrow(
      /BATON_INTERRUPTED_RESEND_AFTER_MS must be a whole number/,
    );
    expect(() => loadConfig({ BATON_ERROR_RESEND_AFTER_MS: '86400001' })).toThrow(
      /BATON_ERROR_RESEND_AFTER_MS must be between 0 and 86400000/,
    );
    expect(() => loadConfig({ BATON_UNREACHABLE_GIVE_UP_MS: '604800001' })).toThrow(
      /BATON_UNREACHABLE_GIVE_UP_MS must be between 0 and 604800000/,
    );
    // One scan cannot be spread over a window: absence takes at least two looks.
    expect(() => loadConfig({ BATON_UNCERTAIN_SCANS: '1' })).toThrow(/BATON_UNCERTAIN_SCANS must be between 2 and 100/);
    expect(() => loadConfig({ BATON_UNCERTAIN_SCAN_WINDOW_MS: '3000000000' })).toThrow(
      /BATON_UNCERTAIN_SCAN_WINDOW_MS must be between 100 and 2592000000/,
    );
  });

  it('keeps the rate limit at 100/s with bursts of 200 and serves no worker metrics unless BATON_METRICS_PORT is set', () => {
    const c = loadConfig({});
    expect(c.rateLimit).toEqual({ perSecond: 100, burst: 200 });
    expect(c.metricsPort).toBeUndefined();
    expect(loadConfig({ BATON_METRICS_PORT: '9464', BATON_RATE_LIMIT_PER_SEC: '0' })).toMatchObject({
      metricsPort: 9464,
      rateLimit: { perSecond: 0, burst: 200 },
    });
    expect(() => loadConfig({ BATON_METRICS_PORT: '0' })).toThrow(/BATON_METRICS_PORT must be between 1 and 65535/);
  });

  it('names the variable and what it accepts when a value is bad', () => {
    expect(() => loadConfig({ BATON_API_PORT: 'eighty' })).toThrow(/BATON_API_PORT must be a whole number/);
    expect(() => loadConfig({ BATON_QUEUE_SHARDS: '0' })).toThrow(ConfigError);
    expect(() => loadConfig({ DATABASE_URL: 'mysql://x' })).toThrow(/DATABASE_URL must start with postgres/);
    expect(() => loadConfig({ BATON_REDIS_PREFIX: 'a:b' })).toThrow(/no ":"/);
    expect(() => loadConfig({ BATON_LOG_LEVEL: 'loud' })).toThrow(/BATON_LOG_LEVEL/);
  });

  it('lists in CONFIG_VARIABLES exactly the variables it reads (the docs and docker-compose.yml are checked against that list)', () => {
    const read = new Set<string>();
    const env = new Proxy(
      {},
      {
        get: (_t, name) => {
          if (typeof name === 'string') read.add(name);
          return undefined;
        },
      },
    );
    loadConfig(env);
    const inherited = new Set<string>([...PROGRAM_ENV_NAMES, ...CODEX_ENV_NAMES]);
    expect([...read].filter((n) => !inherited.has(n)).sort()).toEqual([...CONFIG_VARIABLES].sort());
  });

  it('passes child processes exactly the variables the adapters declare (one list, libs/domain/inherited-env.ts), never a secret', () => {
    expect(PROGRAM_ENV_NAMES).toEqual(INHERITED_ENV_NAMES);
    expect(CODEX_ENV_NAMES).toEqual(CODEX_INHERITED_ENV_NAMES);
    const env = { PATH: '/bin', LANG: '', CODEX_HOME: '/c', DATABASE_URL: 'postgresql://secret@h/d', BATON_TOKEN: 't' };
    const c = loadConfig(env);
    expect(c.command.baseEnv).toEqual({ PATH: '/bin', LANG: '' });
    expect(c.codex.baseEnv).toEqual({ PATH: '/bin', CODEX_HOME: '/c' });
  });

  it("BATON_TRUST_PROXY: off by default; true, false, or the proxy's addresses and CIDR ranges; anything else refused", () => {
    expect(loadConfig({}).api.trustProxy).toBe(false);
    expect(loadConfig({ BATON_TRUST_PROXY: 'true' }).api.trustProxy).toBe(true);
    expect(loadConfig({ BATON_TRUST_PROXY: '0' }).api.trustProxy).toBe(false);
    expect(loadConfig({ BATON_TRUST_PROXY: '10.0.0.5, 172.16.0.0/12,::1' }).api.trustProxy).toEqual(['10.0.0.5', '172.16.0.0/12', '::1']);
    expect(() => loadConfig({ BATON_TRUST_PROXY: 'proxy.example' })).toThrow(/BATON_TRUST_PROXY holds "proxy.example"/);
    expect(() => loadConfig({ BATON_TRUST_PROXY: '10.0.0.0/33' })).toThrow(/BATON_TRUST_PROXY/);
  });
});
