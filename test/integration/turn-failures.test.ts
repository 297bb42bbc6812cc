import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AdapterRegistry } from '../../libs/adapters/adapter-registry.ts';
import {
  earlierRequestsText,
  type DeliveryTarget,
  type ProviderAdapter,
  type TurnEnd,
  type TurnFailure,
  type TurnObservation,
  type TurnRequest,
} from '../../libs/adapters/provider-adapter.ts';
import { DEFAULT_DELIVERY_WINDOWS, DELIVERY_POLICY } from '../../libs/domain/delivery-policy.ts';
import { startTestBaton, type TestBaton } from '../support/test-baton.ts';
import { waitForState } from '../support/wait-for-state.ts';

/**
 * How the engine treats a failed turn, through Baton's real engine (Postgres, Redis, the worker)
 * with a scripted session at the adapter edge: a session that keeps every prompt written into it
 * (as a Codex thread or a Claude Code session does, `sessionKeepsPrompts`) and ends each turn as
 * its script says. What the real CLIs send to the model is shown in the Codex and Claude Code
 * tests; here: the back-off between resends, the failures never resent, and what each turn's
 * text says about the earlier unanswered requests of its session.
 */

type Outcome = { readonly ok: true } | { readonly ok: false; readonly error: string; readonly failure?: TurnFailure };

/** One session per agent (by handle): the texts written into it and how its next turns end. */
class ScriptedSessions {
  readonly written = new Map<string, Array<{ requestId: string; text: string; at: number }>>();
  private readonly scripts = new Map<string, Outcome[]>();
  private readonly ends = new Map<string, Outcome>();

  script(agent: string, outcomes: Outcome[]): void {
    this.scripts.set(agent, [...outcomes]);
  }

  texts(agent: string): string[] {
    return (this.written.get(agent) ?? []).map((w) => w.text);
  }

  adapter(): ProviderAdapter {
    const end = (requestId: string): TurnEnd => {
      const o = this.ends.get(requestId);
      if (!o) return { status: 'unobservable', error: 'not written' };
      return o.ok
        ? { status: 'returned', result: { summary: 'done' } }
        : { status: 'failed', error: o.error, ...(o.failure ? { failure: o.failure } : {}) };
    };
    const seen = (requestId: string): TurnObservation => {
      const o = this.ends.get(requestId);
      if (!o) return { found: false, complete: true };
      return o.ok
        ? { found: true, status: 'returned', result: { summary: 'done' } }
        : { found: true, status: 'failed', error: o.error, ...(o.failure ? { failure: o.failure } : {}) };
    };
    return {
      provider: 'demo',
      sessionKeepsPrompts: true,
      sendTurn: async (target: DeliveryTarget, turn: TurnRequest) => {
        // As the text adapters do: the notice of earlier requests, then the message.
        const text = `${earlierRequestsText(turn)}${turn.message}\nbaton-request-id: ${turn.requestId}`;
        const list = this.written.get(target.handle) ?? [];
        list.push({ requestId: turn.requestId, text, at: Date.now() });
        this.written.set(target.handle, list);
        this.ends.set(turn.requestId, this.scripts.get(target.handle)?.shift() ?? { ok: true });
        return { outcome: 'accepted', seen: seen(turn.requestId) };
      },
      observeTurn: async (_t, requestId) => seen(requestId),
      isBusy: async () => false,
      waitForTurn: async (_t, requestId) => end(requestId),
      close: async () => undefined,
    };
  }
}

let baton: TestBaton;
const sessions = new ScriptedSessions();
let agentNo = 0;
/** The back-off's first step in this file: long enough to measure on a busy host, short enough to wait for. */
const RESEND_MS = 1_500;
const JITTER = DELIVERY_POLICY.errorResendJitter;

async function agent(script: Outcome[]): Promise<string> {
  const id = `s${++agentNo}`;
  expect((await baton.post('/v1/agents', { id, provider: 'demo' })).status).toBe(201);
  sessions.script(id, script);
  return id;
}

async function send(to: string, message: string): Promise<string> {
  const res = await baton.post('/v1/handoffs', { from: 'sender', to, message, title: message });
  expect(res.status).toBe(201);
  return res.body.id as string;
}

const transient = (error: string, retryAfterMs?: number): Outcome => ({
  ok: false,
  error,
  failure: { kind: 'transient', httpStatus: 500, ...(retryAfterMs !== undefined ? { retryAfterMs } : {}) },
});

beforeAll(async () => {
  baton = await startTestBaton();
  expect((await baton.post('/v1/agents', { id: 'sender', provider: 'demo' })).status).toBe(201);
  baton.startWorker({
    adapters: new AdapterRegistry([sessions.adapter()]),
    windows: { ...DEFAULT_DELIVERY_WINDOWS, errorResendDelayMs: RESEND_MS },
  });
});

afterAll(async () => {
  await baton?.stop();
});

