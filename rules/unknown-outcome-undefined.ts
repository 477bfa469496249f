import { defineRule } from '../src/lint/rule.js';
import { activeContract, fieldInvalid } from '../src/lint/views.js';

/** The contract does not say what a client does when no terminal answer came within its deadline. */
export default defineRule({
  meta: {
    id: 'unknown-outcome-undefined',
    severity: 'error',
    description: 'The contract does not define the unknown-outcome action, or says `status-route` without a status route.',
    criterion: 'unknown-outcome',
    rationale:
      'Readiness question 5: after the deadline the client must show an unknown outcome and know where to check it, instead of guessing or creating a second intent.',
    messages: {
      missing:
        'no `unknownOutcome`: clients do not know what to do when the deadline passes without a terminal answer; add `unknownOutcome: status-route` (with `effect.statusRoute`) or `unknownOutcome: surface`',
      noStatusRoute:
        '`unknownOutcome: status-route` but the contract names no `effect.statusRoute`: add the operationId of the GET that reads the outcome, or use `unknownOutcome: surface`',
    },
  },
  operations: 'contracted',
  check(ctx) {
    const contract = activeContract(ctx.contract);
    if (!contract) return;
    if (contract.unknownOutcome === undefined) {
      if (!fieldInvalid(contract, 'unknownOutcome')) ctx.report('missing', contract.at('unknownOutcome'));
    } else if (contract.unknownOutcome === 'status-route' && contract.effect?.statusRoute === undefined) {
      ctx.report('noStatusRoute', contract.at('unknownOutcome'));
    }
  },
});
