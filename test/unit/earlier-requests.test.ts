import { describe, expect, it } from 'vitest';
import { earlierRequestsText } from '../../libs/adapters/provider-adapter.ts';
import type { SessionTurn } from '../../libs/db/session-turn-repository.ts';
import type { DeliveryState } from '../../libs/domain/delivery-states.ts';
import { earlierRequestsOf } from '../../libs/handoffs/earlier-requests.ts';

let n = 0;
/** One turn Baton wrote into the session; `turns` below lists them newest first, as the read does. */
function turn(handoffId: string, attemptStatus: string, deliveryState: DeliveryState, extra: Partial<SessionTurn> = {}): SessionTurn {
  n++;
  return {
    requestId: `req-${n}`,
    attemptStatus,
    attemptError: attemptStatus === 'failed' ? `error ${n}` : null,
    acceptedAt: new Date(1_000_000 - n),
    handoffId,
    title: `title of ${handoffId}`,
    deliveryState,
    deliveryDetail: deliveryState === 'FAILED' ? `gave up on ${handoffId}` : null,
    ...extra,
  };
}

describe('earlier requests a turn names', () => {
  it("names this handoff's own unanswered attempts as replaced, oldest first", () => {
    const second = turn('h1', 'failed', 'SENDING');
    const first = turn('h1', 'failed', 'SENDING');
    const e = earlierRequestsOf([second, first], 'h1', 'req-now');
    expect(e).toEqual({ replaces: [first.requestId, second.requestId], withdrawn: [], pending: [] });
  });

  it('names a given-up handoff as withdrawn and a handoff waiting for its resend as pending', () => {
    const failed = turn('h0', 'failed', 'FAILED');
    const failedEarlier = turn('h0', 'failed', 'FAILED');
    const waiting = turn('h2', 'interrupted', 'WAITING');
    const released = turn('h3', 'cancelled', 'CANCELLED', { deliveryDetail: 'released by planner' });
    const e = earlierRequestsOf([waiting, failed, failedEarlier, released], 'h1', 'req-now');
    expect(e.replaces).toEqual([]);
    expect(e.withdrawn.map((w) => w.requestId)).toEqual([released.requestId, failedEarlier.requestId, failed.requestId]);
    expect(e.withdrawn[0]).toMatchObject({ handoffId: 'h3', title: 'title of h3', reason: 'CANCELLED: released by planner' });
    expect(e.withdrawn[2]?.reason).toBe('FAILED: gave up on h0');
    expect(e.pending).toEqual([expect.objectContaining({ requestId: waiting.requestId, handoffId: 'h2' })]);
  });

  it("names other handoffs only after the newest answered turn (it named them already), but this handoff's own however far back", () => {
    const after = turn('h5', 'failed', 'FAILED');
    const answered = turn('h4', 'returned', 'RETURNED');
    const before = turn('h0', 'failed', 'FAILED');
    const own = turn('h1', 'failed', 'WAITING');
    const e = earlierRequestsOf([after, answered, before, own], 'h1', 'req-now');
    expect(e.withdrawn.map((w) => w.requestId)).toEqual([after.requestId]);
    expect(e.replaces).toEqual([own.requestId]);
  });

  it('names nothing that may still be answered or did nothing: running, UNCERTAIN, busy, refused', () => {
    const e = earlierRequestsOf(
      [
        turn('h6', 'running', 'RUNNING'),
        turn('h7', 'lost', 'UNCERTAIN'),
        turn('h8', 'busy', 'BUSY'),
        turn('h9', 'rejected', 'FAILED'),
        turn('h10', 'accepted', 'CANCELLED'),
      ],
      'h1',
      'req-now',
    );
    expect(e).toEqual({ replaces: [], withdrawn: [], pending: [] });
  });

  it('puts the notice before the message in words the model can act on, and nothing when there is none', () => {
    expect(earlierRequestsText({})).toBe('');
    expect(earlierRequestsText({ earlier: { replaces: [], withdrawn: [], pending: [] } })).toBe('');
    const text = earlierRequestsText({
      earlier: {
        replaces: ['r1'],
        withdrawn: [{ requestId: 'r0', handoffId: 'h0', title: 'Fix build', reason: 'FAILED: model error' }],
        pending: [{ requestId: 'r2', handoffId: 'h2', title: null, reason: 'its turn ended in an error (x); it waits to be sent again' }],
      },
    });
    expect(text).toContain('This request replaces the earlier unanswered request baton-request-id r1 of the same handoff');
    expect(text).toContain('Baton gave up on these earlier requests in this session');
    expect(text).toContain('must not be acted on');
    expect(text).toContain('- baton-request-id r0 (handoff h0, "Fix build"): FAILED: model error');
    expect(text).toContain('Baton will send each again later');
    expect(text).toContain('- baton-request-id r2 (handoff h2): its turn ended');
    expect(text.endsWith('\n\n')).toBe(true);
  });
});
