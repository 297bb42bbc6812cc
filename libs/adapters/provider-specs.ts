import { Type } from 'typebox';
import { Compile } from 'typebox/compile';
import { BatonError } from '../domain/errors.ts';
import { DEMO_BEHAVIORS } from './demo/demo-agent-host.ts';
import { noSecrets, type ProviderSpec } from './provider-spec.ts';
import { WEBHOOK_SPEC } from './webhook/webhook-spec.ts';
import { COMMAND_SPEC } from './command/command-settings.ts';
import { CODEX_SPEC } from './codex/codex-settings.ts';
import { CLAUDE_CODE_SPEC } from './claude-code/claude-code-settings.ts';

const demo: ProviderSpec = {
  provider: 'demo',
  push: true,
  summary: 'simulated sessions (the demo, tests and the benchmark)',
  settingsSchema: Type.Object(
    {
      thinkMs: Type.Optional(Type.Integer({ minimum: 0, maximum: 3_600_000, description: 'how long a turn "works"' })),
      behavior: Type.Optional(
        Type.Union(
          DEMO_BEHAVIORS.map((b) => Type.Literal(b)),
          { description: 'how the session answers every turn' },
        ),
      ),
      replyDelayMs: Type.Optional(Type.Integer({ minimum: 0, maximum: 600_000, description: 'delay of the answer to the write' })),
    },
    { additionalProperties: false },
  ),
  redact: noSecrets,
  deadlines: { writeMs: 30_000, observeMs: 30_000, busyMs: 10_000 },
};

const manual: ProviderSpec = {
  provider: 'manual',
  push: false,
  summary: 'a pull receiver: takes work from its inbox (accept, heartbeat, return); nothing is pushed',
  settingsSchema: Type.Object({}, { additionalProperties: false }),
  redact: noSecrets,
  deadlines: { writeMs: 0, observeMs: 0, busyMs: 0 },
};

/**
 * Every provider Baton can register an agent for, by name. Adding a provider means adding its
 * spec here and its adapter to create-adapters.ts; nothing in the engine changes.
 */
export const PROVIDER_SPECS: ReadonlyMap<string, ProviderSpec> = new Map(
  [demo, manual, WEBHOOK_SPEC, COMMAND_SPEC, CODEX_SPEC, CLAUDE_CODE_SPEC].map((s) => [s.provider, s]),
);

const checkers = new Map([...PROVIDER_SPECS.values()].map((s) => [s.provider, Compile(s.settingsSchema)]));

/** The spec of a provider. @throws BatonError unknown_provider */
export function providerSpec(provider: string): ProviderSpec {
  const spec = PROVIDER_SPECS.get(provider);
  if (!spec)
    throw new BatonError(
      'unknown_provider',
      `no adapter for provider ${JSON.stringify(provider)}; use one of ${[...PROVIDER_SPECS.keys()].join(', ')}`,
    );
  return spec;
}

/**
 * Checks an agent's settings against its provider's schema and extra checks.
 * @throws BatonError unknown_provider, invalid_settings (naming the first bad path)
 */
export function validateProviderSettings(provider: string, settings: Readonly<Record<string, unknown>>): void {
  const spec = providerSpec(provider);
  const checker = checkers.get(spec.provider);
  if (checker && !checker.Check(settings)) {
    const problems = [...checker.Errors(settings)].slice(0, 3).map((e) => `${e.instancePath || '/'}: ${e.message}`);
    throw new BatonError('invalid_settings', `settings for provider ${provider} are not valid: ${problems.join('; ')}`, {
      provider,
      problems,
    });
  }
  const extra = spec.check?.(settings) ?? [];
  if (extra.length > 0) {
    throw new BatonError('invalid_settings', `settings for provider ${provider} are not valid: ${extra.slice(0, 3).join('; ')}`, {
      provider,
      problems: extra.slice(0, 3),
    });
  }
}

/** Settings as every read shows them: secrets replaced by `[redacted]`. Unknown providers show nothing. */
export function redactProviderSettings(provider: string, settings: Readonly<Record<string, unknown>>): Record<string, unknown> {
  const spec = PROVIDER_SPECS.get(provider);
  return spec ? spec.redact(settings) : {};
}

/** Providers with an adapter (workers deliver to them). */
export function pushProviders(): string[] {
  return [...PROVIDER_SPECS.values()].filter((s) => s.push).map((s) => s.provider);
}
