import { isDatabaseUnavailable } from '../../libs/db/classify-error.ts';

/**
 * A process command could not start: what is wrong and what to do, as one line. The CLI prints
 * `cannot start: <message>` (no stack: a busy port or a missing database is the user's setup,
 * not a bug) and exits 1.
 */
export class StartupError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'StartupError';
  }
}

/** host:port/database as the user wrote it, never the password. */
export function describeUrl(raw: string): string {
  try {
    const u = new URL(raw);
    return `${u.username ? `${decodeURIComponent(u.username)}@` : ''}${u.host}${u.pathname}`;
  } catch {
    return '(DATABASE_URL is not a URL)';
  }
}

/** Network error codes that mean the server could not be reached (as opposed to one that answered and refused). */
export const UNREACHABLE = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ECONNRESET']);

/** Whether `err` came from Postgres or the way to it (a SQLSTATE, a network code, a changed migration), not from Baton's own code. */
export function isPostgresFailure(err: unknown): boolean {
  const e = err as { code?: unknown; name?: unknown };
  if (e?.name === 'MigrationError') return true;
  // A server that goes away mid-start (a restart) ends the connection with no code at all
  // ("Connection terminated unexpectedly"): the shared classifier knows those.
  return (typeof e?.code === 'string' && (/^[0-9A-Z]{5}$/.test(e.code) || UNREACHABLE.has(e.code))) || isDatabaseUnavailable(err);
}

/**
 * Turns a failure to open Postgres at start (pg or Prisma error) into a StartupError with a hint:
 * `createdb` for a missing database, the URL for an unreachable server or a refused login.
 */
export function postgresStartupError(err: unknown, url: string): StartupError {
  const e = err as { code?: string; message?: string };
  const where = describeUrl(url);
  if ((err as Error)?.name === 'MigrationError')
    return new StartupError(`the database at ${where} cannot be migrated: ${e.message ?? ''}`, { cause: err });
  if (e?.code === '3D000') {
    const { dbName, command } = createdbCommand(url);
    return new StartupError(`database "${dbName}" does not exist (DATABASE_URL ${where}): create it with \`${command}\``, { cause: err });
  }
  if (e?.code === '28P01' || e?.code === '28000') {
    return new StartupError(
      `Postgres refused the login (DATABASE_URL ${where}): ${e.message ?? e.code}; check the user and password in DATABASE_URL`,
      { cause: err },
    );
  }
  if (e?.code && UNREACHABLE.has(e.code)) {
    return new StartupError(`cannot reach Postgres at ${where} (${e.code}): is it running? Check DATABASE_URL`, { cause: err });
  }
  if (!e?.code && isDatabaseUnavailable(err)) {
    return new StartupError(
      `Postgres at ${where} went away during the start (${String(e?.message ?? err).split('\n')[0]}): is it restarting? Start again once it is up`,
      { cause: err },
    );
  }
  return new StartupError(`Postgres at ${where} failed: ${String(e?.message ?? err).split('\n')[0]}`, { cause: err });
}

/** The database DATABASE_URL names, and the `createdb` command that creates it on that server as that user. */
export function createdbCommand(url: string): { dbName: string; command: string } {
  let dbName = '';
  let host = '';
  let port = '';
  let user = '';
  try {
    const u = new URL(url);
    dbName = decodeURIComponent(u.pathname.replace(/^\//, ''));
    host = u.hostname;
    port = u.port;
    user = decodeURIComponent(u.username);
  } catch {
    // not a URL: loadConfig refuses one, so only a caller's own string gets here
  }
  const args = [host && `-h ${host}`, port && `-p ${port}`, user && `-U ${user}`, dbName].filter(Boolean).join(' ');
  return { dbName, command: `createdb ${args}` };
}

/** Turns a failed `listen` into a StartupError: a busy port says how to pick another. */
export function listenStartupError(err: unknown, host: string, port: number): StartupError {
  const code = (err as { code?: string })?.code;
  if (code === 'EADDRINUSE') {
    return new StartupError(
      `${host}:${port} is already in use (another \`baton serve\` or \`baton api\`?): stop it, or set BATON_API_PORT`,
      { cause: err },
    );
  }
  if (code === 'EACCES')
    return new StartupError(`not allowed to listen on ${host}:${port}: set BATON_API_PORT to a port above 1023`, { cause: err });
  if (code === 'EADDRNOTAVAIL') return new StartupError(`${host} is no address of this machine: fix BATON_API_HOST`, { cause: err });
  return new StartupError(`cannot listen on ${host}:${port}: ${(err as Error)?.message ?? String(err)}`, { cause: err });
}
