import {
  A2AError,
  A2A_ERROR_CODE,
  JsonRpcRequestMalformedError,
  JsonRpcTaskNotCancelableError,
  JsonRpcTaskNotFoundError,
  JsonRpcUnsupportedOperationError,
  JsonRpcVersionNotSupportedError,
  toJsonRpcError,
} from '@a2a-js/sdk/errors';
import { ERROR_CATALOG, isErrorCode, type ErrorCode } from '../../../../libs/domain/errors.ts';

/**
 * Every refusal of the A2A gateway is a JSON-RPC error whose `data` is one `google.rpc.ErrorInfo`
 * (as A2A 1.0 defines it) with Baton's stable code in `metadata.batonCode`: the A2A code says
 * what the protocol calls it, Baton's what the catalog (docs/ERRORS.md) calls it.
 */
export interface JsonRpcRefusal {
  readonly status: number;
  readonly body: { jsonrpc: '2.0'; id: string | number | null; error: ReturnType<typeof toJsonRpcError> };
}

type Options = { message: string; metadata: Record<string, string> };

/** Baton's codes that A2A has a name for; the rest are invalid params or requests, or internal errors. */
const SEMANTIC: Partial<Record<ErrorCode, new (o: Options) => A2AError>> = {
  handoff_not_found: JsonRpcTaskNotFoundError,
  invalid_transition: JsonRpcTaskNotCancelableError,
  protocol_version_unsupported: JsonRpcVersionNotSupportedError,
  push_config_not_found: JsonRpcTaskNotFoundError,
  protocol_method_unsupported: JsonRpcUnsupportedOperationError,
  task_not_continuable: JsonRpcUnsupportedOperationError,
};

/**
 * On CancelTask only: A2A's task not cancelable (-32002) is about cancelling, so a non-sender is
 * refused with it there, and elsewhere (a message continuing a task) as the refused request it is (-32600).
 */
const ON_CANCEL: Partial<Record<ErrorCode, new (o: Options) => A2AError>> = { not_sender: JsonRpcTaskNotCancelableError };

/** The A2A error for one of Baton's codes (a 5xx keeps its message to itself); `cancel`: the call was CancelTask. */
export function a2aErrorFor(code: ErrorCode, message: string, cancel = false): A2AError {
  const status = ERROR_CATALOG[code].status;
  const o: Options = { message: status >= 500 ? 'Baton could not answer; try again' : message, metadata: { batonCode: code } };
  const semantic = (cancel ? ON_CANCEL[code] : undefined) ?? SEMANTIC[code];
  if (semantic) return new semantic(o);
  // The SDK's base error is JSON-RPC's internal error (-32603).
  if (status >= 500) return new A2AError(o);
  // The caller's token, the agent the path names, the rate: the request itself is refused.
  if (status === 401 || status === 403 || status === 404 || status === 429)
    return new JsonRpcRequestMalformedError({ ...o, envelopeCode: A2A_ERROR_CODE.INVALID_REQUEST });
  return new JsonRpcRequestMalformedError(o);
}

/** Baton's code of anything thrown: a BatonError's own, an A2A error the SDK raised as validation_failed, else internal_error. */
export function batonCodeOf(err: unknown): ErrorCode {
  const code = (err as { code?: unknown } | null)?.code;
  if (isErrorCode(code)) return code;
  const name = (err as { name?: unknown } | null)?.name;
  if (name === 'RequestMalformedError') return 'validation_failed';
  return 'internal_error';
}

/** A refusal as the HTTP status and JSON-RPC body the gateway answers with. */
export function jsonRpcRefusal(err: unknown, id: string | number | null = null): JsonRpcRefusal {
  const code = batonCodeOf(err);
  const message = err instanceof Error ? err.message : String(err);
  return { status: ERROR_CATALOG[code].status, body: { jsonrpc: '2.0', id, error: toJsonRpcError(a2aErrorFor(code, message)) } };
}
