import { defineRule } from '../src/lint/rule.js';
import { activeContract, bodySchemaPhrase, escapePointerToken, parsePointer, requestBody, requiredProperties } from '../src/lint/views.js';

/** A required body property that the fingerprint neither includes nor explicitly excludes. */
export default defineRule({
  meta: {
    id: 'fingerprint-required-uncovered',
    severity: 'warn',
    description: 'A required top-level body property is neither included in nor explicitly excluded from the fingerprint.',
    criterion: 'payload',
    rationale:
      'Readiness question 2: a required field is part of the command; if the fingerprint silently ignores it, a changed command with a reused key replays the old result instead of a conflict.',
    messages: {
      uncovered:
        'required property `{name}` of {schema} is neither included in nor excluded from the fingerprint: requests that differ only in `{name}` count as the same payload; add `/{escaped}` to `fingerprint.include` (or to `exclude` if it never changes the effect)',
    },
  },
  check(ctx) {
    const contract = activeContract(ctx.contract);
    const fingerprint = contract?.fingerprint;
    if (!contract || !fingerprint || fingerprint.include === 'all') return;
    const schema = requestBody(ctx.document, ctx.operation)?.schema;
    if (!schema) return;
    const covered = new Set<string>();
    for (const pointer of [...fingerprint.include, ...fingerprint.exclude]) {
      const tokens = parsePointer(pointer);
      if (tokens === undefined) continue;
      if (tokens.length === 0) return; // '' selects the whole body
      covered.add(tokens[0]!);
    }
    for (const { name } of requiredProperties(ctx.document, schema.value, schema.at)) {
      if (covered.has(name)) continue;
      const at = contract.at('fingerprint', 'include');
      ctx.report('uncovered', at, { name, escaped: escapePointerToken(name), schema: bodySchemaPhrase(ctx.operation, schema.at, at) });
    }
  },
});
