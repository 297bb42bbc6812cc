import type { TurnRequest } from '../../libs/adapters/provider-adapter.ts';

let n = 0;

/**
 * A turn as the engine hands it to an adapter, for tests that drive an adapter directly: a
 * fresh request id (unique across the run) and handoff id each call, `message` as given, an
 * empty context; `extra` over it.
 */
export function turnRequest(message: string, extra: Partial<TurnRequest> = {}): TurnRequest {
  n++;
  return {
    requestId: `req-${Date.now().toString(36)}-${process.pid}-${n}`,
    handoffId: `h-${n}`,
    attempt: 1,
    from: 'lead',
    title: null,
    message,
    focus: null,
    doneWhen: null,
    context: { summary: null, openQuestions: [], nextSteps: [] },
    packet: '(no context)',
    ...extra,
  };
}
