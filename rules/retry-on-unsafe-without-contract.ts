import { defineRule } from '../src/lint/rule.js';
import { child, declaredResponses, isUnsafe, keyEvidence, retryExtension } from '../src/lint/views.js';

/** A 5xx status or range; made once (a literal in `check` would make a RegExp object per response). */
const SERVER_ERROR = /^5(\d\d|XX)$/i;

/** A retry policy on an unsafe operation that has no (enabled) idempotency contract. */
export default defineRule({
  meta: {
    id: 'retry-on-unsafe-without-contract',
    severity: 'error',
    description:
      'A retry policy (x-speakeasy-retries, or a 5xx response that declares Retry-After) applies to an unsafe operation without an idempotency contract.',
    criterion: 'contract',
    rationale:
      'A timeout only says the response was lost, not that the effect did not happen, and 503 + Retry-After does not make a write safe to repeat: an automatic retry of an unsafe operation without a contract can run the effect twice.',
    messages: {
      operationRetry:
        'enables automatic retries with `{name}` but has no `x-idempotency` contract: a retry after a lost response can run the effect twice; add an `x-idempotency` contract or set `{name}: {strategy: none}` on this operation',
      documentRetry:
        'inherits the document-level `{name}` retry policy but has no `x-idempotency` contract: add a contract, or switch retries off for this operation with `{name}: {strategy: none}`',
      optedOut:
        'says `x-idempotency: false` (not idempotent) yet `{name}` lets clients retry it automatically: set `{name}: {strategy: none}` on this operation, or give it a real contract',
      retryAfter:
        'declares `Retry-After` on its {status} response, which invites clients to repeat the write, but has no `x-idempotency` contract: add a contract so the repeat is deduplicated, or drop `Retry-After` from that response',
    },
  },
  operations: 'unsafe',
  check(ctx) {
    const { operation: op, document: doc, contract } = ctx;
    if (!isUnsafe(op, ctx.settings.unsafeMethods)) return;
    if (contract?.enabled) return;
    const opRetry = retryExtension(op.node);
    // Without any x-idempotency but with a key (or `x-fern-idempotent`), contract-missing already says it;
    // an operation-level retry policy as the only evidence is this rule's.
    if (contract === undefined) {
      const evidence = keyEvidence(doc, op, ctx.settings.keyHeaders);
      if (evidence && !(evidence.kind === 'extension' && evidence.name === opRetry)) return;
    }
    const opDisabled = op.node['x-speakeasy-retries'] !== undefined && opRetry === undefined;
    const docRetry = opDisabled ? undefined : retryExtension(doc.root);
    if (opRetry) {
      ctx.report(contract ? 'optedOut' : 'operationRetry', child(op.at, opRetry), { name: opRetry });
      return;
    }
    if (docRetry) {
      if (contract) ctx.report('optedOut', contract.at(), { name: docRetry });
      else ctx.report('documentRetry', op.at, { name: docRetry });
      return;
    }
    if (contract) return;
    const responses = declaredResponses(doc, op);
    for (let i = 0; i < responses.length; i++) {
      const response = responses[i]!;
      if (!SERVER_ERROR.test(response.status)) continue;
      const header = response.headers.get('retry-after');
      if (header) {
        ctx.report('retryAfter', header.at, { status: response.status });
        return;
      }
    }
  },
});
