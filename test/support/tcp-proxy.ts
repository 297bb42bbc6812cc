import net from 'node:net';

/** Postgres backend message type of ReadyForQuery: the statement (and its implicit commit) is over. */
const READY_FOR_QUERY = 0x5a;

interface Link {
  readonly client: net.Socket;
  readonly upstream: net.Socket;
  /** Bytes held back while frozen, per direction. */
  readonly heldUp: Buffer[];
  readonly heldDown: Buffer[];
  /** Set once this connection carried the marked statement: its reply is swallowed, then the link is cut. */
  cutting: { reply: Buffer; done: () => void } | null;
  drop(): void;
}

/**
 * A TCP proxy on a fixed loopback port that can take a server (Postgres) away from Baton and
 * give it back without touching the server itself:
 * - `cut()` / `restore()`: refuse connections and break the open ones (a server that is gone);
 * - `freeze()` / `thaw()`: keep every connection, old and new, open but forward nothing in
 *   either direction (a frozen server, a partition); thawing delivers what was held back;
 * - `cutAfterReply(marker)`: the next statement whose bytes contain `marker` goes through and
 *   runs (and commits) on the server, but its reply never reaches the client: the proxy waits
 *   for the server's ReadyForQuery, swallows it and breaks the connection (a reply lost just
 *   after the commit).
 */
export async function startTcpProxy(targetPort: number, targetHost = '127.0.0.1') {
  const links = new Set<Link>();
  let server: net.Server | null = null;
  let port = 0;
  let frozen = false;
  let accepted = 0;
  let marked: { marker: Buffer; done: () => void } | null = null;

  const swallowUntilReady = (link: Link, chunk: Buffer) => {
    const cut = link.cutting!;
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

  const listen = () =>
    new Promise<void>((resolve, reject) => {
      server = net.createServer((client) => {
        accepted++;
        const upstream = net.connect(targetPort, targetHost);
        const link: Link = {
          client,
          upstream,
          heldUp: [],
          heldDown: [],
          cutting: null,
          drop() {
            client.destroy();
            upstream.destroy();
            links.delete(link);
          },
        };
        links.add(link);
        client.on('error', link.drop).on('close', link.drop);
        upstream.on('error', link.drop).on('close', link.drop);
        client.on('data', (chunk: Buffer) => {
          if (frozen) return void link.heldUp.push(chunk);
          if (marked && chunk.includes(marked.marker)) {
            link.cutting = { reply: Buffer.alloc(0), done: marked.done };
            marked = null;
          }
          upstream.write(chunk);
        });
        upstream.on('data', (chunk: Buffer) => {
          if (link.cutting) return swallowUntilReady(link, chunk);
          if (frozen) return void link.heldDown.push(chunk);
          client.write(chunk);
        });
      });
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => {
        port = (server!.address() as net.AddressInfo).port;
        resolve();
      });
    });
  await listen();
  return {
    get port() {
      return port;
    },
    /** Connections open through the proxy right now. */
    get connections() {
      return links.size;
    },
    /** Connections accepted since the start (to wait for a client's reconnect attempts). */
    get accepted() {
      return accepted;
    },
    /** Refuses new connections and breaks the open ones. */
    async cut(): Promise<void> {
      const s = server;
      server = null;
      for (const link of [...links]) link.drop();
      if (s) await new Promise<void>((r) => s.close(() => r()));
    },
    /** Listens again on the same port. */
    restore: listen,
    /** Holds every connection (open and new) open and forwards nothing, until thaw(). */
    freeze(): void {
      frozen = true;
    },
    /** Forwards again, first what was held back. */
    thaw(): void {
      frozen = false;
      for (const link of links) {
        for (const chunk of link.heldUp.splice(0)) link.upstream.write(chunk);
        for (const chunk of link.heldDown.splice(0)) link.client.write(chunk);
      }
    },
    /**
     * Arms a lost reply: the next statement containing `marker` runs on the server, its reply is
     * swallowed and its connection broken. Resolves once that happened.
     */
    cutAfterReply(marker: string): Promise<void> {
      return new Promise<void>((done) => {
        marked = { marker: Buffer.from(marker, 'utf8'), done };
      });
    },
    close(): Promise<void> {
      return this.cut();
    },
  };
}
