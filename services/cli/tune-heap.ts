import { setFlagsFromString } from 'node:v8';

/**
 * The V8 flag for BATON_HEAP_GROWTH_PERCENT (null: 0, leave V8's own growing factor). V8 reads
 * it each time a full collection sets the heap's next limit, so setting it at start, before the
 * process has grown, takes effect for the process's whole life.
 */
export function heapGrowthFlag(percent: number): string | null {
  return percent > 0 ? `--heap-growing-percent=${percent}` : null;
}

/**
 * Lets the JavaScript heap of a long-running process grow only `percent` past what the last full
 * collection kept. V8's own factor (up to 4x) lets a process under load hold several times its
 * live heap, most of it garbage (docs/PERFORMANCE.md, "Memory").
 */
export function tuneHeap(percent: number): void {
  const flag = heapGrowthFlag(percent);
  if (flag) setFlagsFromString(flag);
}
