import type { AgentCard } from '@a2a-js/sdk';
import type { Viewer } from '../../../../libs/domain/visibility.ts';
import type { AgentRecord } from '../../../../libs/db/records.ts';
import type { CoreDeps } from '../../../../libs/handoffs/ports.ts';

/** Who calls, on which agent: what one JSON-RPC request of the gateway acts with. */
export interface A2aCall {
  readonly core: CoreDeps;
  readonly project: string;
  /** The agent the path names (the recipient of what is sent). */
  readonly agent: AgentRecord;
  /** The agent the caller's token is (or an admin names with X-Baton-Agent); null: an admin naming none. */
  readonly sender: string | null;
  readonly tokenId: string;
  readonly viewer: Viewer;
  readonly card: AgentCard;
}
