import type { AdapterRegistry } from '../../libs/adapters/adapter-registry.ts';
import type { AgentRepository } from '../../libs/db/agent-repository.ts';
import type { ProviderName } from '../../libs/db/records.ts';
import type { Logger } from '../../libs/logging/create-logger.ts';

/** What preparing one agent's runtime did. */
export interface PreparedAgent {
  readonly agentId: string;
  readonly handle: string;
  readonly provider: string;
  readonly ready: boolean;
  readonly detail: string;
}

export interface PrepareAgentsDeps {
  readonly agents: Pick<AgentRepository, 'listServed'>;
  readonly adapters: AdapterRegistry;
  /** The deployment and pools this worker serves: only their agents are prepared. */
  readonly deployment: string;
  readonly pools: readonly string[];
  readonly logger: Logger;
}

/**
 * At a worker's start: readies the runtime of every agent it serves whose adapter can be
 * prepared (`ProviderAdapter.prepare`; Codex: link the installed package into the Codex home and
 * start its daemon), so that no first turn pays a slow start inside its write deadline. One agent
 * at a time (agents sharing a runtime find it ready), stopping when `signal` aborts. Reads only
 * the agent list and writes no turn; a failure is logged and leaves the first write to try again.
 */
export async function prepareAgents(deps: PrepareAgentsDeps, signal: AbortSignal): Promise<PreparedAgent[]> {
  const done: PreparedAgent[] = [];
  for (const provider of deps.adapters.providers()) {
    const adapter = deps.adapters.get(provider);
    if (!adapter?.prepare) continue;
    let agents;
    try {
      agents = await deps.agents.listServed(deps.deployment, [provider as ProviderName], deps.pools);
    } catch (err) {
      deps.logger.warn({ err, provider }, 'could not list the agents to prepare');
      continue;
    }
    for (const agent of agents) {
      if (signal.aborted) return done;
      const target = { agentId: agent.id, handle: agent.handle, target: agent.deliveryTarget, settings: agent.providerSettings };
      const started = Date.now();
      let outcome: { ready: boolean; detail: string };
      try {
        outcome = await adapter.prepare(target, signal);
      } catch (err) {
        outcome = { ready: false, detail: err instanceof Error ? err.message : String(err) };
      }
      const fields = {
        agentId: agent.id,
        handle: agent.handle,
        provider,
        ready: outcome.ready,
        detail: outcome.detail,
        ms: Date.now() - started,
      };
      if (outcome.ready) deps.logger.info(fields, 'agent runtime prepared');
      else deps.logger.warn(fields, 'agent runtime not prepared; its first turn starts it');
      done.push({ agentId: agent.id, handle: agent.handle, provider, ready: outcome.ready, detail: outcome.detail });
    }
  }
  return done;
}
