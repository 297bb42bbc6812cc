import { FaultProxy, type ProxyLink } from '../../services/chaos/fault-proxy.ts';

/** Postgres backend message type of ReadyForQuery: the statement (and its implicit commit) is over. */
const READY_FOR_QUERY = 0x5a;

/** A connection that carried the marked statement: its reply is swallowed, then the link is cut. */
interface Cutting {
  reply: Buffer;
  done: () => void;
}

/**
 * A TCP proxy on a fixed loopback port that can take a server (Postgres) away from Baton and
 * give it back without touching the server itself (the chaos run's FaultProxy, with the names
 * the tests use, plus one Postgres-specific fault):
 * - `cut()` / `restore()`: refuse connections and break the open ones (a server that is gone);
 * - `freeze()` / `thaw()`: keep every connection, old and new, open but forward nothing in
 *   either direction (a frozen server, a partition); thawing delivers what was held back;
 * - `latency(ms, jitterMs)`: every chunk is delayed (a server far away), order kept;
 * - `cutAfterReply(marker)`: the next statement whose bytes contain `marker` goes through and
 *   runs (and commits) on the server, but its reply never reaches the client: the proxy waits
 *   for the server's ReadyForQuery, swallows it and breaks the connection (a reply lost just
 *   after the commit).
 */
export async function startTcpProxy(targetPort: number, targetHost = '127.0.0.1') {
  const cutting = new WeakMap<ProxyLink, Cutting>();
  let marked: { marker: Buffer; done: () => void } | null = null;

  const swallowUntilReady = (link: ProxyLink, cut: Cutting, chunk: Buffer) => {
    cut.reply = Buffer.concat([cut.reply, chunk]);
    // Backend messages: a type byte and an int32 length that counts itself.
    let at = 0;
    while (cut.reply.length >= at + 5) {
      const type = cut.reply[at]!;
      const length = cut.reply.readInt32BE(at + 1);
      if (cut.reply.length < at + 1 + length) return;
      if (type === READY_FOR_QUERY) {
        link.drop();
        cut.done();
        return;
      }
      at += 1 + length;
    }
  };

  const proxy = await FaultProxy.start({
    targetPort,
    targetHost,
    taps: {
      toServer(link, chunk) {
        if (marked && chunk.includes(marked.marker)) {
          cutting.set(link, { reply: Buffer.alloc(0), done: marked.done });
          marked = null;
        }
        return false;
      },
      toClient(link, chunk) {
        const cut = cutting.get(link);
        if (!cut) return false;
        swallowUntilReady(link, cut, chunk);
        return true;
      },
    },
  });
  return {
    get port() {
      return proxy.port;
    },
    /** Connections open through the proxy right now. */
    get connections() {
      return proxy.connections;
    },
    /** Connections accepted since the start (to wait for a client's reconnect attempts). */
    get accepted() {
      return proxy.accepted;
    },
    /** Refuses new connections and breaks the open ones. */
    cut: (): Promise<void> => proxy.refuse(),
    /** Listens again on the same port. */
    restore: (): Promise<void> => proxy.accept(),
    /** Holds every connection (open and new) open and forwards nothing, until thaw(). */
    freeze: (): void => proxy.stall(),
    /** Forwards again, first what was held back. */
    thaw: (): void => proxy.resume(),
    /** Delays every chunk, both ways, by `ms` plus up to `jitterMs` (a distant Postgres); (0) for none. */
    latency: (ms: number, jitterMs = 0): void => proxy.setLatency(ms, jitterMs),
    /**
     * Arms a lost reply: the next statement containing `marker` runs on the server, its reply is
     * swallowed and its connection broken. Resolves once that happened.
     */
    cutAfterReply(marker: string): Promise<void> {
      return new Promise<void>((done) => {
        marked = { marker: Buffer.from(marker, 'utf8'), done };
      });
    },
    close: (): Promise<void> => proxy.close(),
  };
}
