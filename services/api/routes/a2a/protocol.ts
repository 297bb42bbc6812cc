/** The protocol version the gateway speaks by default (the `A2A-Version` header of a 1.0 request). */
export const A2A_PROTOCOL = '1.0';

/** The earlier version still served on the same endpoint, under its own method names (`message/send`, ...). */
export const A2A_LEGACY_PROTOCOL = '0.3';

/**
 * Which handler a request's `A2A-Version` header selects, as the protocol says: absent or empty
 * means 0.3 (the legacy handler), `1.0` the current one; any other version is refused.
 */
export function requestedProtocol(header: unknown): string {
  return typeof header === 'string' && header.trim() !== '' ? header.trim() : A2A_LEGACY_PROTOCOL;
}

/** The JSON-RPC request's id, repeated in its answer (null when it has none or it cannot be read). */
export function requestId(body: unknown): string | number | null {
  const id = (body as { id?: unknown } | null | undefined)?.id;
  return typeof id === 'string' || typeof id === 'number' ? id : null;
}
