/**
 * Size limits of everything a caller can send. docs/API.md repeats them; the API's JSON
 * schemas are built from these numbers, so there is one source.
 */
export const LIMITS = {
  bodyBytes: 256 * 1024,
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
