// Prints the delivery state diagram (Mermaid) generated from libs/domain/transitions.ts.
import { renderStateDiagram } from '../libs/domain/state-diagram.ts';

process.stdout.write(`${renderStateDiagram()}\n`);
