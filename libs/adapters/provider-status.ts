import type { OutageGuardSpec } from '../domain/runtime-settings.ts';
import { PROVIDER_STATUS_DEFAULTS } from '../config/component-defaults.ts';

export interface ProviderStatus {
  readonly down: boolean;
  readonly detail: string | null;
}

const UP: ProviderStatus = { down: false, detail: null };

/**
 * The outage guard's status check. A spec's manual `down` switch wins; otherwise its
 * `statusUrl` is fetched (cached `cacheMs` per URL) and the provider counts as down when the
 * page answers non-2xx or reports a statuspage.io indicator of `major` or `critical` (or
 * `{"up": false}`). A status page that cannot be reached says nothing: deliveries go on.
 */
export function createProviderStatusCheck(opts: { cacheMs?: number; timeoutMs?: number; fetch?: typeof fetch } = {}) {
  const cacheMs = opts.cacheMs ?? PROVIDER_STATUS_DEFAULTS.cacheMs;
  const timeoutMs = opts.timeoutMs ?? PROVIDER_STATUS_DEFAULTS.timeoutMs;
  const doFetch = opts.fetch ?? fetch;
  const cache = new Map<string, { at: number; status: ProviderStatus }>();

  async function poll(provider: string, url: string, detail: string | undefined): Promise<ProviderStatus> {
    try {
      const res = await doFetch(url, { signal: AbortSignal.timeout(timeoutMs) });
      const label = detail ?? `${provider} reports an outage (${url})`;
      if (!res.ok) return { down: true, detail: `${label}: HTTP ${res.status}` };
      const body = (await res.json().catch(() => null)) as { status?: { indicator?: string }; up?: boolean } | null;
      const indicator = body?.status?.indicator;
      if (indicator === 'major' || indicator === 'critical' || body?.up === false) return { down: true, detail: label };
      return UP;
    } catch {
      return UP;
    }
  }

  return {
    async check(provider: string, spec: OutageGuardSpec | undefined): Promise<ProviderStatus> {
      if (!spec) return UP;
      if (spec.down === true) return { down: true, detail: spec.detail ?? `${provider} is marked down (outageGuard)` };
      if (!spec.statusUrl) return UP;
      const hit = cache.get(spec.statusUrl);
      if (hit && performance.now() - hit.at < cacheMs) return hit.status;
      const status = await poll(provider, spec.statusUrl, spec.detail);
      cache.set(spec.statusUrl, { at: performance.now(), status });
      return status;
    },
  };
}

export type ProviderStatusCheck = ReturnType<typeof createProviderStatusCheck>;
