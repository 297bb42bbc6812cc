import { z } from 'zod';
import type { CallToolResult, ToolAnnotations } from '@modelcontextprotocol/sdk/types.js';
import { fenceAsData } from '../domain/context-packet.ts';
import type { ToolContext } from './tool-context.ts';

/**
 * One Baton tool, declared once and served by both transports (stdio and `/mcp`). Its input
 * schema is strict (unknown arguments are refused before `run` is called); `run` is a thin
 * call to Baton's HTTP API and returns the structured result, which must match `output`.
 */
export interface ToolDefinition<In extends z.ZodObject = z.ZodObject, Out extends z.ZodObject = z.ZodObject> {
  readonly name: string;
  readonly title: string;
  readonly description: string;
  readonly input: In;
  readonly output: Out;
  readonly annotations: Omit<ToolAnnotations, 'title'>;
  /**
   * The result's first text line, for people and models: built only from fields Baton itself
   * sets (ids, states, counts), never from text an agent wrote, which stays inside the fence.
   */
  readonly headline: (result: z.infer<Out>, ctx: ToolContext) => string;
  readonly run: (args: z.infer<In>, ctx: ToolContext) => Promise<z.infer<Out>>;
}

/** Keeps the input and output types of a tool tied together (one generic per definition). */
export function defineTool<In extends z.ZodObject, Out extends z.ZodObject>(tool: ToolDefinition<In, Out>): ToolDefinition<In, Out> {
  return tool;
}

/** Reads: nothing changes, so a client may call them freely and repeat them. */
export const READ_ONLY: ToolDefinition['annotations'] = {
  readOnlyHint: true,
  idempotentHint: true,
  destructiveHint: false,
  openWorldHint: false,
};

/** A change that repeating with the same arguments does not repeat (same claim, same state). */
export const IDEMPOTENT_CHANGE: ToolDefinition['annotations'] = {
  readOnlyHint: false,
  idempotentHint: true,
  destructiveHint: false,
  openWorldHint: false,
};

/** A change each call makes anew (a new session, a new fact). */
export const CHANGE: ToolDefinition['annotations'] = {
  readOnlyHint: false,
  idempotentHint: false,
  destructiveHint: false,
  openWorldHint: false,
};

/**
 * A tool's answer: the headline, then the whole structured result as JSON fenced as data
 * (messages, titles, summaries and facts in it were written by agents), and the same result
 * as `structuredContent`.
 */
export function toolResult(headline: string, structured: Record<string, unknown>): CallToolResult {
  return {
    content: [{ type: 'text', text: `${headline}\n${fenceAsData(JSON.stringify(structured, null, 2))}` }],
    structuredContent: structured,
  };
}

/** The structured content of a refusal; every tool's output schema allows it beside the result. */
export const RefusalOut = z.strictObject({
  error: z.strictObject({
    code: z.string().describe("Baton's stable error code (docs/ERRORS.md), or api_unreachable"),
    message: z.string(),
    status: z.number().int().optional().describe('the HTTP status the API answered'),
  }),
});

/**
 * A refusal by Baton (a stable code from docs/ERRORS.md, e.g. `not_recipient`,
 * `handoff_not_found`), or `api_unreachable` when the API could not be asked: a tool result
 * with `isError`, so the model sees why and can act on it.
 */
export function refusalResult(code: string, message: string, status?: number): CallToolResult {
  return {
    isError: true,
    content: [{ type: 'text', text: `Baton refused: ${code}: ${message}` }],
    structuredContent: { error: { code, message, ...(status !== undefined ? { status } : {}) } },
  };
}
