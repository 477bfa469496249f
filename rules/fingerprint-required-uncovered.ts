import { defineRule } from '../src/lint/rule.js';
import { activeContract, bodySchemaPhrase, escapePointerToken, fingerprintSchema, parsePointer, requiredProperties, resolveSchemaPointer } from '../src/lint/views.js';

/** A required body property that the fingerprint neither includes nor explicitly excludes. */
export default defineRule({
  meta: {
    id: 'fingerprint-required-uncovered',
    severity: 'warn',
    description: 'A required body property (top-level, or inside an object the fingerprint includes only in part) is neither included in nor explicitly excluded from the fingerprint.',
    criterion: 'payload',
    rationale:
      'Readiness question 2: a required field is part of the command; if the fingerprint silently ignores it, a changed command with a reused key replays the old result instead of a conflict.',
    messages: {
      uncovered:
        'required property `{name}` of {schema} is neither included in nor excluded from the fingerprint: requests that differ only in `{name}` count as the same payload; add `/{escaped}` to `fingerprint.include` (or to `exclude` if it never changes the effect)',
    },
  },
  operations: 'contracted',
  check(ctx) {
    const contract = activeContract(ctx.contract);
    const fingerprint = contract?.fingerprint;
    if (!contract || !fingerprint || fingerprint.include === 'all') return;
    const schema = fingerprintSchema(ctx.document, ctx.operation);
    if (!schema) return;
    // The pointers of `include`, then of `exclude`, as token lists (loops, no joined list: this runs for every contract).
    const covered: (readonly string[])[] = [];
    for (let list = 0; list < 2; list++) {
      const pointers = list === 0 ? fingerprint.include : fingerprint.exclude;
      for (let i = 0; i < pointers.length; i++) {
        const tokens = parsePointer(pointers[i]!);
        if (tokens === undefined) continue;
        if (tokens.length === 0) return; // '' selects the whole body
        covered.push(tokens);
      }
    }
    // A key in the body is the request's key, not its payload: two requests that differ in it are two intents.
    if (contract.key.in === 'body') {
      const keyTokens = parsePointer(contract.key.name);
      if (keyTokens !== undefined && keyTokens.length > 0) covered.push(keyTokens);
    }
    // A required property is covered by a pointer at it or above it; a pointer below it covers only part of
    // it, so its own required properties must be covered in turn (`/dest/bic` leaves `/dest/iban` out).
    // A property's path is its object's `prefix` and its `name`; it is joined into a list only when needed.
    const visit = (schemaValue: unknown, schemaAt: typeof schema.at, prefix: readonly string[], depth: number) => {
      const required = requiredProperties(ctx.document, schemaValue, schemaAt);
      for (let i = 0; i < required.length; i++) {
        const name = required[i]!.name;
        if (someCovers(covered, prefix, name)) continue;
        if (depth < 8 && someBelow(covered, prefix, name)) {
          const path = [...prefix, name];
          const pointer = `/${path.map(escapePointerToken).join('/')}`;
          const resolved = resolveSchemaPointer(ctx.document, schema.value, schema.at, pointer);
          if (resolved.ok && resolved.schema) visit(resolved.schema.value, resolved.schema.at, path, depth + 1);
          continue;
        }
        const path = [...prefix, name];
        const escaped = path.map(escapePointerToken).join('/');
        // Located only for a finding: most contracts cover every required property.
        const at = contract.at('fingerprint', 'include');
        ctx.report('uncovered', at, { name: path.join('/'), escaped, schema: bodySchemaPhrase(ctx.operation, schema.at, at) });
      }
    };
    visit(schema.value, schema.at, [], 0);
  },
});

/** Whether one of the pointers (`covered`) is at the property `prefix`/`name` or above it. */
function someCovers(covered: readonly (readonly string[])[], prefix: readonly string[], name: string): boolean {
  for (let c = 0; c < covered.length; c++) {
    const tokens = covered[c]!;
    if (tokens.length > prefix.length + 1) continue;
    let at = true;
    for (let i = 0; i < tokens.length && at; i++) at = (i < prefix.length ? prefix[i] : name) === tokens[i];
    if (at) return true;
  }
  return false;
}

/** Whether one of the pointers (`covered`) is below the property `prefix`/`name`. */
function someBelow(covered: readonly (readonly string[])[], prefix: readonly string[], name: string): boolean {
  for (let c = 0; c < covered.length; c++) {
    const tokens = covered[c]!;
    if (tokens.length <= prefix.length + 1) continue;
    let below = tokens[prefix.length] === name;
    for (let i = 0; i < prefix.length && below; i++) below = tokens[i] === prefix[i];
    if (below) return true;
  }
  return false;
}
