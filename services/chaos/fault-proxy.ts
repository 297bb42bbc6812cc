import net from 'node:net';

/** One proxied connection: the client's socket and the proxy's own to the server. */
export interface ProxyLink {
  readonly client: net.Socket;
  readonly upstream: net.Socket;
  /** Breaks both sides at once (the client sees its connection reset or closed). */
  drop: () => void;
}

/**
 * Fault points for tests that need to act on the bytes themselves (a Postgres reply swallowed
 * after its commit: test/support/tcp-proxy.ts). Each tap sees a chunk as it arrives, before
 * latency or a stall apply, and returns true when it took the chunk (then it is not forwarded).
 */
export interface ProxyTaps {
  toServer?(link: ProxyLink, chunk: Buffer): boolean;
  toClient?(link: ProxyLink, chunk: Buffer): boolean;
}

export interface FaultProxyOptions {
  readonly targetPort: number;
  readonly targetHost?: string;
  /** The loopback port to listen on; absent or 0: a free one, kept across refuse() and accept(). */
  readonly port?: number;
  readonly taps?: ProxyTaps;
}

/** One direction of a link: chunks leave in arrival order, each no earlier than its due time, none while stalled. */
class Pipe {
  private queue: Array<{ chunk: Buffer; due: number }> = [];
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly proxy: FaultProxy,
    private readonly write: (chunk: Buffer) => void,
  ) {}

  push(chunk: Buffer): void {
    const delay = this.proxy.nextDelayMs();
    if (this.queue.length === 0 && delay === 0 && !this.proxy.stalled) {
      this.write(chunk);
      return;
    }
    // Never overtake an earlier chunk: a byte stream stays a byte stream.
    const last = this.queue.at(-1)?.due ?? 0;
    this.queue.push({ chunk, due: Math.max(Date.now() + delay, last) });
    this.pump();
  }

  /** Forwards whatever is due (nothing while the proxy stalls) and waits for the rest. */
  pump(): void {
    if (this.proxy.stalled || this.timer) return;
    const now = Date.now();
    while (this.queue.length > 0 && this.queue[0]!.due <= now) this.write(this.queue.shift()!.chunk);
    const head = this.queue[0];
    if (head) {
      this.timer = setTimeout(() => {
        this.timer = null;
        this.pump();
      }, head.due - now);
    }
  }

  clear(): void {
    this.queue = [];
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }
}

interface LiveLink extends ProxyLink {
  readonly up: Pipe;
  readonly down: Pipe;
}

/**
 * A TCP proxy on a loopback port in front of one server (Postgres, Redis), that injects the
 * network faults the chaos run (services/chaos) and the fault tests need, without touching the
 * server or the client:
 * - `setLatency(ms, jitterMs)`: every chunk, both ways, is delayed (order kept per direction);
 * - `stall()` / `resume()`: every connection, open or new, stays open and nothing is forwarded
 *   either way (a frozen server, a partition: no error, no answer); resuming forwards what was
 *   held back, in order;
 * - `drop()`: breaks every open connection (new ones are accepted as usual);
 * - `refuse()` / `accept()`: stop listening and break everything (a server that is gone), then
 *   listen again on the same port.
 * Faults combine: a stalled proxy with latency delays what it held once it resumes.
 */
export class FaultProxy {
  private readonly links = new Set<LiveLink>();
  private server: net.Server | null = null;
  private listenPort: number;
  private latencyMs = 0;
  private jitterMs = 0;
  private isStalled = false;
  private acceptedTotal = 0;

  private constructor(private readonly opts: FaultProxyOptions) {
    this.listenPort = opts.port ?? 0;
  }

  /** Listens on 127.0.0.1 (`opts.port`, or a free port) and forwards to the target. */
  static async start(opts: FaultProxyOptions): Promise<FaultProxy> {
    const proxy = new FaultProxy(opts);
    await proxy.accept();
    return proxy;
  }

  get port(): number {
    return this.listenPort;
  }

  /** Connections open through the proxy right now. */
  get connections(): number {
    return this.links.size;
  }

  /** Connections accepted since the start (to wait for a client's reconnect attempts). */
  get accepted(): number {
    return this.acceptedTotal;
  }

  get stalled(): boolean {
    return this.isStalled;
  }

  /** The delay for the next chunk: the latency plus a random share of the jitter. */
  nextDelayMs(): number {
    if (this.latencyMs === 0 && this.jitterMs === 0) return 0;
    return this.latencyMs + Math.floor(Math.random() * (this.jitterMs + 1));
  }

  /** Delays every chunk from now on by `ms` plus up to `jitterMs`; (0, 0) forwards at once again. */
  setLatency(ms: number, jitterMs = 0): void {
    this.latencyMs = Math.max(0, ms);
    this.jitterMs = Math.max(0, jitterMs);
  }

  /** Holds every connection (open and new) open and forwards nothing, until resume(). */
  stall(): void {
    this.isStalled = true;
  }

  /** Forwards again, first what was held back. */
  resume(): void {
    this.isStalled = false;
    for (const link of this.links) {
      link.up.pump();
      link.down.pump();
    }
  }

  /** Breaks every open connection; keeps listening. Returns how many were broken. */
  drop(): number {
    const open = [...this.links];
    for (const link of open) link.drop();
    return open.length;
  }

  /** Stops listening and breaks every open connection: connecting is refused until accept(). */
  async refuse(): Promise<void> {
    const s = this.server;
    this.server = null;
    this.drop();
    if (s) await new Promise<void>((resolve) => s.close(() => resolve()));
  }

  /** Listens (again) on the proxy's port. */
  accept(): Promise<void> {
    if (this.server) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      const server = net.createServer((client) => this.link(client));
      server.once('error', reject);
      server.listen(this.listenPort, '127.0.0.1', () => {
        server.off('error', reject);
        this.listenPort = (server.address() as net.AddressInfo).port;
        this.server = server;
        resolve();
      });
    });
  }

  /** Stops for good: refuses and breaks everything. */
  close(): Promise<void> {
    this.isStalled = false;
    return this.refuse();
  }

  private link(client: net.Socket): void {
    this.acceptedTotal++;
    const upstream = net.connect(this.opts.targetPort, this.opts.targetHost ?? '127.0.0.1');
    const taps = this.opts.taps;
    const link: LiveLink = {
      client,
      upstream,
      up: new Pipe(this, (chunk) => upstream.write(chunk)),
      down: new Pipe(this, (chunk) => client.write(chunk)),
      drop: () => {
        link.up.clear();
        link.down.clear();
        client.destroy();
        upstream.destroy();
        this.links.delete(link);
      },
    };
    this.links.add(link);
    client.on('error', link.drop).on('close', link.drop);
    upstream.on('error', link.drop).on('close', link.drop);
    client.on('data', (chunk: Buffer) => {
      if (taps?.toServer?.(link, chunk)) return;
      link.up.push(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      if (taps?.toClient?.(link, chunk)) return;
      link.down.push(chunk);
    });
  }
}
