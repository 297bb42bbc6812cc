import { z } from 'zod';
import { LANES } from '../../domain/board.ts';
import { defineTool, READ_ONLY } from '../define-tool.ts';
import { Handle, HandoffOut } from '../schemas.ts';
import {} from '../tool-context.ts';

const Card = z.looseObject({
  handoff: HandoffOut,
  lane: z.string(),
  reasons: z.array(z.string()),
  next: z.looseObject({ action: z.string(), who: z.string() }),
});

/** `board`: work in lanes (ready, in progress, attention, returned), with the next action and whose. */
export const boardTool = defineTool({
  name: 'board',
  title: 'Work board',
  description: 'Work you can see, in lanes: ready, in_progress, attention, returned; each card says why it is there and who acts next.',
  input: z.strictObject({
    involving: Handle.optional().describe('only work this agent sends, receives, holds or may claim (a filter; you still act as yourself)'),
  }),
  output: z.strictObject(
    Object.fromEntries(LANES.map((lane) => [lane, z.array(Card)])) as Record<(typeof LANES)[number], z.ZodArray<typeof Card>>,
  ),
  annotations: READ_ONLY,
  headline: (r) => `board: ${LANES.map((lane) => `${lane} ${(r as Record<string, unknown[]>)[lane]?.length ?? 0}`).join(', ')}`,
  async run({ involving }, ctx) {
    return ctx.api.get(`/v1/board${involving ? `?agent=${encodeURIComponent(involving)}` : ''}`);
  },
});
