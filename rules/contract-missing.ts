import { defineRule } from '../src/lint/rule.js';
import { isUnsafe, keyEvidence, keyPlaceOf, readsBodyFields, requestBody, retryExtension } from '../src/lint/views.js';

/**
 * An operation that clearly handles idempotency keys but has no `x-idempotency` contract: a key on any method
 * but the safe ones, or a marker that clients repeat it on an unsafe method.
 */
export default defineRule({
  meta: {
    id: 'contract-missing',
    severity: 'warn',
    description:
      'An operation that takes an idempotency key (any method but GET, HEAD, OPTIONS, TRACE), or an unsafe one marked retryable/idempotent, has no x-idempotency contract.',
    criterion: 'contract',
    rationale:
      'The header alone does not make POST idempotent: scope, fingerprint, retention and the answer for each state must be written down before an engineer can answer the five readiness questions.',
    messages: {
      header:
        'accepts the idempotency key header `{name}` but has no `x-idempotency` contract: add `x-idempotency` (scope, fingerprint, ttl, responses), or `x-idempotency: false` if the operation is knowingly not idempotent',
      body: 'takes an idempotency key in the request body field `{name}` but has no `x-idempotency` contract: add `x-idempotency` with `key: { body: {pointer} }` (scope, fingerprint, ttl, responses), so the guard reads the key where clients send it, or write `x-idempotency: false` if the body key is handled some other way',
      bodyUnreadable:
        'takes an idempotency key in the field `{name}` of its `{media}` request body but has no `x-idempotency` contract, and a guard reads a body key from a JSON body or a form\'s fields only: accept the key in a header (`Idempotency-Key`) or the query and add `x-idempotency` for it, or write `x-idempotency: false` if the key is handled some other way',
      parameter:
        'takes an idempotency key in the {where} parameter `{name}` but has no `x-idempotency` contract: add `x-idempotency` with `key: { {place}: {keyName} }` (scope, fingerprint, ttl, responses), or write `x-idempotency: false` if the key is handled some other way',
      extension:
        'is marked `{name}`, so clients repeat it, but has no `x-idempotency` contract: add `x-idempotency` so a repeat cannot run the effect twice, or `x-idempotency: false` and drop the marker',
    },
  },
  // A key is evidence on PUT and DELETE too: an API that asks for one there deduplicates repeats (AWS's
  // `clientToken` on PUT creates, Google's `requestId` on DELETE), which the contract must write down. A marker
  // only says clients repeat the call, which PUT and DELETE invite anyway: it counts on unsafe methods.
  operations: 'writes',
  check(ctx) {
    if (ctx.contract !== undefined) return;
    const evidence = keyEvidence(ctx.document, ctx.operation, ctx.settings.keyHeaders);
    if (!evidence) return;
    if (evidence.kind === 'extension' && !isUnsafe(ctx.operation, ctx.settings.unsafeMethods)) return;
    // The contract that reads the key where clients send it (a form field is a body key: the guard reads a form's fields as the body).
    const place = keyPlaceOf(evidence);
    switch (evidence.kind) {
      case 'header':
        ctx.report('header', evidence.at, { name: evidence.name });
        break;
      case 'body': {
        const media = requestBody(ctx.document, ctx.operation)?.mediaType;
        if (media !== undefined && !readsBodyFields(media)) ctx.report('bodyUnreadable', evidence.at, { name: evidence.name, media });
        else ctx.report('body', evidence.at, { name: evidence.name, pointer: place!.name });
        break;
      }
      case 'query':
      case 'form':
        ctx.report('parameter', evidence.at, { name: evidence.name, where: evidence.kind, place: place!.in, keyName: place!.name });
        break;
      case 'extension':
        // A retry policy without a contract is retry-on-unsafe-without-contract's fault (an error): one finding per fault.
        if (evidence.name === retryExtension(ctx.operation.node)) break;
        ctx.report('extension', evidence.at, { name: evidence.name });
        break;
    }
  },
});
