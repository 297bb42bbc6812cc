import { Pool, type Dispatcher } from 'undici';
import type {
  DemoHostPort,
  DemoObservation,
  DemoSettings,
  DemoTurnInput,
  DemoTurnStatus,
  DemoWrite,
  ReceiveOutcome,
} from './demo-agent-host.ts';
import { DEMO_ADAPTER_DEFAULTS } from '../../config/component-defaults.ts';

/** Thrown when the request was written but no answer came back (the reply was lost). */
export class DemoReplyLost extends Error {
  constructor(cause: unknown) {
    super(`reply lost: ${(cause as Error)?.message ?? String(cause)}`, { cause });
    this.name = 'DemoReplyLost';
  }
}

/** Thrown when nothing reached the host (connection refused): the write provably did not happen. */
export class DemoHostUnreachable extends Error {
  constructor(cause: unknown) {
    super(`demo host unreachable: ${(cause as Error)?.message ?? String(cause)}`, { cause });
    this.name = 'DemoHostUnreachable';
  }
}

/**
 * Errors of a request that never reached the host: nothing was written. Anything else after
 * the request started (a reset, a timeout, a closed socket) may have come after the host read
 * it, so it counts as a lost reply.
 */
const NOT_CONNECTED = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'UND_ERR_CONNECT_TIMEOUT']);

function neverConnected(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  const causeCode = (err as { cause?: { code?: unknown } } | null)?.cause?.code;
  return NOT_CONNECTED.has(String(code)) || NOT_CONNECTED.has(String(causeCode));
}

/**
 * DemoHostPort over HTTP: undici pools of keep-alive connections, so each call is one round
 * trip at less client CPU than node:http's request (docs/performance-history.md, "Kept
 * statement texts and row templates").
 * Long polls (`waitForChange`, one per followed turn, each holding its connection for up to its
 * window) have a pool of their own without a cap: in the calls' capped pool they would hold
 * every connection once many turns are followed, and a new turn's write would wait for a long
 * poll to end (docs/performance-history.md, "Warm processes, and long polls apart from writes").
 */
export class DemoHostClient implements DemoHostPort {
  private readonly calls: Pool;
  private readonly watches: Pool;

  constructor(baseUrl: string, callConnections = DEMO_ADAPTER_DEFAULTS.hostCallConnections) {
    const origin = new URL(baseUrl).origin;
    this.calls = new Pool(origin, { connections: callConnections, pipelining: 1 });
    this.watches = new Pool(origin, { connections: null, pipelining: 1 });
  }

  private async request<T>(
    method: 'GET' | 'POST',
    path: string,
    body?: unknown,
    timeoutMs = DEMO_ADAPTER_DEFAULTS.hostCallTimeoutMs,
    pool = this.calls,
  ): Promise<T> {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    let res: Dispatcher.ResponseData;
    try {
      res = await pool.request({
        path,
        method,
        headers: payload === undefined ? {} : { 'content-type': 'application/json' },
        body: payload ?? null,
        headersTimeout: timeoutMs,
        bodyTimeout: timeoutMs,
      });
    } catch (err) {
      if (neverConnected(err)) throw new DemoHostUnreachable(err);
      throw new DemoReplyLost(err);
    }
    let text: string;
    try {
      text = await res.body.text();
    } catch (err) {
      throw new DemoReplyLost(err);
    }
    if (res.statusCode >= 400) throw new Error(`demo host ${res.statusCode}: ${text}`);
    try {
      return JSON.parse(text) as T;
    } catch (err) {
      throw new DemoReplyLost(err);
    }
  }

  receiveTurn(session: string, turn: DemoTurnInput, settings: DemoSettings): Promise<ReceiveOutcome> {
    return this.request('POST', `/sessions/${encodeURIComponent(session)}/turns`, { turn, settings });
  }

  observe(session: string, requestId: string): Promise<DemoObservation> {
    return this.request('GET', `/sessions/${encodeURIComponent(session)}/turns/${encodeURIComponent(requestId)}`);
  }

  waitForChange(session: string, requestId: string, known: DemoTurnStatus | null, timeoutMs: number): Promise<DemoObservation> {
    const q = new URLSearchParams({ known: known ?? '', timeoutMs: String(timeoutMs) });
    return this.request(
      'GET',
      `/sessions/${encodeURIComponent(session)}/turns/${encodeURIComponent(requestId)}/change?${q}`,
      undefined,
      timeoutMs + 10_000,
      this.watches,
    );
  }

  async isBusy(session: string): Promise<boolean> {
    const { busy } = await this.request<{ busy: boolean }>('GET', `/sessions/${encodeURIComponent(session)}/busy`);
    return busy;
  }

  /** The host's write log (of one session when named): see `DemoAgentHost.writes`. */
  writes(session?: string): Promise<DemoWrite[]> {
    return this.request('GET', session === undefined ? '/writes' : `/sessions/${encodeURIComponent(session)}/writes`);
  }

  close(): void {
    // Closing: a pool that fails to close has no request left to answer.
    void this.calls.destroy().catch(() => undefined);
    void this.watches.destroy().catch(() => undefined);
  }
}
