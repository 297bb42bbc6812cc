import { Type } from 'typebox';
import { Hidden } from './common.ts';

/** The views area (routes/status; routes/live keeps its own): read-only summaries. */

export const StatusJson = Type.Object({
  project: Type.String(),
  total: Type.Integer(),
  byState: Type.Record(Type.String(), Type.Integer()),
  hidden: Hidden,
});
