import { afterEach, describe, expect, it } from 'vitest';
import { localTime, packetText, relativeTime, timeText } from '../../services/cli/format.ts';
import { colourFor, renderTable, type Column } from '../../services/cli/table.ts';
import { buildContextPacket } from '../../libs/domain/context-packet.ts';

/** The CLI's one table renderer and its one time format for people (issue 31, item 8). */
interface Row {
  id: string;
  title: string;
  n: number;
}
const COLUMNS: Column<Row>[] = [
  { header: 'ID', value: (r) => r.id },
  { header: 'N', value: (r) => String(r.n), align: 'right' },
  { header: 'TITLE', value: (r) => r.title, max: 10 },
];

describe('renderTable', () => {
  it('puts a header first and aligns every column under it, two spaces apart', () => {
    const lines = renderTable(
      COLUMNS,
      [
        { id: 'a', title: 'short', n: 7 },
        { id: 'longer-id', title: 'x', n: 123 },
      ],
      { colour: false },
    );
    expect(lines).toEqual(['ID           N  TITLE', 'a            7  short', 'longer-id  123  x']);
  });

  it('cuts a cell past its column bound with …, flattens line breaks, and never cuts an unbounded column', () => {
    const id = '01a22c4d-1682-71c6-9a22-ab1910b13f20';
    const [, row] = renderTable(COLUMNS, [{ id, title: 'a title that\nis far too long', n: 1 }], { colour: false });
    expect(row).toBe(`${id}  1  a title t…`);
  });

  it('prints the header alone for no rows, bold only with colour', () => {
    expect(renderTable(COLUMNS, [], { colour: false })).toEqual(['ID  N  TITLE']);
    expect(renderTable(COLUMNS, [], { colour: true })).toEqual(['\u001b[1mID  N  TITLE\u001b[0m']);
  });

  it('allows colour only on a terminal with NO_COLOR unset', () => {
    expect(colourFor({}, { isTTY: true })).toBe(true);
    expect(colourFor({ NO_COLOR: '1' }, { isTTY: true })).toBe(false);
    expect(colourFor({}, { isTTY: false })).toBe(false);
    expect(colourFor({}, {})).toBe(false);
  });
});

describe('times for people', () => {
  const savedTz = process.env['TZ'];
  afterEach(() => {
    if (savedTz === undefined) delete process.env['TZ'];
    else process.env['TZ'] = savedTz;
  });

  it('localTime shows an ISO time in the local time zone, to the second', () => {
    process.env['TZ'] = 'UTC';
    expect(localTime('2026-12-02T01:02:03.456Z')).toBe('2026-12-02 01:02:03');
    process.env['TZ'] = 'Asia/Kolkata';
    expect(localTime('2026-12-02T01:02:03.456Z')).toBe('2026-12-02 06:32:03');
  });

  it('relativeTime says how long ago or ahead, and the date past a week', () => {
    process.env['TZ'] = 'UTC';
    const now = Date.parse('2026-12-02T12:00:00Z');
    const at = (ms: number) => new Date(now + ms).toISOString();
    expect(relativeTime(at(-500), now)).toBe('just now');
    expect(relativeTime(at(-12_000), now)).toBe('12 s ago');
    expect(relativeTime(at(-3 * 60_000 - 5_000), now)).toBe('3 min ago');
    expect(relativeTime(at(-2 * 3_600_000), now)).toBe('2 h ago');
    expect(relativeTime(at(-30 * 3_600_000), now)).toBe('1 day ago');
    expect(relativeTime(at(-3 * 86_400_000), now)).toBe('3 days ago');
    expect(relativeTime(at(5 * 60_000), now)).toBe('in 5 min');
    expect(relativeTime(at(-8 * 86_400_000), now)).toBe('2026-11-24');
    expect(timeText(at(-60_000), now)).toBe('2026-12-02 11:59:00 (1 min ago)');
  });
});

describe('a context packet as the CLI prints it', () => {
  const base = {
    handoffId: 'h1',
    title: 'Fix it',
    from: 'ann',
    summary: null,
    focus: null,
    doneWhen: null,
    openQuestions: [],
    nextSteps: [],
    session: null,
    facts: [],
  };

  it('is nothing when nothing stands between its fences, and the whole packet otherwise', () => {
    expect(packetText(buildContextPacket(base).text)).toBeNull();
    const said = buildContextPacket({ ...base, summary: 'half done' }).text;
    expect(packetText(said)).toBe(said);
  });
});
