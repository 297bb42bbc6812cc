/**
 * The one way the CLI prints rows for people: a header line, then one line per row, columns
 * aligned with two spaces between them. A cell longer than its column's `max` is cut with `…`
 * (ids never are: give them no `max`); line breaks inside a cell become spaces. With `colour`
 * (a terminal, NO_COLOR unset: see `colourFor`) the header is bold; otherwise the text is plain.
 */
export interface Column<T> {
  readonly header: string;
  value(row: T): string;
  /** The widest a cell may be; longer ones are cut. No bound when absent. */
  readonly max?: number;
  /** Numbers read better aligned right. */
  readonly align?: 'left' | 'right';
}

const BOLD = '\u001b[1m';
const RESET = '\u001b[0m';

/** Whether output for people may carry colour: stdout is a terminal and NO_COLOR is unset. */
export function colourFor(env: Readonly<Record<string, string | undefined>>, stream: { isTTY?: boolean } = process.stdout): boolean {
  return stream.isTTY === true && env['NO_COLOR'] === undefined;
}

function cell(text: string, max: number | undefined): string {
  const flat = text.replace(/[\r\n\t]+/g, ' ');
  return max !== undefined && flat.length > max ? `${flat.slice(0, max - 1)}…` : flat;
}

/** The table's lines: the header first (also for no rows; callers say "no …" themselves). */
export function renderTable<T>(columns: readonly Column<T>[], rows: readonly T[], opts: { colour: boolean }): string[] {
  const cells = rows.map((row) => columns.map((c) => cell(c.value(row), c.max)));
  const widths = columns.map((c, i) => Math.max(c.header.length, ...cells.map((r) => r[i]!.length)));
  const line = (values: readonly string[]) =>
    values
      .map((v, i) => {
        const last = i === values.length - 1;
        if (columns[i]!.align === 'right') return v.padStart(widths[i]!);
        return last ? v : v.padEnd(widths[i]!);
      })
      .join('  ')
      .trimEnd();
  const header = line(columns.map((c) => c.header));
  return [opts.colour ? `${BOLD}${header}${RESET}` : header, ...cells.map(line)];
}
