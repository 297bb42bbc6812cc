import { describe, expect, it } from 'vitest';
import { isPostgresFailure, postgresStartupError } from '../../services/cli/startup-error.ts';

describe('a failed start that is Postgres’s, said in one line', () => {
  it('a server that went away mid-start (no error code, as pg reports a restart) is a Postgres failure, not a crash with a stack', () => {
    const err = new Error('Connection terminated unexpectedly');
    expect(isPostgresFailure(err)).toBe(true);
    const said = postgresStartupError(err, 'postgresql://baton:secret@db.example:5432/baton');
    expect(said.message).toMatch(
      /^Postgres at baton@db\.example:5432\/baton went away during the start \(Connection terminated unexpectedly\)/,
    );
    expect(said.message).not.toContain('secret');
  });

  it('an error of Baton’s own stays a crash', () => {
    expect(isPostgresFailure(new TypeError('x is undefined'))).toBe(false);
  });
});
