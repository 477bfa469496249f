import { defineRule } from '../src/lint/rule.js';
import { activeContract, effectiveSecurity, formatScopePart, operationPhrase, rawScopeIndex, securityParameter } from '../src/lint/views.js';

// Parameter names that identify who owns a key (a tenant, an account, a user…).
const OWNER_NAME = /tenant|account|org(ani[sz]ation)?s?\b|organi[sz]ation|customer|user|merchant|owner|workspace|team|project|client|principal|subject|company/i;

/** A global scope, or one that names no owner, on an authenticated operation. */
export default defineRule({
  meta: {
    id: 'scope-too-wide',
    severity: 'error',
    description: '`global` scope, or a scope without the authenticated caller (`principal`, or the API key itself), on an operation that has security.',
    criterion: 'scope',
    rationale:
      'Readiness question 1: on an authenticated API the scope must include the owner, or keys of different callers collide and a replay can hand one caller the stored response of another.',
    messages: {
      global:
        '`global` scope on {operation}, which is authenticated: keys of different callers collide, and a replay can return another caller\'s stored response; use `scope: [principal]`',
      noOwner:
        'scope [{scope}] names no owner on {operation}, which is authenticated: two callers that pick the same key share one record; add `principal` to the scope',
      ownerUnverified:
        'scope [{scope}] takes the owner from `{part}`, which the client sends, on {operation}, which is authenticated: the guard answers a replay before the handler checks that the caller may act for that owner, so a caller who sends another owner\'s `{part}` with one of its keys gets its stored answer (and can take its keys first); add `principal` (`scope: [principal, {part}]`)',
    },
  },
  operations: 'contracted',
  check(ctx) {
    const contract = activeContract(ctx.contract);
    if (!contract?.scope || contract.scope.length === 0) return;
    if (!effectiveSecurity(ctx.document, ctx.operation).secured) return;
    const index = contract.scope.findIndex((p) => p.kind === 'global');
    if (index !== -1) {
      const at = contract.at('scope', rawScopeIndex(contract.raw, contract.scope[index]!, index));
      ctx.report('global', at, { operation: operationPhrase(ctx.operation, at) });
      return;
    }
    if (contract.scope.some((p) => p.kind === 'principal')) return;
    // The API key itself (a header or query parameter of one of the operation's apiKey schemes) is the caller: a key
    // that is not one's own cannot be sent.
    if (contract.scope.some((p) => (p.kind === 'header' || p.kind === 'query') && securityParameter(ctx.document, ctx.operation, p.kind, p.name))) return;
    const scope = contract.scope.map(formatScopePart).join(', ');
    // A tenant or account value the client sends is no owner the guard has checked: the handler's authorisation never
    // runs for a replay.
    const owner = contract.scope.findIndex((p) => 'name' in p && OWNER_NAME.test(p.name));
    if (owner !== -1) {
      const at = contract.at('scope', rawScopeIndex(contract.raw, contract.scope[owner]!, owner));
      ctx.report('ownerUnverified', at, { scope, part: formatScopePart(contract.scope[owner]!), operation: operationPhrase(ctx.operation, at) });
      return;
    }
    const at = contract.at('scope');
    ctx.report('noOwner', at, { scope, operation: operationPhrase(ctx.operation, at) });
  },
});
