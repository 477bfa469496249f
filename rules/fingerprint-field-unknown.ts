import { defineRule, type RuleContext } from '../src/lint/rule.js';
import { QUERY_EXCLUSION, queryFingerprint } from '../src/parser/compile.js';
import type { IdempotencyContract } from '../src/parser/model.js';
import { bracketPath } from '../src/runtime/form-names.js';
import { activeContract, bodySchemaPhrase, closest, escapePointerToken, fingerprintSchema, operationPhrase, parsePointer, propertyNames, requestBody, resolveSchemaPointer, type Located } from '../src/lint/views.js';

type MessageId = 'noProperty' | 'notContainer' | 'notIndex' | 'pastEnd' | 'notPointer' | 'noBody' | 'noQueryParameter';

/** A fingerprint pointer that does not resolve in the request body schema. */
export default defineRule({
  meta: {
    id: 'fingerprint-field-unknown',
    severity: 'error',
    description: 'A fingerprint pointer does not resolve in the request body schema ($ref, allOf, oneOf/anyOf and 3.1 type arrays followed).',
    criterion: 'payload',
    rationale:
      'Readiness question 2: a fingerprint over a field that does not exist compares nothing, so two different commands look like the same payload.',
    messages: {
      noProperty:
        'fingerprint {list} pointer `{pointer}` does not resolve in {schema}: {parent} has no property `{token}`{hint}; fix the pointer or remove it',
      notContainer:
        'fingerprint {list} pointer `{pointer}` does not resolve in {schema}: {parent} is not an object or array, so it has no `{token}`; point at {parent} itself',
      notIndex:
        'fingerprint {list} pointer `{pointer}` does not resolve in {schema}: {parent} is an array, and `{token}` is not an item index; point at one item (`{suggestion}`) or at {parent} itself (the whole list)',
      pastEnd:
        'fingerprint {list} pointer `{pointer}` does not resolve in {schema}: `-` after the array {parent} is the slot past its last item (JSON Pointer), so it compares nothing; point at {parent} itself (the whole list) or at one item (`{suggestion}`)',
      notPointer: 'fingerprint {list} entry `{pointer}` is not a JSON Pointer into the body: write it with a leading slash, e.g. `/{pointer}`',
      noBody:
        'the fingerprint names body fields but {operation} takes no request body: declare the request body, or drop `fingerprint.{list}`',
      noQueryParameter:
        'fingerprint exclude entry `{entry}` names no query parameter of {operation} (its declared ones count in the fingerprint: {declared}); fix the name or remove the entry',
    },
  },
  operations: 'contracted',
  check(ctx) {
    const contract = activeContract(ctx.contract);
    const fingerprint = contract?.fingerprint;
    if (!contract || !fingerprint) return;
    // `include` (unless it is `all`), then `exclude`; plain loops, no list of lists: this runs for every contract.
    const include = fingerprint.include === 'all' ? undefined : fingerprint.include;
    const exclude = fingerprint.exclude;
    // `query:NAME` leaves a query parameter out: it must be one the fingerprint would otherwise take.
    let excludesBody = false;
    // The operation's query names, read once and only when an exclusion names one (most contracts have none).
    let declared: ReturnType<typeof queryFingerprint> | undefined;
    for (let i = 0; i < exclude.length; i++) {
      if (!exclude[i]!.startsWith(QUERY_EXCLUSION)) {
        excludesBody = true;
        continue;
      }
      const name = exclude[i]!.slice(QUERY_EXCLUSION.length);
      declared ??= queryFingerprint(ctx.operation, ctx.document);
      if (declared.queryAll || declared.query.includes(name)) continue;
      const at = contract.at('fingerprint', 'exclude', i);
      ctx.report('noQueryParameter', at, {
        entry: exclude[i]!,
        operation: operationPhrase(ctx.operation, at),
        declared: declared.query.length === 0 ? 'none' : declared.query.map((q) => `\`${q}\``).join(', '),
      });
    }
    const body = requestBody(ctx.document, ctx.operation);
    if (!body) {
      const first = include !== undefined && include.length > 0 ? 'include' : excludesBody ? 'exclude' : undefined;
      if (first) {
        const at = contract.at('fingerprint', first);
        ctx.report('noBody', at, { list: first, operation: operationPhrase(ctx.operation, at) });
      }
      return;
    }
    // A body without a declared schema cannot be checked (2.0 form fields count as one).
    const schema = fingerprintSchema(ctx.document, ctx.operation);
    if (!schema) return;
    if (include !== undefined) for (let i = 0; i < include.length; i++) checkPointer(ctx, contract, schema, 'include', include[i]!, i);
    for (let i = 0; i < exclude.length; i++) if (!exclude[i]!.startsWith(QUERY_EXCLUSION)) checkPointer(ctx, contract, schema, 'exclude', exclude[i]!, i);
  },
});

