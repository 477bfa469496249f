import { defineRule } from '../src/lint/rule.js';
import type { IdempotencyContract, Location, OperationView, ScopePart } from '../src/parser/model.js';
import { activeContract, closest, effectiveParameters, effectiveSecurity, findParameter, formatScopePart, operationPhrase, rawScopeIndex, securityParameter } from '../src/lint/views.js';

/**
 * Headers that name one delivery, not one intent: request and trace ids, new on every attempt (the generated client
 * sends a fresh `X-Request-Id` per attempt; tracing libraries a new span per request).
 */
const PER_ATTEMPT_HEADERS: ReadonlySet<string> = new Set([
  'x-request-id',
  'request-id',
  'x-correlation-id',
  'x-amzn-trace-id',
  'traceparent',
  'tracestate',
  'sentry-trace',
  'x-b3-traceid',
  'x-b3-spanid',
  'b3',
  'x-cloud-trace-context',
  'x-trace-id',
  'x-span-id',
]);

/** A scope part that the server cannot evaluate from the declared request. */
export default defineRule({
  meta: {
    id: 'scope-unresolvable',
    severity: 'error',
    description: 'A scope part names a header/path/query parameter the operation does not declare, a header that changes on every attempt (a request or trace id), or `principal` without a security requirement.',
    criterion: 'scope',
    rationale:
      'Readiness question 1: a scope the server cannot read from the request (an undeclared parameter, a principal on an anonymous operation) binds nothing, so every caller shares one key space.',
    messages: {
      undeclared:
        'scope part `{part}` names a {where} parameter that {operation} does not declare{hint}: declare it (in the operation or its path item) or fix the name',
      credentialHeader:
        'scope part `{part}` scopes by the credentials themselves, which {operation} takes through its security scheme (OpenAPI 3 ignores an `Authorization` header parameter): scope by `principal`, the caller your authentication resolves them to — a rotated token would otherwise start a new key space',
      principalUnsecured:
        'scope part `principal`, but {reason}, so there is no principal to scope by: declare the security requirement, or scope by a declared parameter instead',
      perAttempt:
        'scope part `{part}` names a header that changes on every attempt (a request or trace id: the generated client and SDKs send a new one per retry), so each retry of one intent gets a record of its own and runs the effect again; scope by `principal`, a tenant or an account instead',
      principalAnonymous:
        'scope part `principal`, but the security requirements of {operation} allow anonymous requests (an empty alternative): every anonymous caller shares one key space; remove the `{}` alternative or add another scope part',
    },
  },
  operations: 'contracted',
  check(ctx) {
    const contract = activeContract(ctx.contract);
    if (!contract?.scope) return;
    const { document: doc, operation: op } = ctx;
    // A loop, and the part located only for a finding (no closures per part: most scope parts resolve).
    const scope = contract.scope;
    for (let i = 0; i < scope.length; i++) {
      if (!(i in scope)) continue; // a hole, as forEach skips it
      const part = scope[i]!;
      if (part.kind === 'principal') {
        const security = effectiveSecurity(doc, op);
        if (!security.secured) {
          const reason =
            security.source === 'operation'
              ? security.requirements.length === 0
                ? `${partPhrase(contract, op, part, i)} says \`security: []\``
                : `the security of ${partPhrase(contract, op, part, i)} names no scheme`
              : security.source === 'document'
                ? 'the document-level `security` names no scheme'
                : `neither ${partPhrase(contract, op, part, i)} nor the document declares \`security\``;
          ctx.report('principalUnsecured', partAt(contract, part, i), { reason });
        } else if (security.anonymousAllowed) {
          ctx.report('principalAnonymous', partAt(contract, part, i), { operation: partPhrase(contract, op, part, i) });
        }
        continue;
      }
      if (part.kind === 'global') continue;
      if (part.kind === 'header' && PER_ATTEMPT_HEADERS.has(part.name.toLowerCase())) {
        ctx.report('perAttempt', partAt(contract, part, i), { part: formatScopePart(part) });
        continue;
      }
      // A header or query API key of a security scheme that applies is declared by the scheme.
      if (findParameter(doc, op, part.kind, part.name) || securityParameter(doc, op, part.kind, part.name)) continue;
      if (part.kind === 'header' && part.name.toLowerCase() === 'authorization' && effectiveSecurity(doc, op).secured) {
        ctx.report('credentialHeader', partAt(contract, part, i), { part: formatScopePart(part), operation: partPhrase(contract, op, part, i) });
        continue;
      }
      const declared = effectiveParameters(doc, op).filter((p) => p.in === part.kind).map((p) => p.name);
      const near = closest(part.name, declared);
      ctx.report('undeclared', partAt(contract, part, i), { part: formatScopePart(part), where: part.kind, operation: partPhrase(contract, op, part, i), hint: near ? ` (did you mean \`${part.kind}:${near}\`?)` : '' });
    }
  },
});

/** Where the scope part at `i` of the parsed scope is written (its entry in the raw `scope` list). */
function partAt(contract: IdempotencyContract, part: ScopePart, i: number): Location {
  return contract.at('scope', rawScopeIndex(contract.raw, part, i));
}

/** How a message about the scope part names the operation (see operationPhrase). */
function partPhrase(contract: IdempotencyContract, op: OperationView, part: ScopePart, i: number): string {
  return operationPhrase(op, partAt(contract, part, i));
}
