import { setTimeout as sleep } from 'node:timers/promises';
import type { TurnReport } from '../../domain/turn-report.ts';
import {
  endOfObservation,
  type DeliveryTarget,
  type ProviderAdapter,
  type SendResult,
  type TurnEnd,
  type TurnObservation,
  type TurnRequest,
  type WatchHooks,
} from '../provider-adapter.ts';
import { httpExchange, retryAfterMs, type HttpExchange } from './webhook-http.ts';
import { signedHeaders } from './webhook-signature.ts';
import { REQUEST_ID_PLACEHOLDER, type WebhookSettings } from './webhook-spec.ts';
import { boundedError, observationFromBody, observationFromReport } from './webhook-turn-body.ts';
import { WEBHOOK_ADAPTER_DEFAULTS } from '../../config/component-defaults.ts';

/** The reports that arrived by signed callback (libs/db TurnReportRepository, wired by each process). */
export interface TurnReportsPort {
  find(requestId: string): Promise<TurnReport | null>;
}

export interface WebhookAdapterDeps {
  readonly reports: TurnReportsPort;
  /** Baton's callback route as agents reach it (e.g. `https://baton.example/v1/webhooks/callback`); an agent's `callbackUrl` setting wins. */
  readonly callbackUrl?: string | undefined;
  /** How often a followed turn is looked at (default 1 s). */
  readonly pollMs?: number;
  /** Wall clock of the signatures (tests move it). */
  readonly now?: () => number;
}

const DEFAULT_TIMEOUT_MS = WEBHOOK_ADAPTER_DEFAULTS.timeoutMs;
const MAX_ANSWER_BYTES = WEBHOOK_ADAPTER_DEFAULTS.maxAnswerBytes;

function settingsOf(target: DeliveryTarget): WebhookSettings | null {
  const s = target.settings;
  if (typeof s['url'] !== 'string' || typeof s['secret'] !== 'string') return null;
  return s as unknown as WebhookSettings;
}

function invalidSettings(target: DeliveryTarget): Error {
  return new Error(`agent ${target.handle} has no valid webhook settings (url and secret are required)`);
}

function bodyExcerpt(text: string): string {
  const t = text.trim();
  return t === '' ? '' : `: ${t.slice(0, 300)}`;
}

/**
 * The webhook provider: each turn is one signed JSON POST to the agent's `url` (Idempotency-Key:
 * the request id). The answer decides: 200 = finished (the body is the result), 202 = accepted
 * (the result comes by signed callback, stored by the API, or from a status URL), 409/423/429 =
 * busy (with Retry-After), 3xx and other 4xx = refused, no connection = not_sent, anything after
 * the connection without an answer (reset, deadline, abort) or a 5xx = lost. Signature scheme:
 * webhook-signature.ts; the full table: libs/adapters/README.md.
 */
