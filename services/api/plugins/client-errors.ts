import { maxHeaderSize, STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import { ERROR_CATALOG, type ErrorCode } from '../../../libs/domain/errors.ts';
import { NO_STORE } from './no-store.ts';

/** The part of a Node `clientError` this handler reads. */
interface ClientError extends Error {
  readonly code?: string;
}

function codeFor(err: ClientError): ErrorCode {
  // Node's parser cannot tell an over-long URL from over-long headers: both overflow one buffer.
  if (err.code === 'HPE_HEADER_OVERFLOW') return 'headers_too_large';
  if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') return 'request_timeout';
  return 'malformed_request';
}

/**
 * Fastify's `clientErrorHandler`: what Node's HTTP parser refuses before any route or hook runs
 * (a request line and headers over the header limit, a malformed request, headers that never
 * finish) is answered in the catalog's shape, `{ error: { code, message } }` with the catalog's
 * status and `Cache-Control: private, no-store`, instead of Node's or Fastify's own body. The
 * connection is closed afterwards: the parser cannot find where the next request would start.
 */
export function answerClientError(err: ClientError, socket: Socket): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const code = codeFor(err);
  const { status, summary } = ERROR_CATALOG[code];
  const message =
    code === 'headers_too_large' ? `the request line (with its URL) and headers together are larger than ${maxHeaderSize} bytes` : summary;
  const body = JSON.stringify({ error: { code, message } });
  if (socket.writable) {
    socket.write(
      `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Error'}\r\n` +
        `Content-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
        `Cache-Control: ${NO_STORE}\r\nConnection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy();
}
