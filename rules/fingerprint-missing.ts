import { defineRule } from '../src/lint/rule.js';
import { activeContract, fieldInvalid, requestBody } from '../src/lint/views.js';

/** The contract does not say which payload counts as the same. */
export default defineRule({
  meta: {
    id: 'fingerprint-missing',
    severity: 'error',
    description: 'An operation with a request body has no fingerprint in its contract.',
    criterion: 'payload',
    rationale:
      'Readiness question 2: without a fingerprint of the significant payload, a reused key with a different command cannot be detected and answered as a conflict before the effect.',
    messages: {
      missing:
        'no `fingerprint`: a key reused with a different body would replay the first result instead of answering `mismatch`; add `fingerprint: {include: [/field, …]}` (or `include: all` with `exclude: [/clientSentAt]`)',
    },
  },
  operations: 'contracted',
  check(ctx) {
    const contract = activeContract(ctx.contract);
    if (!contract || contract.fingerprint !== undefined || fieldInvalid(contract, 'fingerprint')) return;
    // An operation without a body has no payload to compare beyond its path and query.
    if (!requestBody(ctx.document, ctx.operation)) return;
    ctx.report('missing', contract.at('fingerprint'));
  },
});
