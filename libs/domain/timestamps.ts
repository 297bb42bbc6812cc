const ISO = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/i;

/**
 * A strict ISO 8601 timestamp (`2026-12-01T09:00:00Z`, or with an offset), as a Date, or null
 * when it is not one. Stricter than `Date.parse`: a day the month does not have (30 February),
 * a leap second (`:60`), an hour 24, and years before 1970 or after 9999 are refused rather
 * than rolled over or stored as nonsense. Pure.
 */
export function parseTimestamp(text: string): Date | null {
  const m = ISO.exec(text);
  if (!m) return null;
  const [y, mo, d, h, mi, s] = m.slice(1, 7).map(Number) as [number, number, number, number, number, number];
  if (y < 1970 || y > 9999 || mo < 1 || mo > 12 || h > 23 || mi > 59 || s > 59) return null;
  // The day must exist in that month (Date.UTC would roll 30 February over into March).
  if (new Date(Date.UTC(y, mo - 1, d)).getUTCDate() !== d || d < 1) return null;
  const offset = m[8]!.toUpperCase();
  if (offset !== 'Z') {
    const [oh, om] = offset.slice(1).split(':').map(Number) as [number, number];
    if (oh > 23 || om > 59) return null;
  }
  const at = new Date(text);
  return Number.isNaN(at.getTime()) ? null : at;
}
