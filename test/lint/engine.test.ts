import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { InternalError } from '../../src/errors.js';
import { DOCUMENT_INVALID_RULE_ID, lintDocument } from '../../src/lint/engine.js';
import { defineRule, type LintSettings, type Rule } from '../../src/lint/rule.js';
import { loadDocument } from '../../src/parser/load.js';
import contractInvalid from '../../rules/contract-invalid.js';

const fixture = (name: string) => fileURLToPath(new URL(`../fixtures/parser/${name}`, import.meta.url));

/** Reports every contract's `ttl` (wherever it is written) with the operation's method. */
const ttlRule = defineRule({
  meta: {
    id: 'test-ttl',
    severity: 'warn',
    description: 'test rule',
    criterion: 'contract',
    rationale: 'test',
    messages: { ttl: 'ttl is {ttl} on a {method}' },
  },
  check(ctx) {
    if (ctx.contract?.ttl) ctx.report('ttl', ctx.contract.at('ttl'), { ttl: String(ctx.contract.ttl.raw), method: ctx.operation.method });
  },
});

describe('lint engine', () => {
  it('runs a rule\'s document check once: invalid defaults are one finding, naming the operations that use them', async () => {
    const doc = await loadDocument(fixture('unused-invalid-defaults.yaml'));
    const invalid = lintDocument(doc, { rules: [contractInvalid] });
    assert.deepEqual(
      invalid.map((f) => [f.pointer, f.line, f.column, f.operations]),
      [['/x-idempotency/unknownOutcome', 5, 3, ['createRefund', 'createTransfer']]],
    );
    // With no operation using them, the defaults are still validated (once, naming no operation).
    const unused = await loadDocument(fixture('unused-invalid-defaults-only.yaml'));
    assert.deepEqual(
      lintDocument(unused, { rules: [contractInvalid] }).map((f) => [f.pointer, f.operations, f.message]),
      [['/x-idempotency/unknownOutcome', [], 'x-idempotency.unknownOutcome is "status-rout"; use one of: status-route, surface']],
    );
  });

  it('adds severity, file, line and column, and fills the message', async () => {
    const doc = await loadDocument(fixture('defaults.yaml'));
    const findings = lintDocument(doc, { rules: [ttlRule] });
    assert.deepEqual(findings, [
      {
        ruleId: 'test-ttl',
        severity: 'warn',
        message: 'ttl is P1D on a post',
        messageId: 'ttl',
        file: fixture('defaults.yaml'),
        pointer: '/x-idempotency/ttl',
        line: 7,
        column: 3,
        operations: ['usesTrue'],
        operationLabels: ['POST /uses-true (usesTrue)'],
      },
      {
        ruleId: 'test-ttl',
        severity: 'warn',
        message: 'ttl is PT2H on a post',
        messageId: 'ttl',
        file: fixture('defaults.yaml'),
        pointer: '/paths/~1overrides/post/x-idempotency/ttl',
        line: 27,
        column: 9,
        operations: ['overrides'],
        operationLabels: ['POST /overrides (overrides)'],
      },
    ]);
  });

  it('merges one fault in a shared node into one finding that names every operation', async () => {
    const doc = await loadDocument(fixture('invalid-contract.yaml'));
    const findings = lintDocument(doc, { rules: [contractInvalid] });
    const shared = findings.filter((finding) => finding.pointer === '/x-idempotency/ttl');
    assert.equal(shared.length, 1);
    assert.deepEqual(shared[0]!.operations, ['a', 'b']);
    assert.deepEqual(shared[0]!.operationLabels, ['POST /a (a)', 'POST /b (b)'], 'each named operation has its display label');
    assert.equal(shared[0]!.line, 4);
    assert.equal(findings.length, 6);
  });

  it('merges a report repeated at one location object, and keeps reports with other data apart, even in one data object the rule changes', async () => {
    const doc = await loadDocument(fixture('defaults.yaml'));
    const shared = { file: doc.file, pointer: '/info' };
    const reused: Record<string, string> = { id: '' };
    // One rule per kind of report, so each rule's reports follow one another, operation after operation.
    const reporting = (id: string, message: string, data: (operationId: string) => Record<string, string>) =>
      defineRule({
        meta: { id, severity: 'info', description: 'test rule', criterion: 'contract', rationale: 'test', messages: { m: message } },
        check(ctx) {
          ctx.report('m', shared, data(ctx.operation.operationId!));
        },
      });
    const rules = [
      reporting('test-same', 'one fault', () => ({ kind: 'shared' })),
      reporting('test-per', 'fault of {id}', (id) => ({ id })),
      reporting('test-reused', 'reused {id}', (id) => Object.assign(reused, { id })),
    ];
    const findings = lintDocument(doc, { rules });
    const ids = ['usesTrue', 'overrides', 'optedOut', 'noContract'];
    const expected = [['one fault', ids], ...ids.map((id) => [`fault of ${id}`, [id]]), ...ids.map((id) => [`reused ${id}`, [id]])];
    const byMessage = (a: unknown[], b: unknown[]) => (String(a[0]) < String(b[0]) ? -1 : 1);
    assert.deepEqual(findings.map((finding) => [finding.message, finding.operations]).sort(byMessage), expected.sort(byMessage));
  });

  it('lets severities override the rule, or turn it off', async () => {
    const doc = await loadDocument(fixture('defaults.yaml'));
    assert.deepEqual(
      lintDocument(doc, { rules: [ttlRule], severities: { 'test-ttl': 'error' } }).map((finding) => finding.severity),
      ['error', 'error'],
    );
    assert.deepEqual(lintDocument(doc, { rules: [ttlRule], severities: { 'test-ttl': 'off' } }), []);
  });

  it('reports each document warning once as document-invalid', async () => {
    const doc = await loadDocument(fixture('lenient.yaml'));
    const findings = lintDocument(doc, { rules: [] });
    assert.ok(findings.length >= 3);
    assert.ok(findings.every((finding) => finding.ruleId === DOCUMENT_INVALID_RULE_ID && finding.severity === 'warn'));
    assert.equal(new Set(findings.map((finding) => finding.message)).size, findings.length);
    assert.deepEqual(lintDocument(doc, { rules: [], severities: { [DOCUMENT_INVALID_RULE_ID]: 'off' } }), []);
  });

  it('sorts by file, line, column and rule, whatever order the rules ran in', async () => {
    const doc = await loadDocument(fixture('invalid-contract.yaml'));
    const forward = lintDocument(doc, { rules: [contractInvalid, ttlRule] });
    const backward = lintDocument(doc, { rules: [ttlRule, contractInvalid] });
    assert.deepEqual(forward, backward);
    const keys = forward.map((finding) => [finding.line, finding.column, finding.ruleId] as const);
    const sorted = [...keys].sort((a, b) => a[0] - b[0] || a[1] - b[1] || (a[2] < b[2] ? -1 : a[2] > b[2] ? 1 : 0));
    assert.deepEqual(keys, sorted);
    assert.deepEqual(forward.slice(0, 2).map((finding) => finding.ruleId), ['contract-invalid', 'test-ttl'], 'same place: by rule id');
  });

  it('gives rules the default settings, overridable', async () => {
    const doc = await loadDocument(fixture('defaults.yaml'));
    const seen: LintSettings[] = [];
    const spy: Rule = defineRule({
      meta: { id: 'spy', severity: 'info', description: 'd', criterion: 'contract', rationale: 'r', messages: { m: 'm' } },
      check(ctx) {
        seen.push(ctx.settings);
      },
    });
    lintDocument(doc, { rules: [spy] });
    assert.deepEqual(seen[0], { unsafeMethods: ['post', 'patch'], keyHeaders: [] });
    seen.length = 0;
    lintDocument(doc, { rules: [spy], settings: { unsafeMethods: ['post', 'put'] } });
    assert.deepEqual(seen[0], { unsafeMethods: ['post', 'put'], keyHeaders: [] });
  });

  it('runs a rule on the operations it names: those with x-idempotency (false included), or the unsafe ones under the settings', async () => {
    const doc = await loadDocument(fixture('defaults.yaml'));
    const seen = (operations: Rule['operations'], settings?: Partial<LintSettings>) => {
      const labels: string[] = [];
      const spy: Rule = defineRule({
        meta: { id: 'spy', severity: 'info', description: 'd', criterion: 'contract', rationale: 'r', messages: { m: 'm' } },
        ...(operations ? { operations } : {}),
        check(ctx) {
          labels.push(ctx.operation.label);
        },
      });
      lintDocument(doc, { rules: [spy], ...(settings ? { settings } : {}) });
      return labels;
    };
    const all = ['POST /uses-true (usesTrue)', 'POST /overrides (overrides)', 'POST /opted-out (optedOut)', 'POST /no-contract (noContract)'];
    assert.deepEqual(seen(undefined), all);
    assert.deepEqual(seen('contracted'), all.slice(0, 3));
    assert.deepEqual(seen('unsafe'), all);
    assert.deepEqual(seen('unsafe', { unsafeMethods: ['put'] }), []);
  });

  it('turns a crashing rule into an InternalError that names the rule and operation', async () => {
    const doc = await loadDocument(fixture('defaults.yaml'));
    const crashing: Rule = defineRule({
      meta: { id: 'crash', severity: 'error', description: 'd', criterion: 'contract', rationale: 'r', messages: { m: 'm' } },
      check() {
        throw new TypeError('boom');
      },
    });
    assert.throws(() => lintDocument(doc, { rules: [crashing] }), (error: unknown) => {
      assert.ok(error instanceof InternalError);
      assert.match(error.message, /rule crash failed on POST \/uses-true \(usesTrue\): boom/);
      return true;
    });
  });
});
