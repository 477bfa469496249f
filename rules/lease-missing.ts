import { defineRule } from '../src/lint/rule.js';
import { activeContract, schemaFlagged } from '../src/lint/views.js';

/** The contract does not bound how long an in-progress reservation is owned. */
export default defineRule({
  meta: {
    id: 'lease-missing',
    severity: 'error',
    description: 'The contract has no (valid) `lease` for in-progress reservations.',
    criterion: 'owner',
    rationale:
      'Only the reservation owner runs the effect; without a lease a crashed owner blocks the key forever or invites a blind delete, which after an external call creates the duplicate.',
    messages: {
      missing:
        'no `lease`: a crashed owner keeps the key `in_progress` forever, or someone deletes the row and the retry duplicates the effect; add e.g. `lease: PT30S` (longer than the handler\'s worst case) and `responses.abandoned`',
      invalid: '`lease: {value}` is not a positive duration: an owner with a zero lease is abandoned at once; write e.g. `PT30S`',
    },
  },
  operations: 'contracted',
  check(ctx) {
    const contract = activeContract(ctx.contract);
    if (!contract) return;
    if (!contract.lease) ctx.report('missing', contract.at('lease'));
    else if ((contract.lease.ms === undefined && !schemaFlagged(contract, contract.at('lease'))) || (contract.lease.ms ?? 1) <= 0) ctx.report('invalid', contract.at('lease'), { value: String(contract.lease.raw) });
  },
});
