import { TRANSITIONS } from './transitions.ts';

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
