import { isRepeatableRequestsKey } from '../src/runtime/wire.js';
import { defineRule } from '../src/lint/rule.js';
import type { StateName } from '../src/parser/model.js';
import { activeContract, declaredResponses, fieldInvalid, findResponse, operationPhrase } from '../src/lint/views.js';
import type { ApiDocument, OperationView } from '../src/parser/model.js';

const STATES: readonly { name: StateName; suggest: number; meaning: string }[] = [
  { name: 'missingKey', suggest: 400, meaning: 'a request without a key is refused' },
  { name: 'invalidKey', suggest: 400, meaning: 'a malformed key is refused' },
  { name: 'mismatch', suggest: 422, meaning: 'a reused key with another payload is refused' },
  { name: 'inProgress', suggest: 409, meaning: 'a concurrent request is told to wait' },
  { name: 'abandoned', suggest: 409, meaning: 'a reservation past its lease goes to reconciliation' },
  { name: 'storeUnavailable', suggest: 503, meaning: 'the store being down fails closed' },
];

/** A guard state without a status, or with one the operation does not document. */
export default defineRule({
  meta: {
    id: 'state-response-missing',
    severity: 'error',
    description:
      'A state (missingKey, invalidKey, mismatch, inProgress, abandoned, storeUnavailable) has no status, or its status is not a documented response of the operation.',
    criterion: 'replay',
    rationale:
      'Readiness question 4: the contract must fix the response for each state, and clients can only act on an answer the operation documents.',
    messages: {
      noStatus:
        'no status for the `{state}` state: clients cannot tell how {meaning}; add `responses.{state}: {status: {suggest}}` and document that response',
      undocumented:
        '`responses.{state}` answers {status}, which is not a documented response of {operation}{defaultNote}: add a `\'{status}\'` response (e.g. application/problem+json) to its `responses`',
      repeatExpired:
        'the key header `{header}` follows OASIS Repeatable Requests, so the guard answers 412 to a request first sent longer ago than its records are kept, but {operation} documents no 412: add a `\'412\'` response (e.g. application/problem+json)',
    },
  },
  operations: 'contracted',
  check(ctx) {
    const contract = activeContract(ctx.contract);
    if (!contract) return;
    for (let i = 0; i < STATES.length; i++) {
      const state = STATES[i]!;
      // An optional key never produces missingKey; key-optional reports the optional key itself.
      if (state.name === 'missingKey' && contract.key.required === false) continue;
      const status = contract.responses[state.name]?.status;
      if (status === undefined) {
        if (fieldInvalid(contract, 'responses', state.name)) continue;
        ctx.report('noStatus', contract.at('responses', state.name), { state: state.name, meaning: state.meaning, suggest: state.suggest });
      } else if (!findResponse(ctx.document, ctx.operation, status)) {
        const at = contract.at('responses', state.name, 'status');
        // A `default` response covers every other status but says nothing of this state's: a client cannot
        // tell an in-progress 409 from any other error it documents.
        const defaultNote = findDefault(ctx.document, ctx.operation) ? ' (its `default` response does not say which status means this state)' : '';
        ctx.report('undocumented', at, { state: state.name, status, operation: operationPhrase(ctx.operation, at), defaultNote });
      }
    }
    // Not a contract state: the guard's fixed answer to a stale `Repeatability-First-Sent`.
    if (contract.key.in === 'header' && isRepeatableRequestsKey(contract.key.name) && !findResponse(ctx.document, ctx.operation, 412)) {
      const at = contract.at('key', 'header');
      ctx.report('repeatExpired', at, { header: contract.key.name, operation: operationPhrase(ctx.operation, at) });
    }
  },
});

function findDefault(doc: ApiDocument, op: OperationView): boolean {
  return declaredResponses(doc, op).some((response) => response.status === 'default');
}
