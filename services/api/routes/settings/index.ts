import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { getSettings, listConnections, setConnection, setSetting } from '../../../../libs/handoffs/manage-settings.ts';
import { presentConnection, presentSettings } from '../../present.ts';
import { projectOf, requireAdmin, type RouteOptions } from '../../route-context.ts';
import { ErrorBody, ProjectHeader } from '../../schemas/common.ts';
import { ConnectionBody, ConnectionsJson, SettingBody, SettingParams, SettingsJson } from '../../schemas/settings.ts';
import { tagRoutes } from '../../plugins/openapi.ts';

/** Runtime settings (`baton config`) and directed connections (`baton allow|block`). */
const settingsRoutes: FastifyPluginAsyncTypebox<RouteOptions> = async (app, opts) => {
  tagRoutes(app, 'settings');
  const { core, defaultProject } = opts;

  app.get('/settings', { schema: { response: { 200: SettingsJson } } }, async () => presentSettings(await getSettings(core)));

  app.put(
    '/settings/:key',
    { schema: { params: SettingParams, body: SettingBody, response: { 200: SettingsJson, '4xx': ErrorBody } } },
    async (request) => {
      requireAdmin(request);
      return presentSettings(await setSetting(core, request.params.key, request.body.value));
    },
  );

  app.get(
    '/connections',
    { schema: { headers: ProjectHeader, response: { 200: ConnectionsJson, '4xx': ErrorBody } } },
    async (request) => ({ items: (await listConnections(core, projectOf(request, defaultProject))).map(presentConnection) }),
  );

  app.put(
    '/connections',
    { schema: { headers: ProjectHeader, body: ConnectionBody, response: { 200: ConnectionsJson, '4xx': ErrorBody } } },
    async (request) => {
      requireAdmin(request);
      const items = await setConnection(core, { project: projectOf(request, defaultProject), ...request.body });
      return { items: items.map(presentConnection) };
    },
  );
};

export default settingsRoutes;
