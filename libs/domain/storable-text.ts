/** A NUL character, or a UTF-16 surrogate without its pair: neither survives Postgres text. */
const UNSTORABLE = /\u0000|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

const pointerSegment = (key: string) => key.replace(/~/g, '~0').replace(/\//g, '~1');

/**
 * Where in a parsed JSON value (strings and object keys, at any depth) the first text is that
 * Postgres cannot store as sent, as a JSON pointer (`/context/openQuestions/2`), or null when
 * all of it can. Text is stored and returned byte for byte or refused, never altered. Pure.
 * It walks with its own stack, not recursion, so it has no depth cutoff of its own: whatever
 * nesting the caller accepted (LIMITS.jsonDepth for request bodies) is checked all the way down.
 */
export function unstorableTextAt(value: unknown): string | null {
  // Pushed in reverse so that the first offending text in document order is the one named; an
  // object's key is checked when its value is reached, as the recursive walk did.
  const pending: Array<{ value: unknown; path: string; key?: string }> = [{ value, path: '' }];
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    const { value: v, path, key } = next;
    if (key !== undefined && UNSTORABLE.test(key)) return path;
    if (typeof v === 'string') {
      if (UNSTORABLE.test(v)) return path || '/';
      continue;
    }
    if (v === null || typeof v !== 'object') continue;
    if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--) pending.push({ value: v[i], path: `${path}/${i}` });
      continue;
    }
    const entries = Object.entries(v as Record<string, unknown>);
    for (let i = entries.length - 1; i >= 0; i--) {
      const [k, child] = entries[i]!;
      pending.push({ value: child, path: `${path}/${pointerSegment(k)}`, key: k });
    }
  }
  return null;
}
