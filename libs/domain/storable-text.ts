/** A NUL character, or a UTF-16 surrogate without its pair: neither survives Postgres text. */
const UNSTORABLE = /\u0000|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * Where in a parsed JSON value (strings and object keys, at any depth) the first text is that
 * Postgres cannot store as sent, as a JSON pointer (`/context/openQuestions/2`), or null when
 * all of it can. Text is stored and returned byte for byte or refused, never altered. Pure;
 * stops descending at `maxDepth`.
 */
export function unstorableTextAt(value: unknown, path = '', maxDepth = 64): string | null {
  if (typeof value === 'string') return UNSTORABLE.test(value) ? path || '/' : null;
  if (value === null || typeof value !== 'object' || maxDepth === 0) return null;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const at = unstorableTextAt(value[i], `${path}/${i}`, maxDepth - 1);
      if (at !== null) return at;
    }
    return null;
  }
  for (const [key, v] of Object.entries(value)) {
    const here = `${path}/${key.replace(/~/g, '~0').replace(/\//g, '~1')}`;
    if (UNSTORABLE.test(key)) return here;
    const at = unstorableTextAt(v, here, maxDepth - 1);
    if (at !== null) return at;
  }
  return null;
}
