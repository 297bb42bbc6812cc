import { LIMITS } from '../../domain/limits.ts';
import { unstorableTextAt } from '../../domain/storable-text.ts';
import type { TurnReport } from '../../domain/turn-report.ts';
import { reportsUsage, usageOf, type TurnUsage } from '../../domain/turn-usage.ts';
import type { ObservedStatus, TurnObservation } from '../provider-adapter.ts';

const STATUSES: readonly ObservedStatus[] = ['accepted', 'running', 'returned', 'failed', 'interrupted', 'busy', 'rejected'];

/** Replaces what Postgres text cannot hold (NUL, lone surrogates) and bounds the length. */
function storable(text: string, max: number): string {
  return text.replace(/\u0000|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g, '\uFFFD').slice(0, max);
}

export function boundedError(text: string): string {
  return storable(text, LIMITS.focus);
}

/**
 * The usable parts of a `usage` a webhook agent answered with (its answer to the write or its
 * status URL: not checked as strictly as a signed callback's, so what is not a usable count, cost
 * or model is left out rather than refused), or undefined when it reported none.
 */
function answeredUsage(value: unknown): TurnUsage | undefined {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
  const usage = usageOf(value);
  return reportsUsage(usage) ? usage : undefined;
}

function observation(status: ObservedStatus, summary: unknown, output: unknown, error: unknown, usage?: TurnUsage): TurnObservation {
  const used = usage ? { usage } : {};
  switch (status) {
    case 'returned':
      return {
        found: true,
        status,
        ...used,
        result: {
          summary: typeof summary === 'string' ? storable(summary, LIMITS.contextSummary) : '',
          // An output Postgres cannot store would fail the transition that records the turn.
          ...(output !== undefined && output !== null && unstorableTextAt(output) === null ? { output } : {}),
        },
      };
    case 'failed':
    case 'interrupted':
    case 'busy':
    case 'rejected':
      return {
        found: true,
        status,
        ...(status === 'failed' || status === 'interrupted' ? used : {}),
        error: boundedError(
          typeof error === 'string' && error !== '' ? error : typeof summary === 'string' && summary !== '' ? summary : status,
        ),
      };
    case 'accepted':
    case 'running':
      return { found: true, status };
  }
}

/**
 * Reads what a webhook agent answered about a turn: the body of a 200 to the write, or of its
 * status URL: `{ "status"?, "summary"?, "output"?, "error"?, "usage"? }`. A missing status means returned.
 * @returns null when the body is not such an object.
 */
export function observationFromBody(text: string): TurnObservation | null {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return null;
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return null;
  const b = body as Record<string, unknown>;
  const status = b['status'] === undefined ? 'returned' : b['status'];
  if (typeof status !== 'string' || !(STATUSES as readonly string[]).includes(status)) return null;
  return observation(status as ObservedStatus, b['summary'], b['output'], b['error'], answeredUsage(b['usage']));
}

export function observationFromReport(report: TurnReport): TurnObservation {
  return observation(report.status, report.summary, report.output, report.error, report.usage ?? undefined);
}
