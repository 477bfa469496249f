import { defineRule } from '../src/lint/rule.js';
import type { IdempotencyContract, Location } from '../src/parser/model.js';
import { activeContract } from '../src/lint/views.js';

/** A state answered with a status that makes clients do the wrong thing. */
export default defineRule({
  meta: {
    id: 'state-status-invalid',
    severity: 'error',
    description:
      'A state is answered with a status that breaks clients: mismatch as 2xx, 409 or a status clients retry, inProgress as anything but 409, abandoned as a success or redirect, a key error as anything but a non-409 4xx, storeUnavailable as anything but 5xx.',
    criterion: 'replay',
    rationale:
      'Readiness question 4: the answer for each state drives the client — mismatch must stop it before the effect (Stripe and Stainless clients retry 409), a concurrent request must be told to retry with the same key.',
    messages: {
      mismatchSuccess:
        '`responses.mismatch` answers {status}, a success: a reused key with another payload would look like it worked; answer 422 (idempotency-key-reused)',
      mismatchConflict:
        '`responses.mismatch` answers 409, which Stripe- and Stainless-style clients retry with the same key and payload (every retry their settings allow, to the same refusal); answer 422 instead',
      mismatchRetryable:
        '`responses.mismatch` answers {status}, which HTTP clients and SDKs retry by default with the same key and payload — a client bug answered as a passing failure; answer 422 (idempotency-key-reused)',
      abandonedNotError:
        '`responses.abandoned` answers {status}: a retry whose first attempt was abandoned mid-run would look settled (a success, a redirect) while nobody knows whether the effect happened; answer 409 (idempotency-request-abandoned) and reconcile',
      inProgressNotConflict:
        '`responses.inProgress` answers {status}: a concurrent request must get a retryable conflict telling the client to wait and retry with the same key; answer 409 with `Retry-After`',
      keyError:
        '`responses.{state}` answers {status}: a missing or invalid key is the client\'s bug and must stop it, not look retryable or successful; answer 400',
      storeNotServerError:
        '`responses.storeUnavailable` answers {status}: the store being down is the server\'s transient failure, not the client\'s; answer 503 with `Retry-After`',
    },
  },
  operations: 'contracted',
  check(ctx) {
    const contract = activeContract(ctx.contract);
    if (!contract) return;
    // Read in place, no closures or list per contract: this runs for every contract.
    const responses = contract.responses;
    const mismatch = responses.mismatch?.status;
    if (mismatch !== undefined && mismatch >= 200 && mismatch < 300) ctx.report('mismatchSuccess', statusAt(contract, 'mismatch'), { status: mismatch });
    else if (mismatch === 409) ctx.report('mismatchConflict', statusAt(contract, 'mismatch'));
    else if (mismatch !== undefined && (mismatch >= 500 || mismatch === 429 || mismatch === 408)) {
      ctx.report('mismatchRetryable', statusAt(contract, 'mismatch'), { status: mismatch });
    }
    const abandoned = responses.abandoned?.status;
    if (abandoned !== undefined && abandoned < 400) ctx.report('abandonedNotError', statusAt(contract, 'abandoned'), { status: abandoned });
    const inProgress = responses.inProgress?.status;
    if (inProgress !== undefined && inProgress !== 409) ctx.report('inProgressNotConflict', statusAt(contract, 'inProgress'), { status: inProgress });
    for (let i = 0; i < KEY_ERROR_STATES.length; i++) {
      const state = KEY_ERROR_STATES[i]!;
      const value = responses[state]?.status;
      if (value !== undefined && (value < 400 || value >= 500 || value === 409)) ctx.report('keyError', statusAt(contract, state), { state, status: value });
    }
    const store = responses.storeUnavailable?.status;
    if (store !== undefined && (store < 500 || store >= 600)) ctx.report('storeNotServerError', statusAt(contract, 'storeUnavailable'), { status: store });
  },
});

/** The states whose answer is a key error. */
const KEY_ERROR_STATES = ['missingKey', 'invalidKey'] as const;

/** Where a state's status is written. */
function statusAt(contract: IdempotencyContract, state: string): Location {
  return contract.at('responses', state, 'status');
}
