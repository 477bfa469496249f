import { defineRule } from '../src/lint/rule.js';
import { activeContract, findParameter, parameterSchema } from '../src/lint/views.js';

/** The key has no length bound, pattern or format, in the contract or on its header parameter. */
export default defineRule({
  meta: {
    id: 'key-unbounded',
    severity: 'warn',
    description: 'The idempotency key has no maxLength (and no pattern or format), neither in the contract nor on its header parameter.',
    criterion: 'contract',
    rationale:
      'The key is part of a durable record; an unbounded key lets a client store arbitrary data and leaves "invalid key" undefined, one of the states the contract must answer.',
    messages: {
      unbounded:
        'the key `{header}` has no `maxLength`, `pattern` or `format`: set `key.maxLength` (255 is a good default; accept at least 64 for generated `<sdk>-retry-<uuid>` keys) so overlong keys get `responses.invalidKey`',
    },
  },
  check(ctx) {
    const contract = activeContract(ctx.contract);
    if (!contract) return;
    if (contract.key.maxLength !== undefined || contract.key.pattern !== undefined) return;
    const param = findParameter(ctx.document, ctx.operation, 'header', contract.key.header);
    const schema = param ? parameterSchema(ctx.document, param) : undefined;
    if (schema && (typeof schema.value['maxLength'] === 'number' || typeof schema.value['pattern'] === 'string' || schema.value['format'] === 'uuid')) return;
    ctx.report('unbounded', contract.at('key'), { header: contract.key.header });
  },
});
