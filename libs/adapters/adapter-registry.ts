import type { ProviderAdapter } from './provider-adapter.ts';

/** The adapters one worker process runs, by provider name. */
export class AdapterRegistry {
  private readonly byProvider: ReadonlyMap<string, ProviderAdapter>;

  constructor(adapters: readonly ProviderAdapter[]) {
    this.byProvider = new Map(adapters.map((a) => [a.provider, a]));
  }

  get(provider: string): ProviderAdapter | undefined {
    return this.byProvider.get(provider);
  }

  providers(): string[] {
    return [...this.byProvider.keys()];
  }

  async close(): Promise<void> {
    await Promise.all([...this.byProvider.values()].map((a) => a.close()));
  }
}
