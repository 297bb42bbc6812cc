import type { ToolDefinition } from '../define-tool.ts';
import { acceptTool } from './accept.ts';
import { acknowledgeTool } from './acknowledge.ts';
import { boardTool } from './board.ts';
import { cancelTool } from './cancel.ts';
import { closeTool } from './close.ts';
import { factAddTool } from './fact-add.ts';
import { heartbeatTool } from './heartbeat.ts';
import { inboxTool } from './inbox.ts';
import { listAgentsTool } from './list-agents.ts';
import { readTool } from './read.ts';
import { returnTool } from './return.ts';
import { sendTool } from './send.ts';
import { sessionNewTool } from './session-new.ts';
import { sessionShowTool } from './session-show.ts';
import { statusTool } from './status.ts';
import { listSubscriptionsTool, subscribeTool, unsubscribeTool } from './subscriptions.ts';

/** Every tool Baton serves over MCP, in the order clients list them. One definition each. */
export const BATON_TOOLS: readonly ToolDefinition[] = [
  sendTool,
  inboxTool,
  readTool,
  statusTool,
  acceptTool,
  heartbeatTool,
  returnTool,
  closeTool,
  cancelTool,
  acknowledgeTool,
  boardTool,
  sessionNewTool,
  sessionShowTool,
  factAddTool,
  listAgentsTool,
  subscribeTool,
  listSubscriptionsTool,
  unsubscribeTool,
];
