import { defineRule } from '../src/lint/rule.js';
import { activeContract, closest, effectiveParameters, effectiveSecurity, findParameter, formatScopePart, operationPhrase, rawScopeIndex, securityParameter } from '../src/lint/views.js';

/** A scope part that the server cannot evaluate from the declared request. */
export default defineRule({
  meta: {
    id: 'scope-unresolvable',
    severity: 'error',
    description: 'A scope part names a header/path/query parameter the operation does not declare, or `principal` without a security requirement.',
    criterion: 'scope',
    rationale:
      'Readiness question 1: a scope the server cannot read from the request (an undeclared parameter, a principal on an anonymous operation) binds nothing, so every caller shares one key space.',
    messages: {
      undeclared:
        'scope part `{part}` names a {where} parameter that {operation} does not declare{hint}: declare it (in the operation or its path item) or fix the name',
      principalUnsecured:
        'scope part `principal`, but {reason}, so there is no principal to scope by: declare the security requirement, or scope by a declared parameter instead',
      principalAnonymous:
        'scope part `principal`, but the security requirements of {operation} allow anonymous requests (an empty alternative): every anonymous caller shares one key space; remove the `{}` alternative or add another scope part',
    },
  },
  operations: 'contracted',
  check(ctx) {
    const contract = activeContract(ctx.contract);
    if (!contract?.scope) return;
    const { document: doc, operation: op } = ctx;
    contract.scope.forEach((part, i) => {
      // Located only for a finding: most scope parts resolve.
      const at = () => contract.at('scope', rawScopeIndex(contract.raw, part, i));
      const operation = () => operationPhrase(op, at());
      if (part.kind === 'principal') {
        const security = effectiveSecurity(doc, op);
        if (!security.secured) {
          const reason =
            security.source === 'operation'
              ? security.requirements.length === 0
                ? `${operation()} says \`security: []\``
                : `the security of ${operation()} names no scheme`
              : security.source === 'document'
                ? 'the document-level `security` names no scheme'
                : `neither ${operation()} nor the document declares \`security\``;
          ctx.report('principalUnsecured', at(), { reason });
        } else if (security.anonymousAllowed) {
          ctx.report('principalAnonymous', at(), { operation: operation() });
        }
        return;
      }
      if (part.kind === 'global') return;
      // A header or query API key of a security scheme that applies is declared by the scheme.
      if (findParameter(doc, op, part.kind, part.name) || securityParameter(doc, op, part.kind, part.name)) return;
      const declared = effectiveParameters(doc, op).filter((p) => p.in === part.kind).map((p) => p.name);
      const near = closest(part.name, declared);
      ctx.report('undeclared', at(), { part: formatScopePart(part), where: part.kind, operation: operation(), hint: near ? ` (did you mean \`${part.kind}:${near}\`?)` : '' });
    });
  },
});
