import { defineRule } from '../src/lint/rule.js';
import { appendPointer } from '../src/parser/pointer.js';
import { validateContractValue } from '../src/parser/schema.js';

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
  operations: 'contracted',
  check(ctx) {
    for (const error of ctx.contract?.schemaErrors ?? []) {
      ctx.report('invalid', error.at, { message: error.message });
    }
  },
  // The document-level defaults are checked on their own too, once: defaults no operation uses yet would
  // otherwise never be validated. (A non-object is the loader's warning.)
  checkDocument(ctx) {
    const root = ctx.document.root;
    if (!Object.prototype.hasOwnProperty.call(root, 'x-idempotency')) return;
    const defaults = ctx.document.deref(root['x-idempotency'], { file: ctx.document.file, pointer: '/x-idempotency' });
    if (!defaults || typeof defaults.value !== 'object' || defaults.value === null || Array.isArray(defaults.value)) return;
    for (const violation of validateContractValue(defaults.value)) {
      ctx.report('invalid', { file: defaults.at.file, pointer: appendPointer(defaults.at.pointer, ...violation.path) }, { message: violation.message });
    }
  },
});
