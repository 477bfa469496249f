import { defineRule } from '../src/lint/rule.js';
import { activeContract, isSafeRead, operationIndex, safeReadIndex } from '../src/lint/views.js';

/** `statusRoute` does not name a safe read operation of the document. */
export default defineRule({
  meta: {
    id: 'status-route-unresolved',
    severity: 'error',
    description: '`effect.statusRoute` names no operation of the document, or one that is not a safe GET.',
    criterion: 'unknown-outcome',
    rationale:
      'Readiness question 5: after an unknown outcome the client goes to a status route; it must exist and must be a read, or checking the outcome could cause another effect.',
    messages: {
      unknown: '`effect.statusRoute` `{route}` names no operationId of this document{hint}: point it at the GET that reads the intent\'s outcome',
      notSafe:
        '`effect.statusRoute` `{route}` is {target}, not a safe GET: reading an outcome must not cause another effect; point it at a GET operation',
    },
  },
  operations: 'contracted',
  check(ctx) {
    const contract = activeContract(ctx.contract);
    const route = contract?.effect?.statusRoute;
    if (!contract || route === undefined) return;
    const index = operationIndex(ctx.document);
    const target = index.get(route);
    if (!target) {
      // An index, not a scan: a document with many unresolved routes must stay linear.
      const near = safeReadIndex(ctx.document).closest(route);
      ctx.report('unknown', contract.at('effect', 'statusRoute'), { route, hint: near ? ` (did you mean \`${near}\`?)` : '' });
    } else if (!isSafeRead(target)) {
      ctx.report('notSafe', contract.at('effect', 'statusRoute'), { route, target: `${target.method.toUpperCase()} ${target.path}` });
    }
  },
});
