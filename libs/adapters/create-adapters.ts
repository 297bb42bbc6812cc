import { AdapterRegistry } from './adapter-registry.ts';
import { createDemoAdapter } from './demo/create-demo-adapter.ts';
import type { DemoHostPort } from './demo/demo-agent-host.ts';
import type { ProviderAdapter } from './provider-adapter.ts';
import { createWebhookAdapter, type TurnReportsPort } from './webhook/create-webhook-adapter.ts';
import { createCommandAdapter } from './command/create-command-adapter.ts';
import { createCodexAdapter } from './codex/create-codex-adapter.ts';
import { createClaudeCodeAdapter } from './claude-code/create-claude-code-adapter.ts';

import { providerSpec, pushProviders } from './provider-specs.ts';
import type { AdapterDeadlines } from './provider-spec.ts';
import { withDeadlines } from './with-deadlines.ts';

export interface AdapterFactoryDeps {
  /** Where the demo provider's simulated sessions live; needed for `demo`. */
  readonly demoHost?: DemoHostPort | undefined;
  /**
   * Deadlines per provider (config `BATON_ADAPTER_DEADLINES`), over the defaults each
   * provider's spec declares.
   */
  readonly deadlines?: Readonly<Record<string, Partial<AdapterDeadlines>>>;
  /** Reports webhook agents sent to the callback route (libs/db `turnReports`); needed for `webhook`. */
  readonly turnReports?: TurnReportsPort;
  /** Baton's callback route as webhook agents reach it; an agent's `callbackUrl` setting wins. */
  readonly webhookCallbackUrl?: string | undefined;
  /**
   * Needed for `command`: where its run records live (`runDir`, per host, surviving worker
   * restarts) and the worker environment programs inherit (`inheritedEnv(process.env)`).
   */
  readonly command?: { readonly runDir: string; readonly baseEnv: Readonly<Record<string, string>> };
  /**
   * Needed for `claude_code`: where its run records live (per host, surviving worker restarts)
   * and the worker environment claude inherits (`inheritedEnv(process.env)`).
   */
  readonly claudeCode?: { readonly runDir: string; readonly baseEnv: Readonly<Record<string, string>> };
  /** Needed for `codex`: what each `codex app-server` inherits (`codexInheritedEnv(process.env)`). */
  readonly codex?: { readonly baseEnv: Readonly<Record<string, string>>; readonly pollMs?: number };
}

/**
 * Builds the adapters a worker process runs.
 * @throws Error naming the provider when one has no adapter yet.
 */
export function createAdapters(providers: readonly string[], deps: AdapterFactoryDeps): AdapterRegistry {
  // Every adapter call gets its provider's deadlines here, once, so no adapter can forget them.
  const adapters: ProviderAdapter[] = providers.map((p) =>
    withDeadlines(createAdapter(p, deps), { ...providerSpec(p).deadlines, ...deps.deadlines?.[p] }),
  );
  return new AdapterRegistry(adapters);
}

/** One provider's adapter, without deadlines. */
function createAdapter(p: string, deps: AdapterFactoryDeps): ProviderAdapter {
  switch (p) {
    case 'demo':
      if (!deps.demoHost) throw new Error('the demo adapter needs the demo agent host (deps.demoHost)');
      return createDemoAdapter(deps.demoHost);
    case 'webhook':
      if (!deps.turnReports) throw new Error('the webhook adapter needs the turn reports store (deps.turnReports)');
      return createWebhookAdapter({ reports: deps.turnReports, callbackUrl: deps.webhookCallbackUrl });
    case 'command':
      if (!deps.command) throw new Error('the command adapter needs a run directory and a base environment (deps.command)');
      return createCommandAdapter(deps.command);
    case 'codex':
      if (!deps.codex) throw new Error('the codex adapter needs the environment its app-servers inherit (deps.codex)');
      return createCodexAdapter(deps.codex);
    case 'claude_code':
      if (!deps.claudeCode) throw new Error('the claude_code adapter needs a run directory and a base environment (deps.claudeCode)');
      return createClaudeCodeAdapter(deps.claudeCode);
    default:
      throw new Error(`no adapter for provider ${JSON.stringify(p)}; available: ${pushProviders().join(', ')}`);
  }
}
