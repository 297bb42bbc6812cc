import type { Rule } from 'eslint';

export const noSilentCatch: Rule.RuleModule;
