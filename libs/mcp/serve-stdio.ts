import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { createMcpServer } from './create-mcp-server.ts';
import type { ToolContext } from './tool-context.ts';

/**
 * Serves Baton's tools over stdio (`baton mcp`) for the identity in `ctx`, fixed for the life
 * of the process. Standard output carries only MCP messages. Resolves when the client closes
 * stdin (or the transport closes), after the server is closed.
 */
export async function serveStdio(ctx: ToolContext): Promise<void> {
  const server = createMcpServer(ctx);
  const transport = new StdioServerTransport();
  const closed = new Promise<void>((resolve) => {
    // The SDK's stdio transport does not end on EOF by itself: the client going away is the
    // end of the session.
    process.stdin.once('end', resolve);
    process.stdin.once('close', resolve);
    server.onclose = () => resolve();
  });
  await server.connect(transport);
  await closed;
  await server.close();
}
