import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

/**
 * The relative link targets of a Markdown text: inline links and images (`[text](target)`) and
 * reference definitions (`[name]: target`), outside fenced code blocks and code spans, without
 * their `#fragment` or `?query`. Links with a scheme (`https:`, `mailto:`) and fragment-only
 * links (`#section`) are left out: they name no file of the repository.
 */
function relativeLinks(markdown: string): string[] {
  const prose = markdown.replace(/^(```|~~~)[^\n]*\n[\s\S]*?^\1[^\n]*$/gm, '').replace(/(`+)[\s\S]*?\1/g, '');
  const targets = [
    ...[...prose.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+["'(][^)]*)?\)/g)].map((m) => m[1] ?? ''),
    ...[...prose.matchAll(/^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)/gm)].map((m) => m[1] ?? ''),
  ];
  return targets
    .filter((t) => t !== '' && !t.startsWith('#') && !/^[a-z][a-z0-9+.-]*:/i.test(t))
    .map((t) => decodeURIComponent(t.replace(/[#?].*$/, '')));
}

/** The top folders of the repository a path written in code font may start with. */
const REPO_FOLDERS = ['libs', 'services', 'workers', 'main', 'test', 'docs', 'prisma', 'scripts', 'bin', 'examples'];

/**
 * Repository paths written in code font (`libs/db/records.ts`), outside fenced code blocks:
 * those that start with a top folder of the repository and hold no placeholder (`<name>`),
 * wildcard or space, without a `:line` or `#fragment` after them.
 */
function pathsInCode(markdown: string): string[] {
  const prose = markdown.replace(/^(```|~~~)[^\n]*\n[\s\S]*?^\1[^\n]*$/gm, '');
  const folders = new RegExp(`^(${REPO_FOLDERS.join('|')})/[^\\s<>*{}]*$`);
  return [...prose.matchAll(/`([^`\n]+)`/g)].map((m) => (m[1] ?? '').replace(/[:#].*$/, '')).filter((p) => folders.test(p));
}

/** The links of `file` (relative to the repository) whose target does not exist. */
function brokenLinks(file: string): string[] {
  const text = readFileSync(join(ROOT, file), 'utf8');
  return relativeLinks(text).filter((target) => {
    const path = target.startsWith('/') ? join(ROOT, target) : resolve(ROOT, dirname(file), target);
    return !existsSync(path);
  });
}

const DOCS = [
  'README.md',
  ...readdirSync(join(ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => relative(ROOT, join(ROOT, 'docs', f))),
];

describe('relative links in README.md and docs/*.md', () => {
  it.each(DOCS)('every relative link in %s names a file or folder that exists', (file) => {
    expect(brokenLinks(file)).toEqual([]);
  });

  it.each(DOCS)('every repository path written in code font in %s exists', (file) => {
    const missing = pathsInCode(readFileSync(join(ROOT, file), 'utf8')).filter((path) => !existsSync(join(ROOT, path)));
    expect(missing).toEqual([]);
  });

  it('every file the sequence diagram in docs/ARCHITECTURE.md names is a file of libs/, services/ or workers/', () => {
    const text = readFileSync(join(ROOT, 'docs/ARCHITECTURE.md'), 'utf8');
    const diagram = text.split('```mermaid\n')[1]?.split('\n```')[0] ?? '';
    const named = [...new Set([...diagram.matchAll(/[\w-]+\.(?:ts|lua)\b/g)].map((m) => m[0]))];
    const files = new Set(
      ['libs', 'services', 'workers'].flatMap((top) =>
        readdirSync(join(ROOT, top), { recursive: true }).map((f) => String(f).split('/').pop()),
      ),
    );
    expect(named.length).toBeGreaterThan(0);
    expect(named.filter((name) => !files.has(name))).toEqual([]);
  });

  it('README.md links the architecture page', () => {
    expect(relativeLinks(readFileSync(join(ROOT, 'README.md'), 'utf8'))).toContain('docs/ARCHITECTURE.md');
  });

  it('reads links as a Markdown renderer does', () => {
    const sample = [
      'See [the map](docs/ARCHITECTURE.md#glossary), [a folder](../libs/db/) and ![a picture](img/a%20b.png "title").',
      '[web](https://example.com), [mail](mailto:a@b.c), [here](#above), `[not](in-code.md)`.',
      '```md',
      '[fenced](nowhere.md)',
      '```',
      '[ref]: ./other.md',
    ].join('\n');
    expect(relativeLinks(sample)).toEqual(['docs/ARCHITECTURE.md', '../libs/db/', 'img/a b.png', './other.md']);
  });

  it('reads repository paths in code font, not placeholders, commands or fenced blocks', () => {
    const sample = [
      'In `libs/db/records.ts:12`, `services/api/routes/<area>/index.ts`, `npm test`, `test/unit/*.test.ts`,',
      '`docs/API.md#limits` and `workers/`.',
      '```sh',
      '`libs/nowhere.ts`',
      '```',
    ].join('\n');
    expect(pathsInCode(sample)).toEqual(['libs/db/records.ts', 'docs/API.md', 'workers/']);
  });
});
