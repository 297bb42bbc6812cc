/** One row of the chaos run's invariants table. */
export interface InvariantRow {
  readonly name: string;
  readonly violations: number;
  readonly checked: string;
  /** The first violations, one line each (at most MAX_DETAILS). */
  readonly details: readonly string[];
}

const MAX_DETAILS = 10;

/** A count as the tables print it (1,234). */
export const n = (x: number) => x.toLocaleString('en-US');

/** A row with `count` violations (default: one per problem), keeping the first MAX_DETAILS problems. */
export function row(name: string, problems: readonly string[], checked: string, count = problems.length): InvariantRow {
  return { name, violations: count, checked, details: problems.slice(0, MAX_DETAILS) };
}
