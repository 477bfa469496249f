import { defineRule } from '../src/lint/rule.js';
import { activeContract } from '../src/lint/views.js';

/** `key.required: false`: a client without a key can blind-retry into a duplicate effect. */
export default defineRule({
  meta: {
    id: 'key-optional',
    severity: 'error',
    description: '`key.required: false` lets a request without a key through, so a blind retry of it duplicates the effect.',
    criterion: 'contract',
    rationale:
      'The header alone does not make POST idempotent, and neither does an optional one: a client that omits the key and retries after a lost response gets two effects.',
    messages: {
      optional:
        '`key.required` is false: a client that omits `{header}` and retries after a lost response runs the effect twice; set `key.required: true` and answer a missing key with `responses.missingKey` (400), and mark `{header}` required where the document declares it, so clients learn to send it. Clients that send no key today (openai-node without `idempotencyKey`, Twilio\'s and Adyen\'s SDKs, plain HTTP clients) then get 400 on every call: ship keys in your clients first, and meanwhile silence this rule on the operation (`x-idempotency-lint: { ignore: [key-optional], reason: … }`) with the date it ends',
    },
  },
  operations: 'contracted',
  check(ctx) {
    const contract = activeContract(ctx.contract);
    if (contract?.key.required === false) ctx.report('optional', contract.at('key', 'required'), { header: contract.key.name });
  },
});
