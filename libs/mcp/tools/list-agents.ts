import { z } from 'zod';
import { defineTool, READ_ONLY } from '../define-tool.ts';

const AgentOut = z.strictObject({
  id: z.string(),
  displayName: z.string(),
  provider: z.string(),
  pool: z.string(),
  /** The roles it declares (lower-case, sorted). */
  roles: z.array(z.string()),
});

/** `list_agents`: who can be sent work in this project (settings and secrets are left out). */
export const listAgentsTool = defineTool({
  name: 'list_agents',
  title: 'List agents',
  description: 'The agents of your project that you can send handoffs to, with their provider and the roles each declares.',
  input: z.strictObject({}),
  output: z.strictObject({ you: z.string(), agents: z.array(AgentOut) }),
  annotations: READ_ONLY,
  headline: (r) => `${r.agents.length} agents (you are ${r.you})`,
  async run(_args, ctx) {
    const { items } = await ctx.api.get<{ items: Array<z.infer<typeof AgentOut>> }>('/v1/agents');
    return {
      you: ctx.identity.agent,
      agents: items.map((a) => ({ id: a.id, displayName: a.displayName, provider: a.provider, pool: a.pool, roles: a.roles })),
    };
  },
});
