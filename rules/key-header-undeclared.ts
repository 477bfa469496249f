import { defineRule } from '../src/lint/rule.js';
import { activeContract, bodyKey, closest, effectiveParameters, keyDeclaration, operationPhrase } from '../src/lint/views.js';

/**
 * The contract's key must be declared where it travels — a header or query parameter, or a field of the body
 * schema — with a `required` that agrees with the contract's.
 */
export default defineRule({
  meta: {
    id: 'key-header-undeclared',
    severity: 'error',
    description:
      "The key header (or query parameter, or body field) is not declared on the operation, its `required` disagrees with the contract's, or the body offers a key field beside a header key.",
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
      queryUndeclared:
        'the key query parameter `{name}` is not a declared query parameter of {operation}{hint}: add `{in: query, name: {name}, required: {required}, schema: {type: string, maxLength: 255}}` to its parameters (or to the path item)',
      bodyUndeclared:
        'the key body field `{name}` is not a field of the request body schema of {operation}: declare it (`{type: string, maxLength: 255}`{requiredHint}), or point `key.body` at the field that carries the key',
      bodyUnreadable:
        'the key body field `{name}` is in a `{media}` body of {operation}, and the guard reads a body key from a JSON body or a form\'s fields only: take the key in a header (`key: { header: Idempotency-Key }`) or the query, or accept the body as JSON',
      fieldRequiredMismatch:
        '{label} is {declared} in the document but the contract says `key.required: {contract}`: make them agree ({fix})',
    },
  },
  operations: 'contracted',
  check(ctx) {
    const contract = activeContract(ctx.contract);
    if (!contract) return;
    const key = contract.key;
    const required = key.required ?? true;
    const declared = keyDeclaration(ctx.document, ctx.operation, key);
    if (key.in !== 'header') {
      const at = contract.at('key', key.in);
      if (declared.unreadableMedia !== undefined) {
        ctx.report('bodyUnreadable', at, { name: key.name, media: declared.unreadableMedia, operation: operationPhrase(ctx.operation, at) });
        return;
      }
      if (!declared.found) {
        if (key.in === 'query') {
          const names = effectiveParameters(ctx.document, ctx.operation).filter((p) => p.in === 'query').map((p) => p.name);
          const near = closest(key.name, names);
          ctx.report('queryUndeclared', at, { name: key.name, required: String(required), hint: near ? ` (did you mean \`${near}\`?)` : '', operation: operationPhrase(ctx.operation, at) });
        } else {
          ctx.report('bodyUndeclared', at, { name: key.name, requiredHint: required ? ', listed under `required`' : '', operation: operationPhrase(ctx.operation, at) });
        }
        return;
      }
      if (declared.required !== undefined && declared.required !== required && declared.requiredAt) {
        const fix =
          key.in === 'query'
            ? `set \`required: ${required}\` on the parameter`
            : declared.optionalOuter !== undefined
              ? `it is inside \`${declared.optionalOuter}\`, which a request may leave out: list \`${declared.optionalOuter}\` under \`required\`, and the field under its own object's \`required\` where it is not`
              : required
                ? 'list the field under `required`'
                : 'take the field out of `required`';
        ctx.report('fieldRequiredMismatch', declared.requiredAt, { label: declared.label, declared: declared.required ? 'required' : 'optional', contract: String(required), fix });
      }
      return;
    }
    const header = key.name;
    if (!declared.found) {
      const names = effectiveParameters(ctx.document, ctx.operation).filter((p) => p.in === 'header').map((p) => p.name);
      const near = closest(header, names);
      const at = contract.at('key', 'header');
      ctx.report('undeclared', at, { header, required: String(required), hint: near ? ` (did you mean \`${near}\`?)` : '', operation: operationPhrase(ctx.operation, at) });
      return;
    }
    if (declared.required !== required) {
      ctx.report('requiredMismatch', declared.requiredAt!, { header: declared.name, declared: String(declared.required), contract: String(required) });
    }
    const inBody = bodyKey(ctx.document, ctx.operation);
    if (inBody) {
      ctx.report('bodyKey', inBody.at, { header, name: inBody.name, where: inBody.kind === 'form' ? 'form field' : 'body field', operation: operationPhrase(ctx.operation, inBody.at) });
    }
  },
});