/** Reports the fingerprint pointer at `list`[`i`] when it does not resolve in the body schema. */
function checkPointer(
  ctx: RuleContext<MessageId>,
  contract: IdempotencyContract,
  schema: Located<Record<string, unknown> | boolean>,
  list: 'include' | 'exclude',
  pointer: string,
  i: number,
): void {
  const result = resolveSchemaPointer(ctx.document, schema.value, schema.at, pointer);
  if (result.ok) return;
  const at = contract.at('fingerprint', list, i);
  const schemaName = bodySchemaPhrase(ctx.operation, schema.at, at);
  if (result.reason === 'not-pointer') {
    ctx.report('notPointer', at, { list, pointer });
    return;
  }
  const token = parsePointer(pointer)![result.failedToken]!;
  const parent = result.resolvedPrefix === '' ? 'the body' : `\`${result.resolvedPrefix}\``;
  if (result.reason === 'not-index' && token === '-') {
    const rest = parsePointer(pointer)!.slice(result.failedToken + 1).map(escapePointerToken);
    ctx.report('pastEnd', at, { list, pointer, parent, schema: schemaName, suggestion: [`${result.resolvedPrefix}/0`, ...rest].join('/') });
    return;
  }
  if (result.reason === 'not-index') {
    // The item index is missing (`/lines/sku` → `/lines/0/sku`), or the token walks the schema instead
    // of the data (`/lines/items/sku` → `/lines/0/sku`): suggest the first of the two that resolves.
    const tokens = parsePointer(pointer)!.map(escapePointerToken);
    const candidates = [tokens.slice(result.failedToken), tokens.slice(result.failedToken + 1)].map((rest) =>
      [`${result.resolvedPrefix}/0`, ...rest].join('/'),
    );
    const suggestion = candidates.find((candidate) => resolveSchemaPointer(ctx.document, schema.value, schema.at, candidate).ok) ?? candidates[0]!;
    ctx.report('notIndex', at, { list, pointer, parent, token, schema: schemaName, suggestion });
    return;
  }
  if (result.reason === 'not-container') {
    ctx.report('notContainer', at, { list, pointer, parent, token, schema: schemaName });
    return;
  }
  // A form field's bracketed name is nested (`metadata[order_id]` is `/metadata/order_id`): say so.
  const bracketed = bracketPath(token);
  if (bracketed) {
    const after = parsePointer(pointer)!.slice(result.failedToken + 1).map(escapePointerToken);
    const nested = [result.resolvedPrefix, ...bracketed.map((name, i) => (name === '' && i > 0 ? '0' : escapePointerToken(name))), ...after].join('/');
    if (resolveSchemaPointer(ctx.document, schema.value, schema.at, nested).ok) {
      const hint = ` (the guard nests a form field's bracketed name: did you mean \`${nested}\`?)`;
      ctx.report('noProperty', at, { list, pointer, parent, token, schema: schemaName, hint });
      return;
    }
  }
  const near = closest(token, result.known);
  let suggestion = near === undefined ? undefined : `${result.resolvedPrefix}/${escapePointerToken(near)}`;
  if (suggestion === undefined) {
    // The field may sit one level deeper than written (`/card/number` for `/source/card/number`).
    const rest = pointer.split('/').slice(result.failedToken + 1).join('/');
    // Only where the next name is a declared property: under a free-form map (`labels`, `nodeSelector`) any name
    // resolves, and the hint would point into it (the real-spec review's `/spec/labels/image` on Kubernetes).
    const next = parsePointer(`/${rest}`)?.[0];
    const deeper = result.known
      .filter((name) => {
        const under = resolveSchemaPointer(ctx.document, schema.value, schema.at, `${result.resolvedPrefix}/${escapePointerToken(name)}`);
        if (!under.ok || under.schema === undefined || next === undefined) return false;
        return propertyNames(ctx.document, under.schema.value, under.schema.at).some((property) => property.name === next);
      })
      .map((name) => `${result.resolvedPrefix}/${escapePointerToken(name)}/${rest}`)
      .filter((candidate) => resolveSchemaPointer(ctx.document, schema.value, schema.at, candidate).ok);
    if (deeper.length === 1) suggestion = deeper[0];
  }
  ctx.report('noProperty', at, { list, pointer, parent, token, schema: schemaName, hint: suggestion ? ` (did you mean \`${suggestion}\`?)` : '' });
}
