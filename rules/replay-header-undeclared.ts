import { defineRule } from '../src/lint/rule.js';
import { activeContract, successResponses } from '../src/lint/views.js';

/** The success responses do not declare the header that marks a replay. */
export default defineRule({
  meta: {
    id: 'replay-header-undeclared',
    severity: 'warn',
    description: 'A success response does not declare the replay header (`Idempotent-Replayed`).',
    criterion: 'replay',
    rationale:
      'Readiness question 4: a replay returns the stored result marked as a replay; a header the document does not declare is invisible to generated clients and reviewers.',
    messages: {
      missing:
        'the {status} success response does not declare the replay header `{header}`: clients cannot tell a replayed result from a first execution; add `{header}` (a boolean header) to its `headers`',
    },
  },
  operations: 'contracted',
  check(ctx) {
    const contract = activeContract(ctx.contract);
    const header = contract?.responses.replay?.header;
    if (!contract || !header) return;
    const successes = successResponses(ctx.document, ctx.operation);
    for (let i = 0; i < successes.length; i++) {
      const response = successes[i]!;
      // 204 has no body, but its replay is still marked, so it needs the header too.
      if (!response.headers.has(header.toLowerCase())) ctx.report('missing', response.valueAt, { status: response.status, header });
    }
  },
});
