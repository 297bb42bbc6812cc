import { AdapterRegistry } from './adapter-registry.ts';
import { createDemoAdapter } from './demo/create-demo-adapter.ts';
import type { DemoHostPort } from './demo/demo-agent-host.ts';
import type { ProviderAdapter } from './provider-adapter.ts';

import { PUSH_PROVIDERS } from './implemented-providers.ts';

export interface AdapterFactoryDeps {
  /** Where the demo provider's simulated sessions live. */
  readonly demoHost: DemoHostPort;
}

/**
 * Builds the adapters a worker process runs.
 * @throws Error naming the provider when one has no adapter yet.
 */
export function createAdapters(providers: readonly string[], deps: AdapterFactoryDeps): AdapterRegistry {
  const adapters: ProviderAdapter[] = providers.map((p) => {
    switch (p) {
      case 'demo':
        return createDemoAdapter(deps.demoHost);
      default:
        throw new Error(`no adapter for provider ${JSON.stringify(p)}; available: ${PUSH_PROVIDERS.join(', ')}`);
    }
  });
  return new AdapterRegistry(adapters);
}