export function createWebhookAdapter(deps: WebhookAdapterDeps): ProviderAdapter {
  const now = deps.now ?? Date.now;
  const pollMs = deps.pollMs ?? WEBHOOK_ADAPTER_DEFAULTS.pollMs;
  const namedStatusUrls = new Map<string, URL>();

  const headersFor = (settings: WebhookSettings, body: string): Record<string, string> => ({
    ...settings.headers,
    'user-agent': 'baton-webhook/1',
    accept: 'application/json',
    ...signedHeaders(settings.secret, body, now()),
  });

  const get = (settings: WebhookSettings, url: URL, signal: AbortSignal): Promise<HttpExchange> =>
    httpExchange({
      method: 'GET',
      url,
      headers: headersFor(settings, ''),
      timeoutMs: settings.timeoutMs ?? DEFAULT_TIMEOUT_MS,
      signal,
      maxBodyBytes: MAX_ANSWER_BYTES,
    });

  /** A URL the agent named for a turn, accepted only on the origin of the agent's own URL: signed GETs go nowhere else. */
  const rememberStatusUrl = (settings: WebhookSettings, requestId: string, named: unknown) => {
    if (typeof named !== 'string' || named === '') return;
    let url: URL;
    try {
      url = new URL(named, settings.url);
    } catch {
      return;
    }
    if (url.origin !== new URL(settings.url).origin) return;
    if (namedStatusUrls.size >= WEBHOOK_ADAPTER_DEFAULTS.statusUrlsKept)
      namedStatusUrls.delete(namedStatusUrls.keys().next().value as string);
    namedStatusUrls.set(requestId, url);
  };

  const statusUrlOf = (settings: WebhookSettings, requestId: string): URL | null => {
    const named = namedStatusUrls.get(requestId);
    if (named) return named;
    if (!settings.statusUrl) return null;
    return new URL(settings.statusUrl.replaceAll(REQUEST_ID_PLACEHOLDER, encodeURIComponent(requestId)));
  };

  /** Asks the status URL. @throws Error when it cannot be asked or answers nonsense. */
  const askStatus = async (settings: WebhookSettings, url: URL, signal: AbortSignal): Promise<TurnObservation> => {
    const answer = await get(settings, url, signal);
    if (answer.kind !== 'response') throw new Error(`status URL ${url.origin}${url.pathname}: ${answer.error}`);
    if (answer.status === 404) return { found: false, complete: true };
    if (answer.status !== 200) throw new Error(`status URL ${url.origin}${url.pathname} answered ${answer.status}`);
    const seen = observationFromBody(answer.body);
    if (!seen) throw new Error(`status URL ${url.origin}${url.pathname} answered a body that is not a turn status`);
    return seen;
  };

  const observe = async (target: DeliveryTarget, requestId: string, signal: AbortSignal): Promise<TurnObservation> => {
    const settings = settingsOf(target);
    if (!settings) throw invalidSettings(target);
    const report = await deps.reports.find(requestId);
    const reported = report ? observationFromReport(report) : null;
    if (reported && endOfObservation(reported)) return reported;
    const url = statusUrlOf(settings, requestId);
    // Without a status URL only a callback can show the turn, so its absence proves nothing.
    if (!url) return reported ?? { found: false, complete: false };
    try {
      const asked = await askStatus(settings, url, signal);
      // A running callback outranks a status URL that does not (yet) know the turn.
      return asked.found || !reported ? asked : reported;
    } catch (err) {
      if (reported) return reported;
      throw err;
    }
  };

  const sendResult = (settings: WebhookSettings, turn: TurnRequest, answer: HttpExchange): SendResult => {
    if (answer.kind === 'not_sent') return { outcome: 'not_sent', error: answer.error };
    if (answer.kind === 'lost') return { outcome: 'lost', error: answer.error };
    const { status, body, headers } = answer;
    if (status === 202) {
      let named: unknown = headers.location;
      let seen: TurnObservation = { found: true, status: 'accepted' };
      try {
        const parsed = JSON.parse(body) as Record<string, unknown>;
        named = parsed['statusUrl'] ?? named;
        if (parsed['status'] === 'running') seen = { found: true, status: 'running' };
      } catch {
        // A 202 needs no body.
      }
      rememberStatusUrl(settings, turn.requestId, named);
      return { outcome: 'accepted', seen };
    }
    if (status >= 200 && status < 300) {
      const seen =
        status === 204 || body.trim() === ''
          ? { found: true as const, status: 'returned' as const, result: { summary: '' } }
          : observationFromBody(body);
      if (!seen || !seen.found)
        return { outcome: 'accepted', seen: { found: true, status: 'returned', result: { summary: boundedError(body) } } };
      if (seen.status === 'busy') return { outcome: 'busy', detail: seen.error ?? 'the agent is busy' };
      if (seen.status === 'rejected') return { outcome: 'rejected', reason: seen.error ?? 'the agent refused the turn' };
      return { outcome: 'accepted', seen };
    }
    if (status === 409 || status === 423 || status === 429) {
      const wait = retryAfterMs(headers['retry-after'], now());
      return {
        outcome: 'busy',
        detail: boundedError(
          `the agent answered ${status} (busy)${wait === undefined ? '' : `; retry after ${Math.ceil(wait / 1000)} s`}${bodyExcerpt(body)}`,
        ),
        ...(wait === undefined ? {} : { retryAfterMs: wait }),
      };
    }
    if (status >= 300 && status < 400) {
      return {
        outcome: 'rejected',
        reason: boundedError(
          `the agent answered ${status} (redirects are not followed${headers.location ? `; Location: ${headers.location}` : ''})`,
        ),
      };
    }
    if (status >= 400 && status < 500)
      return { outcome: 'rejected', reason: boundedError(`the agent refused the turn with ${status}${bodyExcerpt(body)}`) };
    return { outcome: 'lost', error: boundedError(`the agent answered ${status}; the turn may have started${bodyExcerpt(body)}`) };
  };

  return {
    provider: 'webhook',
    // A busy agent answers 409/423/429 to the write itself, and nothing was done.
    reportsBusyOnSend: true,

    async sendTurn(target: DeliveryTarget, turn: TurnRequest, signal: AbortSignal): Promise<SendResult> {
      const settings = settingsOf(target);
      if (!settings) return { outcome: 'rejected', reason: invalidSettings(target).message };
      const callbackUrl = settings.callbackUrl ?? deps.callbackUrl ?? null;
      const body = JSON.stringify({
        requestId: turn.requestId,
        handoffId: turn.handoffId,
        attempt: turn.attempt,
        from: turn.from,
        title: turn.title,
        message: turn.message,
        focus: turn.focus,
        doneWhen: turn.doneWhen,
        context: turn.context,
        packet: turn.packet,
        session: target.target,
        callbackUrl,
      });
      const answer = await httpExchange({
        method: 'POST',
        url: new URL(settings.url),
        headers: { ...headersFor(settings, body), 'content-type': 'application/json', 'idempotency-key': turn.requestId },
        body,
        timeoutMs: settings.timeoutMs ?? DEFAULT_TIMEOUT_MS,
        signal,
        maxBodyBytes: MAX_ANSWER_BYTES,
      });
      return sendResult(settings, turn, answer);
    },

    observeTurn: observe,

    async isBusy(target: DeliveryTarget, signal: AbortSignal): Promise<boolean> {
      const settings = settingsOf(target);
      if (!settings) throw invalidSettings(target);
      if (!settings.busyUrl) return false;
      const answer = await get(settings, new URL(settings.busyUrl), signal);
      if (answer.kind !== 'response') throw new Error(`busy URL: ${answer.error}`);
      if (answer.status !== 200) throw new Error(`busy URL answered ${answer.status}`);
      let busy: unknown;
      try {
        busy = (JSON.parse(answer.body) as Record<string, unknown>)['busy'];
      } catch {
        busy = undefined;
      }
      if (typeof busy !== 'boolean') throw new Error('busy URL did not answer {"busy": true|false}');
      return busy;
    },

    async waitForTurn(target: DeliveryTarget, requestId: string, hooks: WatchHooks, signal: AbortSignal): Promise<TurnEnd> {
      let sawRunning = false;
      let failed = 0;
      let absent = 0;
      try {
        for (;;) {
          if (signal.aborted) throw signal.reason;
          let seen: TurnObservation | null = null;
          try {
            seen = await observe(target, requestId, signal);
            failed = 0;
          } catch (err) {
            if (signal.aborted) throw signal.reason;
            if (++failed >= WEBHOOK_ADAPTER_DEFAULTS.failedLooksMax) throw err;
          }
          if (seen) {
            const end = endOfObservation(seen);
            if (end) {
              namedStatusUrls.delete(requestId);
              return end;
            }
            if (seen.found && seen.status === 'running' && !sawRunning) {
              sawRunning = true;
              await hooks.onRunning();
            }
            absent = seen.found || !seen.complete ? 0 : absent + 1;
            if (absent >= WEBHOOK_ADAPTER_DEFAULTS.absentLooksMax)
              return { status: 'unobservable', error: "the agent's status URL does not know the turn (404)" };
          }
          await sleep(pollMs, undefined, { signal });
        }
      } catch (err) {
        // Aborted: the turn keeps running at the agent and is observed again later.
        throw signal.aborted ? signal.reason : err;
      }
    },

    async close() {
      namedStatusUrls.clear();
    },
  };
}
