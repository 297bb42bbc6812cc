import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { clearBudget, listBudgets, setBudget, type BudgetView } from '../../../../libs/handoffs/manage-budgets.ts';
import { callerOf, projectOf, requireAdmin, type RouteOptions } from '../../route-context.ts';
import { ErrorBody, ProjectHeader } from '../../schemas/common.ts';
import { BudgetBody, BudgetQuery, BudgetsJson } from '../../schemas/budgets.ts';
import { tagRoutes } from '../../plugins/openapi.ts';

function present(b: BudgetView) {
  return {
    agent: b.agent,
    tokensPerDay: b.limits.tokensPerDay,
    usdPerDay: b.limits.usdPerDay,
    spentToday: b.spentToday,
    holding: b.holding,
    resetsAt: b.resetsAt.toISOString(),
    updatedAt: b.updatedAt.toISOString(),
  };
}

/**
 * Budgets (`baton budget set|show|clear`): what a project, or one agent, may spend a UTC day.
 * An admin sets and clears them; an agent token reads the ones that cover it (its project's and
 * its own), an admin every one of the project (or those covering `?agent=`).
 */
const budgetRoutes: FastifyPluginAsyncTypebox<RouteOptions> = async (app, opts) => {
  tagRoutes(app, 'budgets');
  const { core, defaultProject } = opts;

  app.get(
    '/budgets',
    { schema: { headers: ProjectHeader, querystring: BudgetQuery, response: { 200: BudgetsJson, '4xx': ErrorBody } } },
    async (request) => {
      const caller = callerOf(request);
      const agent = caller.agent?.handle ?? request.query.agent;
      const items = await listBudgets(core, { project: projectOf(request, defaultProject), ...(agent ? { agent } : {}) });
      return { items: items.map(present) };
    },
  );

  app.put(
    '/budgets',
    { schema: { headers: ProjectHeader, body: BudgetBody, response: { 200: BudgetsJson, '4xx': ErrorBody } } },
    async (request) => {
      requireAdmin(request);
      const items = await setBudget(core, { project: projectOf(request, defaultProject), ...request.body });
      return { items: items.map(present) };
    },
  );

  app.delete(
    '/budgets',
    { schema: { headers: ProjectHeader, querystring: BudgetQuery, response: { 200: BudgetsJson, '4xx': ErrorBody } } },
    async (request) => {
      requireAdmin(request);
      const { agent } = request.query;
      const items = await clearBudget(core, { project: projectOf(request, defaultProject), ...(agent ? { agent } : {}) });
      return { items: items.map(present) };
    },
  );
};

export default budgetRoutes;
