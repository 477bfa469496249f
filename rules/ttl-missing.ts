import { defineRule } from '../src/lint/rule.js';
import { activeContract } from '../src/lint/views.js';

/** The contract does not say how long terminal records (the replay window) are kept. */
export default defineRule({
  meta: {
    id: 'ttl-missing',
    severity: 'error',
    description: 'The contract has no retention (`ttl`).',
    criterion: 'replay',
    rationale:
      'TTL is part of the contract: it must cover the retry budget, intermediary delays and allowed resubmission, or a late retry finds no record and runs the effect again.',
    messages: {
      missing:
        'no `ttl`: clients cannot know how long a retry with the same key is still deduplicated; add e.g. `ttl: P1D` (an ISO 8601 duration that covers the retry deadline)',
    },
  },
  operations: 'contracted',
  check(ctx) {
    const contract = activeContract(ctx.contract);
    if (contract && contract.ttl === undefined) ctx.report('missing', contract.at('ttl'));
  },
});
