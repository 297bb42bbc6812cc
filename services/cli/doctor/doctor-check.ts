/**
 * One finding of `baton doctor`: what was checked (`name`), how it stands, what was found
 * (`detail`) and, unless it is ok, what to do about it (`fix`).
 */
export interface DoctorCheck {
  readonly name: string;
  readonly status: DoctorStatus;
  readonly detail: string;
  readonly fix: string | null;
}

/** `fail` makes `baton doctor` exit 1; `warn` does not (Baton works, but not as well as it could). */
export type DoctorStatus = 'ok' | 'warn' | 'fail';

export const ok = (name: string, detail: string): DoctorCheck => ({ name, status: 'ok', detail, fix: null });
export const warn = (name: string, detail: string, fix: string): DoctorCheck => ({ name, status: 'warn', detail, fix });
export const fail = (name: string, detail: string, fix: string): DoctorCheck => ({ name, status: 'fail', detail, fix });

/** An error as a short reason: its network or SQLSTATE code when it has one, then its first line. */
export function reasonOf(err: unknown): string {
  const e = err as { code?: unknown; message?: unknown };
  const message = String(e?.message ?? err).split('\n')[0] ?? '';
  const code = typeof e?.code === 'string' ? e.code : undefined;
  return code && !message.includes(code) ? `${code}: ${message}` : message;
}

/** `promise`, or a rejection saying what gave no answer within `ms`: a backstop for clients whose own timeouts may not cover every step. */
export function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} gave no answer within ${ms} ms`)), ms);
    timer.unref();
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
