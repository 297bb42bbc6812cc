import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { INT_SETTINGS, type IntSettingName } from '../../libs/config/int-settings.ts';
import { COMPONENT_DEFAULTS, componentDefaults } from '../../libs/config/component-defaults.ts';
import { loadConfig } from '../../libs/config/load-config.ts';
import { COMPONENT_DEFAULTS_HEADER, componentDefaultsRows } from '../../scripts/config-tables.ts';

const text = (path: string) => readFileSync(new URL(`../../${path}`, import.meta.url), 'utf8');

/** The cells of the table row whose first cell names `name`, in the first table after `heading`. */
function rowOf(markdown: string, heading: RegExp, name: string): string[] {
  const start = markdown.search(heading);
  expect(start, `heading ${heading}`).toBeGreaterThanOrEqual(0);
  const lines = markdown.slice(start).split('\n');
  const first = lines.findIndex((l) => l.startsWith('|'));
  for (const line of lines.slice(first)) {
    if (!line.startsWith('|')) break;
    const cells = line.split(' | ').map((c) => c.replace(/^\| ?| ?\|$/g, ''));
    if ((cells[0] ?? '').split(',').some((n) => n.trim() === `\`${name}\``)) return cells;
  }
  throw new Error(`${name} has no row in the table under ${heading}`);
}

/** The default a row gives `name`: the backticked value at the variable's position in the first cell. */
function documentedDefault(cells: string[], name: string): string | undefined {
  const position = (cells[0] ?? '').split(',').findIndex((n) => n.trim() === `\`${name}\``);
  return [...(cells[1] ?? '').matchAll(/`([^`]*)`/g)][position]?.[1];
}

const names = Object.keys(INT_SETTINGS) as IntSettingName[];
const tables = [
  { file: 'README.md', heading: /^## Configuration/m },
  { file: 'libs/config/README.md', heading: /^# libs\/config/m },
];

describe('the whole-number settings', () => {
  it('are what loadConfig applies: each default when unset, each bound accepted and one past it refused', () => {
    const readBack = (env: Record<string, string>) => JSON.stringify(loadConfig(env));
    const base = readBack({});
    for (const name of names) {
      const { default: fallback, min, max } = INT_SETTINGS[name];
      // An unset variable reads as its default: setting the default changes nothing but setVariables.
      if (fallback !== undefined)
        expect(readBack({ [name]: String(fallback) }).replace(`"setVariables":["${name}"]`, '"setVariables":[]'), name).toBe(base);
      expect(() => loadConfig({ [name]: String(min) }), `${name}=${min}`).not.toThrow();
      expect(() => loadConfig({ [name]: String(max) }), `${name}=${max}`).not.toThrow();
      expect(() => loadConfig({ [name]: String(max + 1) }), `${name}=${max + 1}`).toThrow(`${name} must be between ${min} and ${max}`);
      if (min > 0)
        expect(() => loadConfig({ [name]: String(min - 1) }), `${name}=${min - 1}`).toThrow(`${name} must be between ${min} and ${max}`);
    }
  });

  for (const { file, heading } of tables) {
    it(`have the defaults ${file}'s table gives them`, () => {
      for (const name of names) {
        const cells = rowOf(text(file), heading, name);
        const fallback = INT_SETTINGS[name].default;
        const documented = documentedDefault(cells, name);
        expect(documented, `${file}: ${name}`).toBe(fallback === undefined ? undefined : String(fallback));
      }
    });
  }

  it("have the ranges libs/config/README.md's table gives them", () => {
    for (const name of names) {
      const meaning = rowOf(text('libs/config/README.md'), /^# libs\/config/m, name)
        .slice(2)
        .join(' | ');
      const range = [...meaning.matchAll(/\((\d[\d,]*) to (\d[\d,]*)[;)]/g)].at(-1);
      expect(range, `${name}: "(min to max)" in ${meaning}`).toBeDefined();
      const [min, max] = [range![1]!, range![2]!].map((n) => Number(n.replaceAll(',', '')));
      expect({ min, max }, name).toEqual({ min: INT_SETTINGS[name].min, max: INT_SETTINGS[name].max });
    }
  });
});

describe('the component defaults', () => {
  it("are libs/config/README.md's generated table, row for row", () => {
    const readme = text('libs/config/README.md');
    const start = readme.indexOf(COMPONENT_DEFAULTS_HEADER);
    expect(start, 'the component defaults table').toBeGreaterThanOrEqual(0);
    const table = readme.slice(start + COMPONENT_DEFAULTS_HEADER.length + 1, readme.indexOf('\n\n', start)).split('\n');
    expect(table).toEqual(componentDefaultsRows());
  });

  it('are frozen whole numbers >= 0, and a mistyped one fails at import naming its component and key', () => {
    for (const [object, values] of Object.entries(COMPONENT_DEFAULTS)) {
      expect(Object.isFrozen(values), object).toBe(true);
      for (const [key, value] of Object.entries(values)) expect(Number.isSafeInteger(value) && value >= 0, `${object}.${key}`).toBe(true);
    }
    expect(() => componentDefaults('webhook adapter', { pollMs: 1.5 })).toThrow(
      'webhook adapter.pollMs must be a whole number >= 0, got 1.5',
    );
    expect(() => componentDefaults('webhook adapter', { pollMs: -1 })).toThrow(
      'webhook adapter.pollMs must be a whole number >= 0, got -1',
    );
  });
});
