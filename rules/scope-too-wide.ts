import { defineRule } from '../src/lint/rule.js';
import { activeContract, effectiveSecurity, formatScopePart, operationPhrase, rawScopeIndex } from '../src/lint/views.js';

// Parameter names that identify who owns a key (a tenant, an account, a user…).
const OWNER_NAME = /tenant|account|org(ani[sz]ation)?s?\b|organi[sz]ation|customer|user|merchant|owner|workspace|team|project|client|principal|subject|company/i;

/** A global scope, or one that names no owner, on an authenticated operation. */
export default defineRule({
  meta: {
    id: 'scope-too-wide',
    severity: 'error',
    description: '`global` scope, or a scope that names no owner, on an operation that has security.',
    criterion: 'scope',
    rationale:
      'Readiness question 1: on an authenticated API the scope must include the owner, or keys of different callers collide and a replay can hand one caller the stored response of another.',
    messages: {
      global:
        '`global` scope on {operation}, which is authenticated: keys of different callers collide, and a replay can return another caller\'s stored response; use `scope: [principal]` (or a tenant header/path parameter)',
      noOwner:
        'scope [{scope}] names no owner on {operation}, which is authenticated: two callers that pick the same key share one record; add `principal` (or a tenant/account parameter) to the scope',
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
    const namesOwner = contract.scope.some((p) => p.kind === 'principal' || ('name' in p && OWNER_NAME.test(p.name)));
    if (!namesOwner) {
      const at = contract.at('scope');
      ctx.report('noOwner', at, { scope: contract.scope.map(formatScopePart).join(', '), operation: operationPhrase(ctx.operation, at) });
    }
  },
});
