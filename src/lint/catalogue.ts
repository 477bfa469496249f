/** The full rule catalogue the CLI and formatters show: the registry plus idemkit's built-in rules. */
import { rules } from '../../rules/index.js';
import type { Rule } from './rule.js';
import { createSuppressionRule } from './suppress.js';

let cached: readonly Rule[] | undefined;

/** Every rule idemkit knows, registry order first, then the built-in `suppression-invalid`. */
export function catalogue(): readonly Rule[] {
  if (!cached) {
    const ids = rules.map((rule) => rule.meta.id);
    cached = [...rules, createSuppressionRule(ids)];
  }
  return cached;
}

/** Ids of {@link catalogue}. */
export function knownRuleIds(): string[] {
  return catalogue().map((rule) => rule.meta.id);
}

/** A rule by id, or `undefined`. */
export function findRule(id: string): Rule | undefined {
  return catalogue().find((rule) => rule.meta.id === id);
}
