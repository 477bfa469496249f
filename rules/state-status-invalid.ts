import { defineRule } from '../src/lint/rule.js';
import { activeContract } from '../src/lint/views.js';

/** A state answered with a status that makes clients do the wrong thing. */
export default defineRule({
  meta: {
    id: 'state-status-invalid',
    severity: 'error',
    description:
      'A state is answered with a status that breaks clients: mismatch as 2xx or 409, inProgress as anything but 409, a key error as anything but a non-409 4xx, storeUnavailable as anything but 5xx.',
    criterion: 'replay',
    rationale:
      'Readiness question 4: the answer for each state drives the client — mismatch must stop it before the effect (Stripe and Stainless clients retry 409), a concurrent request must be told to retry with the same key.',
    messages: {
      mismatchSuccess:
        '`responses.mismatch` answers {status}, a success: a reused key with another payload would look like it worked; answer 422 (idempotency-key-reused)',
      mismatchConflict:
        '`responses.mismatch` answers 409, which Stripe- and Stainless-style clients retry forever with the same key and payload; answer 422 instead',
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
    const status = (state: 'missingKey' | 'invalidKey' | 'mismatch' | 'inProgress' | 'storeUnavailable') => contract.responses[state]?.status;
    const at = (state: string) => contract.at('responses', state, 'status');
    const mismatch = status('mismatch');
    if (mismatch !== undefined && mismatch >= 200 && mismatch < 300) ctx.report('mismatchSuccess', at('mismatch'), { status: mismatch });
    else if (mismatch === 409) ctx.report('mismatchConflict', at('mismatch'));
    const inProgress = status('inProgress');
    if (inProgress !== undefined && inProgress !== 409) ctx.report('inProgressNotConflict', at('inProgress'), { status: inProgress });
    for (const state of ['missingKey', 'invalidKey'] as const) {
      const value = status(state);
      if (value !== undefined && (value < 400 || value >= 500 || value === 409)) ctx.report('keyError', at(state), { state, status: value });
    }
    const store = status('storeUnavailable');
    if (store !== undefined && (store < 500 || store >= 600)) ctx.report('storeNotServerError', at('storeUnavailable'), { status: store });
  },
});
