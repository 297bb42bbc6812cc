/** The protocol version the gateway speaks (the `A2A-Version` header a request must carry). */
export const A2A_PROTOCOL = '1.0';

/** The JSON-RPC request's id, repeated in its answer (null when it has none or it cannot be read). */
export function requestId(body: unknown): string | number | null {
  const id = (body as { id?: unknown } | null | undefined)?.id;
  return typeof id === 'string' || typeof id === 'number' ? id : null;
}
