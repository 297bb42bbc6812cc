import { randomFillSync } from 'node:crypto';

// Randomness is drawn 4 KiB at a time (one getrandom call per 256 ids, as randomUUID() does
// with its own cache): a call per id showed up in worker profiles (docs/performance-history.md,
// "What changed in this round (each measured)").
const POOL = Buffer.alloc(4096);
let poolOffset = POOL.length;

function random16(): Buffer {
  if (poolOffset + 16 > POOL.length) {
    randomFillSync(POOL);
    poolOffset = 0;
  }
  const out = Buffer.from(POOL.subarray(poolOffset, poolOffset + 16));
  poolOffset += 16;
  return out;
}

/**
 * A UUIDv7 (RFC 9562): 48 bits of Unix milliseconds, then randomness. Ids sort by creation
 * time, which keeps the primary-key index append-mostly.
 */
export function newId(nowMs: number = Date.now()): string {
  const bytes = random16();
  bytes[0] = Math.floor(nowMs / 2 ** 40) & 0xff;
  bytes[1] = Math.floor(nowMs / 2 ** 32) & 0xff;
  bytes[2] = (nowMs >>> 24) & 0xff;
  bytes[3] = (nowMs >>> 16) & 0xff;
  bytes[4] = (nowMs >>> 8) & 0xff;
  bytes[5] = nowMs & 0xff;
  bytes[6] = 0x70 | ((bytes[6] ?? 0) & 0x0f);
  bytes[8] = 0x80 | ((bytes[8] ?? 0) & 0x3f);
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

export function isUuid(value: string): boolean {
  return UUID_RE.test(value);
}

/**
 * Agent ids and project slugs: letters, digits, '-' and '_', starting with a letter or digit,
 * at most 64 characters. Case-insensitive: Baton stores and shows them lower-case.
 */
export const HANDLE_PATTERN = '^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$';

/** A worker pool's name (agents' `pool`, BATON_WORKER_POOLS); "default" names the unnamed pool. */
export const POOL_PATTERN = '^[a-z0-9][a-z0-9_-]{0,31}$';

/** A pool as people read it: the unnamed pool ('' in the database) is "default". */
export function poolName(pool: string): string {
  return pool === '' ? 'default' : pool;
}
const HANDLE_RE = new RegExp(HANDLE_PATTERN);

export function isHandle(value: string): boolean {
  return HANDLE_RE.test(value);
}
