import type {
  DeliveryTarget,
  ProviderAdapter,
  SendResult,
  TurnEnd,
  TurnObservation,
  TurnRequest,
  WatchHooks,
} from '../provider-adapter.ts';
import { DEMO_BEHAVIORS, type DemoBehavior, type DemoHostPort, type DemoObservation, type DemoSettings } from './demo-agent-host.ts';
import { DemoHostClient, DemoHostUnreachable } from './demo-host-client.ts';
import { raceAbort } from '../race-abort.ts';
import { DEMO_ADAPTER_DEFAULTS } from '../../config/component-defaults.ts';

export function demoSettings(settings: Readonly<Record<string, unknown>>): DemoSettings {
  const out: DemoSettings = {};
  const think = settings['thinkMs'];
  if (typeof think === 'number' && Number.isFinite(think) && think >= 0) out.thinkMs = think;
  const replyDelay = settings['replyDelayMs'];
  if (typeof replyDelay === 'number' && Number.isFinite(replyDelay) && replyDelay >= 0) out.replyDelayMs = replyDelay;
  const behavior = settings['behavior'];
  if (typeof behavior === 'string' && (DEMO_BEHAVIORS as readonly string[]).includes(behavior)) out.behavior = behavior as DemoBehavior;
  return out;
}

function sessionOf(target: DeliveryTarget): string {
  return target.target ?? target.handle;
}

function toObservation(o: DemoObservation): TurnObservation {
  if (!o.found) return { found: false, complete: o.complete };
  if (o.status === 'returned') return { found: true, status: 'returned', result: { summary: o.summary ?? '' } };
  if (o.status === 'failed' || o.status === 'interrupted') return { found: true, status: o.status, error: o.error ?? o.status };
  return { found: true, status: o.status };
}

function aborted(signal: AbortSignal): never {
  throw signal.reason instanceof Error ? signal.reason : new Error('aborted');
}

/**
 * The demo provider: turns go to simulated sessions on a DemoHostPort (in this process, or a
 * shared host over HTTP). Maps the host's answers onto the adapter contract, including the
 * two ways a write can fail: unreachable before sending (not_sent) and reply lost (lost).
 */
export function createDemoAdapter(host: DemoHostPort): ProviderAdapter {
  return {
    provider: 'demo',
    // The simulated session refuses a write while a turn is live, in the same step.
    reportsBusyOnSend: true,

    async sendTurn(target: DeliveryTarget, turn: TurnRequest): Promise<SendResult> {
      try {
        const outcome = await host.receiveTurn(
          sessionOf(target),
          {
            requestId: turn.requestId,
            handoffId: turn.handoffId,
            from: turn.from,
            title: turn.title,
            message: turn.message,
            packet: turn.packet,
          },
          demoSettings(target.settings),
        );
        if (outcome.status === 'accepted' && outcome.replyDelayMs && !(host instanceof DemoHostClient)) {
          await new Promise((r) => setTimeout(r, outcome.replyDelayMs));
        }
        switch (outcome.status) {
          case 'accepted':
            if (outcome.dropReply) return { outcome: 'lost', error: 'the reply to the write was lost' };
            return outcome.turn ? { outcome: 'accepted', seen: toObservation(outcome.turn) } : { outcome: 'accepted' };
          case 'busy':
            return { outcome: 'busy', detail: 'the session is in a turn' };
          case 'refused':
            return { outcome: 'rejected', reason: outcome.reason };
          case 'gone':
            return { outcome: 'gone', reason: `session ${sessionOf(target)} does not exist` };
          case 'dropped':
            return { outcome: 'lost', error: 'the connection broke while writing' };
        }
      } catch (err) {
        if (err instanceof DemoHostUnreachable) return { outcome: 'not_sent', error: err.message };
        return { outcome: 'lost', error: (err as Error).message };
      }
    },

    async observeTurn(target: DeliveryTarget, requestId: string): Promise<TurnObservation> {
      return toObservation(await host.observe(sessionOf(target), requestId));
    },

    async isBusy(target: DeliveryTarget): Promise<boolean> {
      return host.isBusy(sessionOf(target));
    },

    async waitForTurn(target: DeliveryTarget, requestId: string, hooks: WatchHooks, signal: AbortSignal): Promise<TurnEnd> {
      const session = sessionOf(target);
      let known: DemoObservation = await host.observe(session, requestId);
      let sawRunning = false;
      for (;;) {
        if (signal.aborted) aborted(signal);
        if (!known.found) return { status: 'unobservable', error: 'the turn is not in the session history' };
        // A simulated turn always runs before it ends; report that even if we only saw the end.
        if (known.status !== 'accepted' && !sawRunning) {
          sawRunning = true;
          await hooks.onRunning();
        }
        switch (known.status) {
          case 'returned':
            return { status: 'returned', result: { summary: known.summary ?? '' } };
          case 'failed':
            return { status: 'failed', error: known.error ?? 'failed' };
          case 'interrupted':
            return { status: 'interrupted', error: known.error ?? 'interrupted' };
          case 'accepted':
          case 'running':
            break;
        }
        known = await raceAbort(host.waitForChange(session, requestId, known.status, DEMO_ADAPTER_DEFAULTS.watchPollMs), signal);
      }
    },

    async close() {},
  };
}
