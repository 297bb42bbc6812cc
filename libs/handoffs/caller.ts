/**
 * Who is calling, as proven by a bearer token. An agent token acts as its agent, in its
 * project, and nothing else; an admin (root) token acts as an operator in any project, and
 * may name the agent it acts for.
 */
export interface Caller {
  readonly tokenId: string;
  readonly admin: boolean;
  /** The agent an agent token belongs to (null for an admin token). */
  readonly agent: { readonly id: string; readonly handle: string } | null;
  /** The project an agent token is bound to (null for an admin token: any project). */
  readonly projectSlug: string | null;
}
