/**
 * Where a parsed JSON value first nests objects and arrays more than `maxDepth` levels deep, as
 * a JSON pointer to the first container past the limit (`/settings/a/a`), or null when it stays
 * within it. The value itself, when it is an object or an array, is level 1. Pure, and it walks
 * with its own stack, not recursion: it is what keeps recursive code (schema validation, the
 * text check, JSON.stringify, Postgres jsonb) from ever meeting a value deep enough to overflow.
 */
export function nestedTooDeepAt(value: unknown, maxDepth: number): string | null {
  const pending: Array<{ value: unknown; path: string; depth: number }> = [{ value, path: '', depth: 1 }];
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    const { value: v, path, depth } = next;
    if (v === null || typeof v !== 'object') continue;
    if (depth > maxDepth) return path || '/';
    const children: Array<[string, unknown]> = Array.isArray(v) ? v.map((c, i) => [String(i), c]) : Object.entries(v);
    for (let i = children.length - 1; i >= 0; i--) {
      const [key, child] = children[i]!;
      if (child !== null && typeof child === 'object') {
        pending.push({ value: child, path: `${path}/${key.replace(/~/g, '~0').replace(/\//g, '~1')}`, depth: depth + 1 });
      }
    }
  }
  return null;
}
