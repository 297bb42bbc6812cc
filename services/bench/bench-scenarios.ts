/** The scenarios, in the order they run. */
export const BENCH_SCENARIOS = [
  'ceilings',
  'send',
  'delivery',
  'dispatch-latency',
  'busy-agents',
  'recovery',
  'long-turns',
  'role-routing',
  'startup',
  'capacity',
] as const;
export type BenchScenario = (typeof BENCH_SCENARIOS)[number];

/** Parses a comma-separated `--only` list; throws naming the valid scenarios on an unknown one. */
export function parseScenarios(text: string): BenchScenario[] {
  const names = text
    .split(',')
    .map((n) => n.trim())
    .filter(Boolean);
  const unknown = names.filter((n) => !(BENCH_SCENARIOS as readonly string[]).includes(n));
  if (names.length === 0 || unknown.length > 0)
    throw new Error(`unknown bench scenario ${JSON.stringify(unknown.join(',') || text)}; choose from ${BENCH_SCENARIOS.join(', ')}`);
  return names as BenchScenario[];
}

/**
 * Parses `--workers`: worker process counts for the capacity runs, comma-separated (`1,2,4`),
 * each a whole number from 1 to 64, no repeats; throws saying what is wrong.
 */
export function parseWorkerCounts(text: string): number[] {
  const parts = text.split(',').map((n) => n.trim());
  const counts = parts.map(Number);
  if (parts.some((p) => !/^\d+$/.test(p)) || counts.some((n) => n < 1 || n > 64))
    throw new Error(`--workers takes worker process counts from 1 to 64, comma-separated (e.g. 1,2,4), not ${JSON.stringify(text)}`);
  if (new Set(counts).size !== counts.length) throw new Error(`--workers lists a count twice: ${JSON.stringify(text)}`);
  return counts;
}
