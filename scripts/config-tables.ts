// The generated table of libs/config/README.md ("Component defaults"): one row per value of
// every component's defaults object. scripts/docs-tables.ts writes it; test/unit/config-tables.test.ts holds it.
import { COMPONENT_DEFAULTS } from '../libs/config/component-defaults.ts';

export const COMPONENT_DEFAULTS_HEADER = '| defaults object | key | value |\n| --- | --- | --- |';

export function componentDefaultsRows(): string[] {
  return Object.entries(COMPONENT_DEFAULTS).flatMap(([object, values]) =>
    Object.entries(values).map(([key, value]) => `| \`${object}\` | \`${key}\` | ${value} |`),
  );
}
