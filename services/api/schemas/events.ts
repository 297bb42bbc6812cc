import { Type } from 'typebox';
import { Handle, Id, ProjectHeader } from './common.ts';

/** The events area (routes/events): the server-sent event stream's query and headers. */

export const EventId = Type.String({ pattern: '^[0-9]{1,19}$', maxLength: 19 });
export const EventsQuery = Type.Object(
  {
    after: Type.Optional(EventId),
    handoff: Type.Optional(Id),
    /** An admin's project, as X-Baton-Project would name it: a browser's EventSource sends no headers. */
    project: Type.Optional(Handle),
    all_owners: Type.Optional(Type.Union([Type.Literal('true'), Type.Literal('false')])),
  },
  { additionalProperties: false },
);
// One object, not an intersection: the OpenAPI document lists each header as a parameter.
export const EventsHeaders = Type.Object({ ...ProjectHeader.properties, 'last-event-id': Type.Optional(EventId) });
