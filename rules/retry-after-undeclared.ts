import { defineRule } from '../src/lint/rule.js';
import { activeContract, findResponse } from '../src/lint/views.js';

/** The states whose answer asks the client to come back later. */
const RETRIED_STATES = ['inProgress', 'storeUnavailable'] as const;

/** The responses that tell a client to come back later do not say when. */
export default defineRule({
  meta: {
    id: 'retry-after-undeclared',
    severity: 'warn',
    description: 'The response documented for inProgress or storeUnavailable does not declare a `Retry-After` header.',
    criterion: 'replay',
    rationale:
      'Readiness question 4: a concurrent request is answered "wait and retry with the same key"; without Retry-After clients guess, hammer the server or give up inside their deadline.',
    messages: {
      missing:
        'the {status} response that answers `{state}` declares no `Retry-After` header: clients cannot tell when to retry with the same key; add a `Retry-After` header (integer seconds) to this response',
    },
  },
  operations: 'contracted',
  check(ctx) {
    const contract = activeContract(ctx.contract);
    if (!contract) return;
    // The responses already reported (made for a first finding: most contracts have none).
    let reported: Set<string> | undefined;
    for (let i = 0; i < RETRIED_STATES.length; i++) {
      const state = RETRIED_STATES[i]!;
      const status = contract.responses[state]?.status;
      if (status === undefined) continue;
      const response = findResponse(ctx.document, ctx.operation, status);
      if (!response || response.headers.has('retry-after')) continue;
      const id = `${response.valueAt.file}#${response.valueAt.pointer}`;
      if (reported?.has(id)) continue;
      (reported ??= new Set()).add(id);
      ctx.report('missing', response.valueAt, { status: response.status, state });
    }
  },
});
