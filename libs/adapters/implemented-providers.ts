/**
 * Providers Baton can deliver to today: push providers with an adapter, plus `manual` (pull
 * receivers that take work from their inbox). Later issues add command, webhook, codex and
 * claude_code here as their adapters land.
 */
export const PUSH_PROVIDERS = ['demo'] as const;
export const USABLE_PROVIDERS: readonly string[] = [...PUSH_PROVIDERS, 'manual'];
