import { createServer, type Server } from 'node:http';
import type { Logger } from '../logging/create-logger.ts';
import type { BatonMetrics } from './baton-metrics.ts';

export interface RunningMetricsServer {
  readonly url: string;
  close(): Promise<void>;
}

/**
 * A worker process's metrics on a port of its own (`BATON_METRICS_PORT`): `GET /metrics`,
 * Prometheus text, no token. It carries counts and timings only, never handoff content, and
 * is meant for a network only the scraper reaches (bind it to an internal address). Anything
 * else is 404.
 */
export async function serveMetrics(
  metrics: BatonMetrics,
  opts: { host: string; port: number; logger: Logger },
): Promise<RunningMetricsServer> {
  const server: Server = createServer((request, response) => {
    if (request.method !== 'GET' || (request.url ?? '').split('?')[0] !== '/metrics') {
      response
        .writeHead(404, { 'content-type': 'application/json', 'cache-control': 'private, no-store' })
        .end(JSON.stringify({ error: { code: 'route_not_found', message: 'only GET /metrics is served here' } }));
      return;
    }
    metrics.registry.metrics().then(
      (text) => response.writeHead(200, { 'content-type': metrics.registry.contentType, 'cache-control': 'private, no-store' }).end(text),
      (err: unknown) => {
        opts.logger.error({ err }, 'metrics scrape failed');
        response
          .writeHead(500, { 'content-type': 'application/json', 'cache-control': 'private, no-store' })
          .end(JSON.stringify({ error: { code: 'internal_error', message: 'internal error' } }));
      },
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host, () => resolve());
  });
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : opts.port;
  const url = `http://${opts.host.includes(':') ? `[${opts.host}]` : opts.host}:${port}/metrics`;
  opts.logger.info({ url }, 'metrics listening');
  return {
    url,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
