import type { AgentRepository } from '../../libs/db/agent-repository.ts';
import type { Logger } from '../../libs/logging/create-logger.ts';

/**
 * At a worker's start: says which deployment it serves and how many push agents that deployment
 * owns, and warns when it owns none while other deployments on the database own some. That is
 * what an operator sees after changing BATON_REDIS_PREFIX (agents stay with the deployment that
 * registered them, and workers act only on their own deployment's agents), so the warning names
 * the statement that moves them. Reads only; a failure is logged and changes nothing.
 */
export async function reportDeployment(
  agents: Pick<AgentRepository, 'countPushAgentsByDeployment'>,
  deployment: string,
  logger: Logger,
): Promise<void> {
  try {
    const counts = await agents.countPushAgentsByDeployment();
    const own = counts.find((c) => c.deployment === deployment)?.agents ?? 0;
    const others = counts.filter((c) => c.deployment !== deployment);
    const otherAgents = Object.fromEntries(others.map((c) => [c.deployment, c.agents]));
    logger.info({ deployment, agents: own, otherDeployments: otherAgents }, 'worker serves the agents of its deployment');
    if (own === 0 && others.length > 0) {
      const from = others[0]!.deployment;
      logger.warn(
        {
          deployment,
          otherDeployments: otherAgents,
          ifTheyAreOurs: `UPDATE agents SET deployment = '${deployment}' WHERE deployment = '${from}' (while no turn is live)`,
        },
        'this deployment (its BATON_REDIS_PREFIX) owns no agents, other deployments on this database do, and its workers never deliver to those',
      );
    }
  } catch (err) {
    logger.warn({ err }, 'could not count the agents of this deployment');
  }
}
