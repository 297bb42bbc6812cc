/**
 * The config snippet each MCP client reads to load Baton, for `baton mcp config`. Pure: the
 * caller decides the command, environment, URL and headers; this only writes them in each
 * client's own format.
 *
 * - Claude Code: JSON `{"mcpServers": {"baton": {"type": "stdio", command, args, env}}}` (the
 *   shape `claude --mcp-config <file>` and a project's `.mcp.json` read), or `{"type": "http",
 *   url, headers}`.
 * - Codex: TOML `[mcp_servers.baton]` with `command`, `args`, `env` (`~/.codex/config.toml`), or
 *   `url` and `http_headers`.
 * - Cursor: JSON `{"mcpServers": {"baton": {command, args, env}}}` (`.cursor/mcp.json`), or
 *   `{url, headers}`.
 */

import { assertNever } from '../domain/errors.ts';

export const MCP_CLIENTS = ['claude', 'codex', 'cursor'] as const;
export type McpClientName = (typeof MCP_CLIENTS)[number];

export type McpLaunch =
  | {
      readonly transport: 'stdio';
      readonly command: string;
      readonly args: readonly string[];
      readonly env: Readonly<Record<string, string>>;
    }
  | { readonly transport: 'http'; readonly url: string; readonly headers: Readonly<Record<string, string>> };

/** Where each client reads the snippet from, for the note printed beside it. */
export const CONFIG_HOME: Record<McpClientName, string> = {
  claude: "a file passed with `claude --mcp-config <file>`, or the project's .mcp.json",
  codex: "~/.codex/config.toml (or a trusted project's .codex/config.toml)",
  cursor: '.cursor/mcp.json in the project, or ~/.cursor/mcp.json',
};

/** A TOML basic string: JSON's escapes are TOML's (\\", \\\\, \\n, \\uXXXX). */
const tomlString = (s: string) => JSON.stringify(s);
const tomlInlineTable = (o: Readonly<Record<string, string>>) =>
  `{ ${Object.entries(o)
    .map(([k, v]) => `${/^[A-Za-z0-9_-]+$/.test(k) ? k : tomlString(k)} = ${tomlString(v)}`)
    .join(', ')} }`;

export function mcpClientConfig(client: McpClientName, launch: McpLaunch, name = 'baton'): string {
  switch (client) {
    case 'claude': {
      const server =
        launch.transport === 'stdio'
          ? { type: 'stdio', command: launch.command, args: launch.args, env: launch.env }
          : { type: 'http', url: launch.url, headers: launch.headers };
      return `${JSON.stringify({ mcpServers: { [name]: server } }, null, 2)}\n`;
    }
    case 'cursor': {
      const server =
        launch.transport === 'stdio'
          ? { command: launch.command, args: launch.args, env: launch.env }
          : { url: launch.url, headers: launch.headers };
      return `${JSON.stringify({ mcpServers: { [name]: server } }, null, 2)}\n`;
    }
    case 'codex': {
      const lines = [`[mcp_servers.${name}]`];
      if (launch.transport === 'stdio') {
        lines.push(`command = ${tomlString(launch.command)}`);
        lines.push(`args = [${launch.args.map(tomlString).join(', ')}]`);
        lines.push(`env = ${tomlInlineTable(launch.env)}`);
      } else {
        lines.push(`url = ${tomlString(launch.url)}`);
        lines.push(`http_headers = ${tomlInlineTable(launch.headers)}`);
      }
      return `${lines.join('\n')}\n`;
    }
    default:
      return assertNever(client, 'MCP client');
  }
}
