import { defineRule } from '../src/lint/rule.js';

/** An `x-idempotency` value that breaks the published JSON Schema (`schemas/x-idempotency.schema.json`). */
export default defineRule({
  meta: {
    id: 'contract-invalid',
    severity: 'error',
    description: 'An `x-idempotency` value that breaks the published JSON Schema: a wrong type, an unknown field, a bad enum value or duration.',
    criterion: 'contract',
    rationale:
      'A contract that tools cannot read answers none of the readiness questions: every engineer, linter and generator must read the same scope, payload, retention and state answers from it.',
    messages: {
      invalid: '{message}',
    },
  },
  check(ctx) {
    for (const error of ctx.contract?.schemaErrors ?? []) {
      ctx.report('invalid', error.at, { message: error.message });
    }
  },
});
