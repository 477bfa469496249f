import { defineRule } from '../src/lint/rule.js';
import { activeContract, bodyKey, child, closest, effectiveParameters, findParameter, operationPhrase } from '../src/lint/views.js';

/** The contract's key header must be a declared header parameter whose `required` agrees with the contract. */
export default defineRule({
  meta: {
    id: 'key-header-undeclared',
    severity: 'error',
    description: "The key header is not a declared header parameter of the operation, its `required` disagrees with the contract's, or the body offers a key field beside it.",
    criterion: 'contract',
    rationale:
      'Clients and generated SDKs learn which header carries the intent key from the parameters; a key the document does not declare is a key nobody sends.',
    messages: {
      undeclared:
        'the key header `{header}` is not a declared header parameter of {operation}{hint}: add `{in: header, name: {header}, required: {required}, schema: {type: string, maxLength: 255}}` to its parameters (or to the path item)',
      bodyKey:
        '{operation} also takes an idempotency key in the request {where} `{name}`, and the guard reads the key from `{header}` only: clients and SDKs that send the key where the document offers it (Square SDKs send `idempotency_key` in the body) get 400 idempotency-key-missing on every call; document the key in `{header}` alone (drop or deprecate the {where}), or have every client send the header',
      requiredMismatch:
        'the key header parameter `{header}` says `required: {declared}` but the contract says `key.required: {contract}`: make them agree (set `required: {contract}` here)',
    },
  },
  operations: 'contracted',
  check(ctx) {
    const contract = activeContract(ctx.contract);
    if (!contract) return;
    const header = contract.key.header;
    const required = contract.key.required ?? true;
    const param = findParameter(ctx.document, ctx.operation, 'header', header);
    if (!param) {
      const declared = effectiveParameters(ctx.document, ctx.operation).filter((p) => p.in === 'header').map((p) => p.name);
      const near = closest(header, declared);
      const at = contract.at('key', 'header');
      ctx.report('undeclared', at, { header, required: String(required), hint: near ? ` (did you mean \`${near}\`?)` : '', operation: operationPhrase(ctx.operation, at) });
      return;
    }
    if (param.required !== required) {
      const at = param.node['required'] !== undefined ? child(param.valueAt, 'required') : param.valueAt;
      ctx.report('requiredMismatch', at, { header: param.name, declared: String(param.required), contract: String(required) });
    }
    const inBody = bodyKey(ctx.document, ctx.operation);
    if (inBody) {
      ctx.report('bodyKey', inBody.at, { header, name: inBody.name, where: inBody.kind === 'form' ? 'form field' : 'body field', operation: operationPhrase(ctx.operation, inBody.at) });
    }
  },
});
