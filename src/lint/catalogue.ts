/** The full rule catalogue the CLI and formatters show: the registry plus idemkit's built-in rules. */
import { rules } from '../../rules/index.js';
import { DOCUMENT_INVALID_RULE_ID } from './engine.js';
import { defineRule } from './rule.js';
import type { Rule } from './rule.js';
import { createSuppressionRule } from './suppress.js';

/**
 * Metadata for the engine's document warnings, so config, `idemkit rules`, `explain` and SARIF know the id.
 * Its check is empty on purpose: the engine reports these from the document's warnings, once per document.
 */
const documentInvalidRule = defineRule({
  meta: {
    id: DOCUMENT_INVALID_RULE_ID,
    severity: 'warn',
    description: 'A part of the document that is invalid OpenAPI but unrelated to idempotency (reported once, linting goes on).',
    criterion: 'contract',
    rationale: 'Real specs are often slightly invalid elsewhere; that must not hide their idempotency findings, nor pass unnoticed.',
    messages: { documentInvalid: '{message}' },
  },
  check() {},
}) as Rule;

let cached: readonly Rule[] | undefined;

/** Every rule idemkit knows: registry order first, then the built-ins `suppression-invalid` and `document-invalid`. */
export function catalogue(): readonly Rule[] {
  if (!cached) {
    const ids = [...rules.map((rule) => rule.meta.id), DOCUMENT_INVALID_RULE_ID];
    cached = [...rules, createSuppressionRule(ids), documentInvalidRule];
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
