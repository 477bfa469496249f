/** Documentation pages of the rules built into the engine (they have no `rules/<id>.md`). */

/** Markdown page by rule id. */
export const BUILTIN_RULE_DOCS: Readonly<Record<string, string>> = {
  'suppression-invalid': `# suppression-invalid

**Severity:** error · **Criterion:** contract

Flags an \`x-idempotency-lint\` suppression on an operation that cannot be honoured: it is not a mapping,
has no \`ignore\` list, names a rule that does not exist (with a "did you mean"), has an unknown field, or
has no \`reason\`. A suppression without a reason silences nothing.

## Why

A silenced readiness finding must carry its justification into the review; otherwise the contract quietly
stops answering one of the five questions and nobody can tell whether that was a decision or a slip.
Suppressed findings stay in the JSON and SARIF output, marked with the reason, and do not fail the run.

## Invalid

\`\`\`yaml
paths:
  /payouts:
    post:
      x-idempotency-lint:
        ignore: [scope-to-wide]     # unknown rule id, and no reason
\`\`\`

## Valid

\`\`\`yaml
paths:
  /payouts:
    post:
      x-idempotency-lint:
        ignore: [scope-too-wide]
        reason: "single-tenant internal API; every caller is the batch service"
\`\`\`
`,
  'document-invalid': `# document-invalid

**Severity:** warn · **Criterion:** contract

A part of the OpenAPI document that is invalid but has nothing to do with idempotency (for example
\`type: 'null'\` in OpenAPI 3.0, or a \`null\` schema). It is reported once, as a warning, and linting of
the idempotency contracts goes on, so real-world specs that are slightly off elsewhere still get their
idempotency findings.

## How to fix

Fix the named node, or set \`document-invalid: off\` under \`rules:\` in \`.idemkitrc.yaml\` while the rest
of the document is being cleaned up.
`,
};
