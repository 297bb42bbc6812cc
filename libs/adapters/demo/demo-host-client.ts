import http from 'node:http';
import type { DemoHostPort, DemoObservation, DemoSettings, DemoTurnInput, DemoTurnStatus, DemoWrite, ReceiveOutcome } from './demo-agent-host.ts';

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

/** DemoHostPort over HTTP, with a keep-alive agent so each call is one round trip. */
export class DemoHostClient implements DemoHostPort {
  private readonly agent = new http.Agent({ keepAlive: true, maxSockets: 256 });

  constructor(private readonly baseUrl: string) {}

  private request<T>(method: string, path: string, body?: unknown, timeoutMs = 10_000): Promise<T> {
    const url = new URL(path, this.baseUrl);
    const payload = body === undefined ? undefined : JSON.stringify(body);
    return new Promise<T>((resolve, reject) => {
      let sent = false;
      const req = http.request(
        url,
        {
          method,
          agent: this.agent,
          headers: payload ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) } : {},
          timeout: timeoutMs,
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            const text = Buffer.concat(chunks).toString('utf8');
            if ((res.statusCode ?? 500) >= 400) return reject(new Error(`demo host ${res.statusCode}: ${text}`));
            try {
              resolve(JSON.parse(text) as T);
            } catch (err) {
              reject(new DemoReplyLost(err));
            }
          });
          res.on('error', (err) => reject(new DemoReplyLost(err)));
        },
      );
      req.on('timeout', () => req.destroy(new Error('timed out')));
      req.on('error', (err: NodeJS.ErrnoException) => {
        if (!sent || err.code === 'ECONNREFUSED') reject(new DemoHostUnreachable(err));
        else reject(new DemoReplyLost(err));
      });
      req.end(payload, () => {
        sent = true;
      });
    });
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
    this.agent.destroy();
  }
}
