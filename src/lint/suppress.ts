/**
 * Per-operation suppressions: `x-idempotency-lint: { ignore: [rule-id, …], reason: "…" }` on an operation.
 *
 * A suppression must say why. One without a reason, with an unknown rule id or with an unknown field
 * suppresses nothing it cannot vouch for and is itself reported by the built-in rule `suppression-invalid`
 * (a finding, not a usage error: the spec is the user's document, and the rest of it still gets linted).
 * Suppressed findings are kept, marked `suppressed: { reason }`; they do not count for the exit code.
 */
import type { ApiDocument, OperationView } from '../parser/model.js';
import { suggestionSuffix } from './did-you-mean.js';
import { operationName } from './operation-name.js';
import { defineRule } from './rule.js';
import type { Finding, Rule, RuleContext } from './rule.js';

/** The extension that holds a suppression. */
export const SUPPRESSION_KEY = 'x-idempotency-lint';

/** Id of the built-in rule that reports broken suppressions; it cannot itself be suppressed. */
export const SUPPRESSION_RULE_ID = 'suppression-invalid';

/** A usable suppression of one operation. */
export interface Suppression {
  readonly ignore: readonly string[];
  readonly reason: string;
}

/**
 * The operation's suppression when it is usable — a mapping of `ignore` and a non-empty `reason` only, naming no rule
 * outside `knownRuleIds` (when given) nor `suppression-invalid` — else `undefined`: one `suppression-invalid` reports
 * silences nothing, whether or not that rule runs.
 */
export function readSuppression(operation: OperationView, knownRuleIds?: readonly string[]): Suppression | undefined {
  const raw = operation.node[SUPPRESSION_KEY];
  if (!isRecord(raw)) return undefined;
  const reason = typeof raw.reason === 'string' ? raw.reason.trim() : '';
  if (reason === '' || !Array.isArray(raw.ignore)) return undefined;
  for (const field of Object.keys(raw)) if (field !== 'ignore' && field !== 'reason') return undefined;
  const ignore: string[] = [];
  for (const id of raw.ignore) {
    if (typeof id !== 'string' || id === SUPPRESSION_RULE_ID || (knownRuleIds !== undefined && !knownRuleIds.includes(id))) return undefined;
    ignore.push(id);
  }
  return { ignore, reason };
}

/** Builds the `suppression-invalid` rule for a catalogue of known rule ids. */
export function createSuppressionRule(knownRuleIds: readonly string[]): Rule {
  const rule = defineRule({
    meta: {
      id: SUPPRESSION_RULE_ID,
      severity: 'error',
      description: 'An x-idempotency-lint suppression without a reason, or naming a rule that does not exist.',
      criterion: 'contract',
      rationale:
        'A silenced readiness finding must carry its justification into the review, or the contract quietly stops answering one of the five questions.',
      messages: {
        notMapping: `${SUPPRESSION_KEY} on {operation} must be a mapping: { ignore: [rule-id], reason: "why this is acceptable" }.`,
        reasonMissing: `${SUPPRESSION_KEY} on {operation} has no reason; add reason: "why this is acceptable" (it is shown in every report). Nothing is suppressed until it has one.`,
        ignoreMissing: `${SUPPRESSION_KEY} on {operation} must list the rules it silences: ignore: [rule-id].`,
        unknownRule: `${SUPPRESSION_KEY} on {operation} names unknown rule "{id}"{suggestion}; run \`idemkit rules\` for the list.`,
        unsuppressible: `${SUPPRESSION_KEY} on {operation} cannot silence "${SUPPRESSION_RULE_ID}"; fix the suppression instead.`,
        unknownField: `Unknown field "{field}" in ${SUPPRESSION_KEY} on {operation} (allowed: ignore, reason).`,
      },
    },
    check(ctx) {
      // Most operations have no suppression: this runs for every one, so the closures that check one are made in
      // checkSuppression, not here (a function whose locals a closure captures makes a context per call).
      const raw = ctx.operation.node[SUPPRESSION_KEY];
      if (raw === undefined) return;
      checkSuppression(ctx, raw, knownRuleIds);
    },
  });
  return rule as Rule;
}

type SuppressionMessageId = 'notMapping' | 'reasonMissing' | 'ignoreMissing' | 'unknownRule' | 'unsuppressible' | 'unknownField';

/** Reports what is wrong with the suppression `raw` of the context's operation (see {@link createSuppressionRule}). */
function checkSuppression(ctx: RuleContext<SuppressionMessageId>, raw: unknown, knownRuleIds: readonly string[]): void {
  const { operation } = ctx;
  const base = operation.at.pointer + '/' + SUPPRESSION_KEY;
  const at = (...tokens: (string | number)[]) => ({
    file: operation.at.file,
    pointer: base + tokens.map((token) => '/' + String(token).replace(/~/g, '~0').replace(/\//g, '~1')).join(''),
  });
  const data = { operation: operation.label };
  if (!isRecord(raw)) {
    ctx.report('notMapping', at(), data);
    return;
  }
  for (const field of Object.keys(raw)) {
    if (field !== 'ignore' && field !== 'reason') ctx.report('unknownField', at(field), { ...data, field });
  }
  if (!Array.isArray(raw.ignore) || raw.ignore.length === 0) {
    ctx.report('ignoreMissing', raw.ignore === undefined ? at() : at('ignore'), data);
  } else {
    raw.ignore.forEach((id, index) => {
      if (id === SUPPRESSION_RULE_ID) ctx.report('unsuppressible', at('ignore', index), data);
      else if (typeof id !== 'string' || !knownRuleIds.includes(id)) {
        const text = String(id);
        ctx.report('unknownRule', at('ignore', index), { ...data, id: text, suggestion: suggestionSuffix(text, knownRuleIds) });
      }
    });
  }
  if (typeof raw.reason !== 'string' || raw.reason.trim() === '') {
    ctx.report('reasonMissing', raw.reason === undefined ? at() : at('reason'), data);
  }
}

/**
 * Marks the findings of one document that its operations' suppressions silence. A finding about several
 * operations (a shared component) is suppressed only when every one of them silences its rule. A suppression that
 * `suppression-invalid` would report (no reason, an unknown field, a rule not among `knownRuleIds`) silences nothing.
 */
export function applySuppressions(document: ApiDocument, findings: readonly Finding[], knownRuleIds?: readonly string[]): Finding[] {
  const byName = new Map<string, Suppression>();
  for (const operation of document.operations) {
    const suppression = readSuppression(operation, knownRuleIds);
    if (suppression) {
      byName.set(operationName(operation), suppression);
      byName.set(operation.label, suppression);
    }
  }
  if (byName.size === 0) return [...findings];
  return findings.map((finding) => {
    if (finding.ruleId === SUPPRESSION_RULE_ID || finding.operations.length === 0 || finding.suppressed) return finding;
    const reasons: string[] = [];
    for (const label of finding.operations) {
      const suppression = byName.get(label);
      if (!suppression || !suppression.ignore.includes(finding.ruleId)) return finding;
      if (!reasons.includes(suppression.reason)) reasons.push(suppression.reason);
    }
    return { ...finding, suppressed: { reason: reasons.join('; ') } };
  });
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
