import { defineRule } from '../src/lint/rule.js';
import { activeContract } from '../src/lint/views.js';

/** An external effect with neither provider-side deduplication nor a way to read the outcome. */
export default defineRule({
  meta: {
    id: 'external-without-reconciliation',
    severity: 'error',
    description: '`effect.external: true` with no provider key (`providerKey: none` or unset) and no `statusRoute`.',
    criterion: 'owner',
    rationale:
      'A local transaction does not roll back a provider call: after a crash between the call and `completed`, only the provider\'s own idempotency or reading the result by business id avoids the duplicate.',
    messages: {
      unreconcilable:
        'the effect is external but {provider} and there is no `effect.statusRoute`: after a crash between the provider call and the record, the outcome can be neither deduplicated nor read back; forward the key to the provider (`providerKey: forward` or `derived`) or add a `statusRoute` that reads the result',
    },
  },
  operations: 'contracted',
  check(ctx) {
    const contract = activeContract(ctx.contract);
    const effect = contract?.effect;
    if (!contract || !effect || effect.external !== true) return;
    if ((effect.providerKey === undefined || effect.providerKey === 'none') && effect.statusRoute === undefined) {
      const provider = effect.providerKey === 'none' ? '`providerKey` is `none`' : 'no `providerKey` is given';
      ctx.report('unreconcilable', contract.at('effect', effect.providerKey === undefined ? 'external' : 'providerKey'), { provider });
    }
  },
});
