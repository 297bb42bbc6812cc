import { DELIVERY_STATES } from './delivery-states.ts';
import { TRANSITIONS } from './transitions.ts';
import { INITIAL_WORK_STATE, WORK_STATES, WORK_TRANSITIONS, workMoveWhenDeliverySettles, type WorkResultEffect } from './work-states.ts';

/**
 * The delivery state diagram as Mermaid, generated from the transition table. The copy in
 * libs/handoffs/README.md is checked against this by a test; regenerate it with
 * `npm run state-diagram`.
 */
export function renderStateDiagram(): string {
  const lines = ['stateDiagram-v2'];
  for (const rule of TRANSITIONS) {
    for (const from of rule.from) {
      lines.push(`    ${from ?? '[*]'} --> ${rule.to}: ${rule.event} (${rule.actors.join('/')})`);
    }
  }
  return lines.join('\n');
}

const RESULT_LABEL: Record<WorkResultEffect, string> = {
  succeeded: 'outcome succeeded',
  failed: 'outcome failed',
  cleared: 'clears the last result',
};

/**
 * The work state diagram as Mermaid, generated from the work table: one edge per (from, event,
 * to) with every actor that may cause it and what it does to the attempt's result, and a note
 * on each state Baton moves work to when its delivery ends. Checked against the copy in
 * libs/handoffs/README.md like the delivery diagram.
 */
export function renderWorkStateDiagram(): string {
  const lines = ['stateDiagram-v2', `    [*] --> ${INITIAL_WORK_STATE}: sent with a title, or to the project (sender)`];
  const edges = new Map<string, { actors: string[]; result: WorkResultEffect | undefined }>();
  for (const rule of WORK_TRANSITIONS) {
    for (const from of rule.from) {
      const key = `${from} --> ${rule.to}: ${rule.event}`;
      const edge = edges.get(key) ?? { actors: [], result: rule.result };
      if (edge.result !== rule.result) throw new Error(`the work table gives ${key} two different results`);
      edge.actors.push(...rule.actors);
      edges.set(key, edge);
    }
  }
  for (const [key, edge] of edges)
    lines.push(`    ${key} (${edge.actors.join('/')})${edge.result ? `, ${RESULT_LABEL[edge.result]}` : ''}`);
  for (const state of WORK_STATES) {
    const when = DELIVERY_STATES.filter((d) => workMoveWhenDeliverySettles(d)?.to === state);
    if (when.length > 0) lines.push(`    note right of ${state}: also when the delivery ends ${when.join(' or ')} (system)`);
  }
  return lines.join('\n');
}
