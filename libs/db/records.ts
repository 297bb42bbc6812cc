import type { DeliveryState } from '../domain/delivery-states.ts';
import type { ActorKind } from '../domain/transitions.ts';

/** The row shapes repositories return. Plain data; the API decides what callers see. */

export type ProviderName = 'demo' | 'command' | 'webhook' | 'codex' | 'claude_code' | 'manual';
export const PROVIDER_NAMES: readonly ProviderName[] = ['demo', 'command', 'webhook', 'codex', 'claude_code', 'manual'];

export interface ProjectRecord {
  id: string;
  workspaceId: string;
  slug: string;
  name: string;
}

export interface AgentRecord {
  id: string;
  projectId: string;
  handle: string;
  displayName: string;
  provider: ProviderName;
  providerSettings: Record<string, unknown>;
  deliveryTarget: string | null;
  generation: number;
  /** Worker pool (host affinity); '' is the unnamed pool. */
  pool: string;
  /**
   * The deployment that owns the agent (the Redis prefix of the process that registered it):
   * only its workers deliver, follow and observe the agent's turns.
   */
  deployment: string;
  /** The roles it declares, lower-case and sorted (libs/domain/agent-roles.ts). */
  roles: string[];
  removedAt: Date | null;
  createdAt: Date;
  updatedAt: Date;
}

export interface HandoffRecord {
  id: string;
  seq: bigint;
  projectId: string;
  senderId: string;
  recipientId: string | null;
  recipientGeneration: number | null;
  /** The role it was sent to (`@role:<name>`); with `recipientId` null it is not bound to an agent yet. */
  recipientRole: string | null;
  /** When the current role binding was made (null while unbound, and for handoffs not sent to a role). */
  routedAt: Date | null;
  provider: ProviderName | null;
  /** The recipient's worker pool at enrollment ('' = unnamed): where its dispatch jobs go. */
  pool: string;
  deliveryTarget: string | null;
  sessionId: string | null;
  title: string | null;
  message: string;
  focus: string | null;
  doneWhen: string | null;
  contextSummary: string | null;
  openQuestions: string[];
  nextSteps: string[];
  dueAt: Date | null;
  idempotencyKey: string | null;
  contentHash: string;
  duplicateOfId: string | null;
  deliveryState: DeliveryState;
  deliveryDetail: string | null;
  revision: number;
  attemptCount: number;
  refusals: number;
  errorResends: number;
  interruptResends: number;
  notBefore: Date | null;
  workState: 'open' | 'claimed' | 'returned' | 'closed' | 'cancelled' | 'expired' | null;
  workRevision: number;
  workAttempt: number;
  claimToken: string | null;
  claimedById: string | null;
  leaseExpiresAt: Date | null;
  workResolution: string | null;
  closeNote: string | null;
  returnOutcome: string | null;
  resultFactIds: string[];
  returnedAt: Date | null;
  /** The token that sent it (null for internal senders and for rows older than the column). */
  createdByTokenId: string | null;
  reminderSentAt: Date | null;
  resultSummary: string | null;
  result: unknown;
  createdAt: Date;
  updatedAt: Date;
  settledAt: Date | null;
}

/** A handoff with the sender's, recipient's and claimant's handles resolved, as lists and reads show it. */
export interface HandoffView extends HandoffRecord {
  senderHandle: string;
  recipientHandle: string | null;
  claimedByHandle?: string | null;
}

export type AttemptStatus =
  'sending' | 'busy' | 'rejected' | 'not_sent' | 'lost' | 'accepted' | 'running' | 'returned' | 'failed' | 'interrupted' | 'cancelled';

export interface AttemptRecord {
  id: string;
  handoffId: string;
  number: number;
  requestId: string;
  status: AttemptStatus;
  workerId: string | null;
  deliveryTarget: string | null;
  error: string | null;
  absentScans: number;
  startedAt: Date;
  acceptedAt: Date | null;
  finishedAt: Date | null;
}

export interface EventRecord {
  id: bigint;
  handoffId: string;
  fromState: DeliveryState | null;
  toState: DeliveryState;
  /** Set when the event moved the work (the delivery state is then unchanged). */
  workFromState?: string | null;
  workToState?: string | null;
  event: string;
  actorKind: ActorKind;
  actorId: string | null;
  /** The token that authorised it (null for Baton's own moves: workers, the reconciler). */
  tokenId: string | null;
  reason: string | null;
  detail: unknown;
  revision: number;
  attemptId: string | null;
  createdAt: Date;
}

export interface NotificationRecord {
  id: string;
  handoffId: string;
  agentId: string;
  kind: string;
  text: string;
  createdAt: Date;
  readAt: Date | null;
}
