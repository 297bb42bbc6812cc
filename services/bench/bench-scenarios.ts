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
