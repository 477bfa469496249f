import { defineRule } from '../src/lint/rule.js';
import { activeContract, fieldInvalid } from '../src/lint/views.js';

/** The contract does not say which attempts share a key. */
export default defineRule({
  meta: {
    id: 'scope-missing',
    severity: 'error',
    description: 'The contract has no key scope.',
    criterion: 'scope',
    rationale: 'Readiness question 1: an independent engineer must be able to say which scope binds the attempts of one intent.',
    messages: {
      missing:
        'no key `scope`: nobody can tell whose keys collide with whose; add `scope: [principal]` (plus e.g. `header:X-Tenant-Id`), or `scope: [global]` to make a wide scope explicit',
    },
  },
  operations: 'contracted',
  check(ctx) {
    const contract = activeContract(ctx.contract);
    if (contract && (contract.scope === undefined || contract.scope.length === 0) && !fieldInvalid(contract, 'scope')) ctx.report('missing', contract.at('scope'));
  },
});
