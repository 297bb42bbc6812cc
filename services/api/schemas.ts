/** The routes' JSON schemas now live in schemas/, one module per route area; this re-export goes next. */
export * from './schemas/common.ts';
export * from './schemas/agents.ts';
export * from './schemas/handoffs.ts';
export * from './schemas/identity.ts';
export * from './schemas/sessions.ts';
export * from './schemas/settings.ts';
export * from './schemas/views.ts';
export * from './schemas/work.ts';
