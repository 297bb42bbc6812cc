/**
 * Who is looking, and the one rule of what they see. An owned handoff (addressed to an agent)
 * is visible to its sender and its recipient only; an unowned one (addressed to the project)
 * to every agent of its project. One sent to a role follows its bound recipient: its sender
 * and the agent it is bound to see it (while unbound, only its sender). An admin token sees unowned handoffs and the ones it sent
 * itself; `allOwners` (admins only) sees every handoff of the project. Lists and counts apply the same
 * rule in SQL (libs/db/visible-sql.ts), and single reads check it here, so counts, lists and the board agree.
 */
export interface Viewer {
  /** The agent the caller is (an agent token), or acts as (an admin naming one); null otherwise. */
  readonly agentId: string | null;
  /** The caller's token: what it sent is its own. */
  readonly tokenId: string | null;
  readonly allOwners: boolean;
}

/** Internal callers (workers, the reconciler, the demo): no filter. */
export const EVERYONE: Viewer = { agentId: null, tokenId: null, allOwners: true };

export interface Visible {
  readonly senderId: string;
  readonly recipientId: string | null;
  /** Set for a handoff sent to a role: never unowned work, even while unbound. */
  readonly recipientRole: string | null;
  readonly createdByTokenId: string | null;
}

export function canSee(h: Visible, v: Viewer): boolean {
  if (v.allOwners || (h.recipientId === null && h.recipientRole === null)) return true;
  if (v.agentId !== null && (h.senderId === v.agentId || h.recipientId === v.agentId)) return true;
  return v.tokenId !== null && h.createdByTokenId === v.tokenId;
}
