import { defineRule } from '../src/lint/rule.js';
import { activeContract } from '../src/lint/views.js';

/** The contract does not say who runs the effect. */
export default defineRule({
  meta: {
    id: 'effect-owner-missing',
    severity: 'error',
    description: 'The contract does not name the effect owner (`effect.owner`).',
    criterion: 'owner',
    rationale:
      'Readiness question 3: an independent engineer must be able to say which service owns the effect, and therefore who reconciles it after a crash.',
    messages: {
      missing:
        'no `effect.owner`: nobody can tell which service runs the effect and reconciles a stuck `in_progress`; add `effect: {owner: <service>, external: false}` (set `external: true` when the effect leaves this service\'s database)',
    },
  },
  operations: 'contracted',
  check(ctx) {
    const contract = activeContract(ctx.contract);
    if (contract && (contract.effect?.owner === undefined || contract.effect.owner.trim() === '')) {
      ctx.report('missing', contract.at('effect', 'owner'));
    }
  },
});
