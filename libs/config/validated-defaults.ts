// The check every component's defaults object passes (component-defaults.ts, adapter-defaults.ts).

/**
 * Freezes a component's defaults after checking that each is a whole number >= 0: a mistyped
 * default fails at import, naming the component and the key, instead of timing things oddly.
 */
export function componentDefaults<T extends Record<string, number>>(component: string, values: T): Readonly<T> {
  for (const [key, value] of Object.entries(values)) {
    if (!Number.isSafeInteger(value) || value < 0) throw new Error(`${component}.${key} must be a whole number >= 0, got ${value}`);
  }
  return Object.freeze(values);
}
