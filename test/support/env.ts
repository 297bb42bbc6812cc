/** Where the test suite finds Postgres and Redis (the machine's own, unless overridden). */
export const TEST_PG_ADMIN_URL = process.env['TEST_PG_ADMIN_URL'] ?? 'postgresql://postgres@127.0.0.1:5432/postgres';
export const TEST_REDIS_URL = process.env['TEST_REDIS_URL'] ?? 'redis://127.0.0.1:6379';

/** The same server as TEST_PG_ADMIN_URL, another database. */
export function databaseUrl(name: string): string {
  const url = new URL(TEST_PG_ADMIN_URL);
  url.pathname = `/${name}`;
  return url.toString();
}
