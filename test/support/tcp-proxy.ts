import net from 'node:net';

/**
 * A TCP proxy on a fixed loopback port that can be cut and restored, to take a server (Postgres)
 * away from Baton and give it back without touching the server itself.
 */
export async function startTcpProxy(targetPort: number, targetHost = '127.0.0.1') {
  const sockets = new Set<net.Socket>();
  let server: net.Server | null = null;
  let port = 0;
  const listen = () =>
    new Promise<void>((resolve, reject) => {
      server = net.createServer((client) => {
        const upstream = net.connect(targetPort, targetHost);
        sockets.add(client);
        sockets.add(upstream);
        const drop = () => {
          client.destroy();
          upstream.destroy();
          sockets.delete(client);
          sockets.delete(upstream);
        };
        client.on('error', drop).on('close', drop);
        upstream.on('error', drop).on('close', drop);
        client.pipe(upstream).pipe(client);
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
    /** Refuses new connections and breaks the open ones. */
    async cut(): Promise<void> {
      const s = server;
      server = null;
      for (const socket of sockets) socket.destroy();
      sockets.clear();
      if (s) await new Promise<void>((r) => s.close(() => r()));
    },
    /** Listens again on the same port. */
    restore: listen,
    close(): Promise<void> {
      return this.cut();
    },
  };
}