describe('a turn that failed', () => {
  it('is resent after a growing, jittered back-off, each resend at least its share of the configured delay after the failure', async () => {
    const to = await agent([transient('API status 500: boom'), transient('API status 500: boom'), transient('API status 500: boom')]);
    const id = await send(to, 'flaky work');
    const h = await waitForState(baton, id, 'FAILED', 30_000);
    const writes = sessions.written.get(to) ?? [];
    expect(writes).toHaveLength(3);
    const gaps = [writes[1]!.at - writes[0]!.at, writes[2]!.at - writes[1]!.at];
    // Never sooner than the jittered delay; the second waits errorResendGrowth times longer.
    expect(gaps[0]).toBeGreaterThanOrEqual(RESEND_MS * (1 - JITTER) - 50);
    expect(gaps[1]).toBeGreaterThanOrEqual(RESEND_MS * DELIVERY_POLICY.errorResendGrowth * (1 - JITTER) - 50);
    // The timeline says when each resend is due.
    const resends = h.events.filter((e: any) => e.event === 'turn_failed_resend');
    expect(resends).toHaveLength(2);
    expect(resends[0].detail.resendInMs).toBeGreaterThanOrEqual(RESEND_MS * (1 - JITTER) - 1);
    expect(resends[0].detail.failure).toEqual({ kind: 'transient', httpStatus: 500 });
  });

  it("waits at least the runtime's own retry time", async () => {
    const to = await agent([transient('API status 429: rate limited', 4_000), { ok: true }]);
    const id = await send(to, 'rate limited work');
    await waitForState(baton, id, 'RETURNED', 30_000);
    const writes = sessions.written.get(to) ?? [];
    expect(writes[1]!.at - writes[0]!.at).toBeGreaterThanOrEqual(4_000 - 50);
  });

  it.each([
    [
      'configuration',
      "Missing environment variable: OPENAI_KEY; set it in the agent's env",
      'not resent: the agent is not set up to run this turn (configuration)',
    ],
    ['authentication', 'API status 401: invalid x-api-key', "not resent: the runtime's credentials were refused (authentication)"],
    ['limit', 'API status 400: prompt is too long', 'not resent: a limit the same request would meet again (limit)'],
    ['refusal', 'the request was blocked by policy', 'not resent: the model refused the request (refusal)'],
  ] as const)(
    "that will fail again (%s) ends FAILED at once, with a reason that says so and the runtime's words",
    async (kind, error, headline) => {
      const to = await agent([{ ok: false, error, failure: { kind } }]);
      const id = await send(to, `${kind} work`);
      const h = await waitForState(baton, id, 'FAILED');
      expect(h.attempts).toHaveLength(1);
      expect(h.detail).toBe(`${headline}: ${error}`);
      const failed = h.events.find((e: any) => e.event === 'turn_failed');
      expect(failed.reason).toBe(`${headline}: ${error}`);
      expect(failed.detail.failure).toEqual({ kind });
    },
  );
});

describe('what a turn says about earlier requests of its session', () => {
  it('a resend names the request it replaces; the next handoff after one given up names every given-up request; then nothing', async () => {
    const to = await agent([
      transient('API status 500'),
      transient('API status 500'),
      transient('API status 500'),
      { ok: true },
      { ok: true },
    ]);
    const failed = await send(to, 'first task');
    const h = await waitForState(baton, failed, 'FAILED', 30_000);
    const [r1, r2, r3] = h.attempts.map((a: any) => a.requestId as string);
    const texts = sessions.texts(to);
    expect(texts[0]).not.toContain('[Baton]');
    expect(texts[1]).toContain(`This request replaces the earlier unanswered request baton-request-id ${r1} of the same handoff`);
    expect(texts[2]).toContain(
      `replaces the earlier unanswered requests baton-request-id ${r1}, baton-request-id ${r2} of the same handoff`,
    );

    const next = await send(to, 'second task');
    await waitForState(baton, next, 'RETURNED');
    const notice = sessions.texts(to)[3]!;
    expect(notice).toContain('Baton gave up on these earlier requests in this session');
    for (const r of [r1, r2, r3]) expect(notice).toContain(`- baton-request-id ${r} (handoff ${failed}, "first task"): FAILED:`);
    // The notice comes before the message.
    expect(notice.indexOf('must not be acted on')).toBeLessThan(notice.indexOf('second task'));

    // That turn was answered: the one after it has nothing to say about them.
    const third = await send(to, 'third task');
    await waitForState(baton, third, 'RETURNED');
    expect(sessions.texts(to)[4]).not.toContain('[Baton]');
  });

  it('a handoff that goes out while an earlier one waits for its resend names that one as pending', async () => {
    const to = await agent([transient('API status 503', 5_000), { ok: true }, { ok: true }]);
    const first = await send(to, 'first waits');
    // The first turn failed and waits 5 s for its resend: the second goes out meanwhile.
    await waitForState(baton, first, 'WAITING');
    const second = await send(to, 'second goes first');
    await waitForState(baton, second, 'RETURNED');
    const firstAttempt = (await baton.get(`/v1/handoffs/${first}`)).body.attempts[0].requestId as string;
    const text = sessions.texts(to)[1]!;
    expect(text).toContain('Baton will send each again later');
    expect(text).toContain(
      `- baton-request-id ${firstAttempt} (handoff ${first}, "first waits"): its turn ended in an error (API status 503)`,
    );
    await waitForState(baton, first, 'RETURNED', 30_000);
    // Its resend still says which request it replaces, though another turn was answered between.
    expect(sessions.texts(to)[2]).toContain(
      `This request replaces the earlier unanswered request baton-request-id ${firstAttempt} of the same handoff`,
    );
  });
});
