import http from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A refusing HTTP(S) proxy on 127.0.0.1 that records every attempt to leave the machine. Tests
 * point the real agent CLIs at it (`env()`: HTTP_PROXY, HTTPS_PROXY, ALL_PROXY, with NO_PROXY for
 * loopback so the fake model server is reached directly) and then assert `attempts` is empty:
 * a CLI that tries to phone home (telemetry, plugin sync, update checks) is caught, and nothing
 * ever gets out, since every request and CONNECT is answered 403 and closed.
 */
export interface EgressTripwire {
  readonly url: string;
  /** Every attempt, in order: `CONNECT host:port` or `GET http://host/path`. */
  readonly attempts: readonly string[];
  /** The proxy variables to give a child process (upper and lower case; both are honoured by some tools). */
  env(): Record<string, string>;
  close(): Promise<void>;
}

export async function startEgressTripwire(): Promise<EgressTripwire> {
  const attempts: string[] = [];
  const server = http.createServer((req, res) => {
    attempts.push(`${req.method ?? '?'} ${req.url ?? ''}`);
    res.writeHead(403, { connection: 'close' }).end('egress refused by the test tripwire');
  });
  server.on('connect', (req, socket) => {
    attempts.push(`CONNECT ${req.url ?? ''}`);
    socket.end('HTTP/1.1 403 Forbidden\r\nconnection: close\r\n\r\n');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    attempts,
    env() {
      const noProxy = '127.0.0.1,localhost,::1';
      return {
        HTTP_PROXY: url,
        HTTPS_PROXY: url,
        ALL_PROXY: url,
        http_proxy: url,
        https_proxy: url,
        all_proxy: url,
        NO_PROXY: noProxy,
        no_proxy: noProxy,
      };
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
