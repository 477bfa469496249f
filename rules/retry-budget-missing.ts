import { defineRule } from '../src/lint/rule.js';
import { activeContract, schemaFlagged } from '../src/lint/views.js';

/** The contract gives the client no overall deadline for one intent. */
export default defineRule({
  meta: {
    id: 'retry-budget-missing',
    severity: 'error',
    description: 'The contract has no retry budget: no overall deadline (and attempt bound) for one intent.',
    criterion: 'unknown-outcome',
    rationale:
      'One deadline per intent: first wait plus pauses plus retries, each retry spending what is left; after it the client reports an unknown outcome instead of retrying forever or starting a new timer per layer.',
    messages: {
      missing:
        'no `retry` budget: clients cannot tell when to stop retrying and report an unknown outcome; add `retry: {deadline: PT30S, maxAttempts: 4}`',
      noDeadline:
        '`retry` has no `deadline`: an attempt bound alone does not bound time (each layer would start its own timer); add one deadline for the whole intent, e.g. `deadline: PT30S`',
      invalidDeadline: '`retry.deadline: {value}` is not a positive ISO 8601 duration: write e.g. `PT30S`',
    },
  },
  operations: 'contracted',
  check(ctx) {
    const contract = activeContract(ctx.contract);
    if (!contract) return;
    const retry = contract.retry;
    if (!retry) {
      ctx.report('missing', contract.at('retry'));
      return;
    }
    if (!retry.deadline) {
      ctx.report('noDeadline', contract.at('retry', 'deadline'));
      return;
    }
    // Whether contract-invalid already says the deadline is no duration: asked only of a deadline that did not
    // parse (locating the field joins its pointer).
    if ((retry.deadline.ms === undefined && !schemaFlagged(contract, contract.at('retry', 'deadline'))) || (retry.deadline.ms ?? 1) <= 0) {
      ctx.report('invalidDeadline', contract.at('retry', 'deadline'), { value: String(retry.deadline.raw) });
    }
  },
});
