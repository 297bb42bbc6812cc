import { settingsFrom, type RuntimeSettings } from '../domain/runtime-settings.ts';
import type { SettingsRepository } from '../db/settings-repository.ts';

/**
 * Reads runtime settings for the delivery loop, at most once per `maxAgeMs` of real time
 * (a cache, not a business timer). `invalidate()` makes this process see its own change at once.
 */
export class RuntimeSettingsReader {
  private cached: { at: number; value: RuntimeSettings } | null = null;
  private loading: Promise<RuntimeSettings> | null = null;

  constructor(
    private readonly repo: Pick<SettingsRepository, 'all'>,
    private readonly maxAgeMs = 1_000,
  ) {}

  async get(): Promise<RuntimeSettings> {
    const now = performance.now();
    if (this.cached && now - this.cached.at < this.maxAgeMs) return this.cached.value;
    this.loading ??= this.repo
      .all()
      .then((rows) => {
        const value = settingsFrom(rows);
        this.cached = { at: performance.now(), value };
        return value;
      })
      .finally(() => {
        this.loading = null;
      });
    return this.loading;
  }

  invalidate(): void {
    this.cached = null;
  }
}
