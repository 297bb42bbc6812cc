/**
 * Size limits of everything a caller can send. The API's JSON schemas are built from these
 * numbers, so there is one source; docs/API.md's table is generated from LIMIT_DOCS
 * (`npm run docs-tables -- --write`) and a test holds the two together.
 */
export const LIMITS = {
  bodyBytes: 256 * 1024,
  jsonDepth: 32,
  handle: 64,
  displayName: 120,
  deliveryTarget: 512,
  providerSettingsBytes: 8 * 1024,
  message: 32_000,
  title: 200,
  focus: 2_000,
  doneWhen: 2_000,
  contextSummary: 8_000,
  listItems: 20,
  listItem: 1_000,
  idempotencyKey: 200,
  factText: 4_000,
  factsPerSession: 2_000,
  tokenName: 100,
  dueMinutesMax: 60 * 24 * 365,
  pageSizeDefault: 50,
  pageSizeMax: 200,
} as const;

/** What each limit bounds, for docs/API.md. */
export const LIMIT_DOCS: Record<keyof typeof LIMITS, string> = {
  bodyBytes: 'bytes of one request body (413 body_too_large above it)',
  jsonDepth: 'levels of objects and arrays nested in one request body, the body itself being level 1 (400 too_deeply_nested above it)',
  handle: 'characters of an agent or project id (letters, digits, `.`, `_`, `-`)',
  displayName: 'characters of an agent or project display name',
  deliveryTarget: 'characters of an agent\'s session or endpoint',
  providerSettingsBytes: 'bytes of an agent\'s provider settings, as JSON',
  message: 'characters of a handoff message',
  title: 'characters of a handoff title or a session title',
  focus: 'characters of a focus, a close note, or a release reason',
  doneWhen: 'characters of done-when criteria',
  contextSummary: 'characters of a context summary, a session summary, or a return summary',
  listItems: 'open questions, next steps, or cited facts in one request',
  listItem: 'characters of each open question or next step',
  idempotencyKey: 'characters of an idempotency key',
  factText: 'characters of a fact',
  factsPerSession: 'facts one session holds (409 too_many_facts above it)',
  tokenName: 'characters of a token\'s label',
  dueMinutesMax: 'minutes ahead a due time may be (`dueMinutes`)',
  pageSizeDefault: 'handoffs in a page when `limit` is not given',
  pageSizeMax: 'handoffs in a page at most (`limit`)',
};
