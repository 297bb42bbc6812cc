/**
 * The board: a derived view of work (never stored), in four lanes. Pure: reads a handoff's
 * work and delivery state, claim lease, due time and last return, and says which lane it is
 * in, why, and what the next action is and whose.
 */
import { LIMITS } from './limits.ts';

export const LANES = ['ready', 'in_progress', 'attention', 'returned'] as const;
export type Lane = (typeof LANES)[number];

export interface BoardInput {
  workState: 'open' | 'claimed' | 'returned';
  deliveryState: string;
  attemptCount: number;
  recipient: string | null;
  sender: string;
  claimedBy: string | null;
  leaseExpiresAt: Date | null;
  dueAt: Date | null;
  returnOutcome: string | null;
}

export interface Card {
  lane: Lane;
  reasons: string[];
  next: { action: string; who: string };
}

export function boardCard(i: BoardInput, now: Date): Card {
  const who = i.recipient ?? 'any agent of the project';
  const reasons: string[] = [];
  if (i.workState === 'claimed' && i.leaseExpiresAt) {
    if (i.leaseExpiresAt <= now) reasons.push('claim lease expired');
    else if (i.leaseExpiresAt.getTime() - now.getTime() <= LIMITS.leaseWarningMs) reasons.push('claim lease about to expire');
  }
  if (i.workState === 'open' && i.returnOutcome === 'failed') reasons.push('the last return failed');
  if (i.dueAt && i.dueAt <= now && i.workState !== 'returned') reasons.push('due time passed');
  if (i.deliveryState === 'UNCERTAIN') reasons.push('delivery UNCERTAIN');
  if (i.deliveryState === 'FAILED') reasons.push('delivery FAILED');
  if (reasons.length > 0) {
    const next =
      i.deliveryState === 'UNCERTAIN'
        ? { action: 'wait for the history scan, or release it if you know how it ended', who: i.sender }
        : i.deliveryState === 'FAILED'
          ? { action: 'resend it or cancel it', who: i.sender }
          : i.workState === 'claimed'
            ? { action: 'heartbeat the claim, or return the work', who: i.claimedBy ?? who }
            : { action: 'claim it and do it, or cancel it', who: i.workState === 'open' ? who : i.sender };
    return { lane: 'attention', reasons, next };
  }
  if (i.workState === 'returned')
    return {
      lane: 'returned',
      reasons: ['waiting for the sender to close it'],
      next: { action: 'close: accepted, revision or blocked', who: i.sender },
    };
  const pushing = i.attemptCount > 0 && ['SENDING', 'ACCEPTED', 'RUNNING'].includes(i.deliveryState);
  if (i.workState === 'claimed' || pushing) {
    return {
      lane: 'in_progress',
      reasons: [i.workState === 'claimed' ? `claimed by ${i.claimedBy}` : `turn ${i.deliveryState.toLowerCase()}`],
      next: { action: 'return the result', who: i.claimedBy ?? who },
    };
  }
  return { lane: 'ready', reasons: ['open'], next: { action: i.recipient ? 'accept it (or wait for its turn)' : 'claim it', who } };
}
