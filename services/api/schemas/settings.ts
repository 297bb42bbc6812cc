import { Type } from 'typebox';
import { Handle, NullableTimestamp, Timestamp } from './common.ts';

/** The settings area (routes/settings): runtime settings and connection rules. */

export const SettingsJson = Type.Object({
  enabled: Type.Boolean(),
  enabledAfter: NullableTimestamp,
  connections: Type.Union([Type.Literal('open'), Type.Literal('restricted')]),
  outageGuard: Type.Record(Type.String(), Type.Unknown()),
});

export const SettingParams = Type.Object({ key: Type.String({ minLength: 1, maxLength: 64 }) });
export const SettingBody = Type.Object({ value: Type.Unknown() }, { additionalProperties: false, required: ['value'] });

export const ConnectionBody = Type.Object(
  { from: Handle, to: Handle, rule: Type.Union([Type.Literal('allow'), Type.Literal('block')]) },
  { additionalProperties: false },
);

export const ConnectionsJson = Type.Object({
  items: Type.Array(Type.Object({ from: Type.String(), to: Type.String(), rule: Type.String(), updatedAt: Timestamp })),
});
