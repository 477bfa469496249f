import assert from 'node:assert/strict';
import type { Location } from '../../src/parser/model.js';
import type { Finding } from '../../src/lint/rule.js';
import { applySuppressions, createSuppressionRule, readSuppression } from '../../src/lint/suppress.js';
import { fakeDocument, fakeFinding } from './fake-document.js';

const known = ['scope-missing', 'key-unbounded', 'ttl-missing'];
const file = '/api/openapi.yaml';

function documentWith(lint: unknown, extra: Record<string, unknown> = {}) {
  return fakeDocument(file, {
    openapi: '3.1.0',
    paths: {
      '/payouts': { post: { operationId: 'createPayout', 'x-idempotency-lint': lint, responses: {} } },
      '/refunds': { post: { operationId: 'createRefund', responses: {}, ...extra } },
    },
  });
}

/** Runs the suppression rule over every operation and returns [messageId, pointer] pairs. */
function check(lint: unknown): [string, string][] {
  const document = documentWith(lint);
  const rule = createSuppressionRule(known);
  const reports: [string, string][] = [];
  for (const operation of document.operations) {
    rule.check({
      document,
      operation,
      contract: undefined,
      settings: { unsafeMethods: ['post'], keyHeaders: [] },
      report(messageId: string, at: Location) {
        assert.ok(messageId in rule.meta.messages, `unknown message id ${messageId}`);
        assert.notEqual(document.get(at), undefined, `pointer ${at.pointer} does not resolve`);
        reports.push([messageId, at.pointer]);
      },
    });
  }
  return reports;
}

const base = '/paths/~1payouts/post/x-idempotency-lint';

describe('suppressions', () => {
  it('accepts a suppression with known ids and a reason', () => {
    assert.deepEqual(check({ ignore: ['scope-missing'], reason: 'single-tenant internal API' }), []);
    const [operation] = documentWith({ ignore: ['scope-missing'], reason: ' single-tenant ' }).operations;
    assert.deepEqual(readSuppression(operation!), { ignore: ['scope-missing'], reason: 'single-tenant' });
  });

  it('reports a missing or empty reason, and such a suppression silences nothing', () => {
    assert.deepEqual(check({ ignore: ['scope-missing'] }), [['reasonMissing', base]]);
    assert.deepEqual(check({ ignore: ['scope-missing'], reason: '  ' }), [['reasonMissing', `${base}/reason`]]);
    const document = documentWith({ ignore: ['scope-missing'] });
    const finding = fakeFinding({ ruleId: 'scope-missing', file, pointer: '/paths/~1payouts/post', operations: ['POST /payouts (createPayout)'] });
    assert.equal(applySuppressions(document, [finding])[0]!.suppressed, undefined);
  });

  it('a suppression that suppression-invalid reports (an unknown rule id or field beside a known one) silences nothing', () => {
    const operations = ['POST /payouts (createPayout)'];
    const finding = fakeFinding({ ruleId: 'scope-missing', file, pointer: '/paths/~1payouts/post', operations });
    for (const lint of [
      { ignore: ['scope-missing', 'scope-mising'], reason: 'single tenant' },
      { ignore: ['scope-missing'], reason: 'single tenant', extra: 1 },
    ]) {
      const document = documentWith(lint);
      assert.notDeepEqual(check(lint), []);
      // Whether or not suppression-invalid runs (it may be off in a config): no finding of it is needed.
      const [scope] = applySuppressions(document, [finding], known);
      assert.equal(scope!.suppressed, undefined, JSON.stringify(lint));
    }
    // The same suppression, valid, silences it.
    assert.deepEqual(applySuppressions(documentWith({ ignore: ['scope-missing'], reason: 'single tenant' }), [finding], known)[0]!.suppressed, { reason: 'single tenant' });
  });

  it('reports unknown rule ids with a suggestion, unknown fields and a bad shape', () => {
    assert.deepEqual(check({ ignore: ['scope-mising', 'key-unbounded'], reason: 'x' }), [['unknownRule', `${base}/ignore/0`]]);
    assert.deepEqual(check({ ignore: [], reason: 'x', because: 'y' }), [
      ['unknownField', `${base}/because`],
      ['ignoreMissing', `${base}/ignore`],
    ]);
    assert.deepEqual(check(['scope-missing']), [['notMapping', base]]);
    assert.deepEqual(check({ ignore: ['suppression-invalid'], reason: 'x' }), [['unsuppressible', `${base}/ignore/0`]]);
  });

  it('fills the suggestion into the message', () => {
    const rule = createSuppressionRule(known);
    const document = documentWith({ ignore: ['ttl-mising'], reason: 'x' });
    let message = '';
    rule.check({
      document,
      operation: document.operations[0]!,
      contract: undefined,
      settings: { unsafeMethods: ['post'], keyHeaders: [] },
      report(messageId: string, _at: Location, data?: Readonly<Record<string, string | number>>) {
        message = rule.meta.messages[messageId as keyof typeof rule.meta.messages].replace(/\{(\w+)\}/g, (_, name: string) => String(data?.[name]));
      },
    });
    assert.match(message, /names unknown rule "ttl-mising" \(did you mean "ttl-missing"\?\)/);
  });

  it('marks the findings of the suppressed operation and rule only', () => {
    const document = documentWith({ ignore: ['scope-missing', 'ttl-missing'], reason: 'internal batch API' });
    const findings: Finding[] = [
      fakeFinding({ ruleId: 'scope-missing', file, pointer: '/paths/~1payouts/post/x-idempotency', operations: ['createPayout'] }),
      fakeFinding({ ruleId: 'key-unbounded', file, pointer: '/paths/~1payouts/post/x-idempotency', operations: ['POST /payouts (createPayout)'] }),
      fakeFinding({ ruleId: 'scope-missing', file, pointer: '/paths/~1refunds/post', operations: ['POST /refunds (createRefund)'] }),
      fakeFinding({ ruleId: 'suppression-invalid', file, pointer: base, operations: ['POST /payouts (createPayout)'] }),
    ];
    const result = applySuppressions(document, findings);
    assert.deepEqual(
      result.map((f) => f.suppressed?.reason ?? null),
      ['internal batch API', null, null, null],
    );
  });

  it('suppresses a shared-component finding only when every operation it names silences the rule', () => {
    const component = { ruleId: 'ttl-missing', file, pointer: '/components/x-shared' };
    const both = fakeFinding({ ...component, operations: ['POST /payouts (createPayout)', 'POST /refunds (createRefund)'] });
    const one = documentWith({ ignore: ['ttl-missing'], reason: 'a' });
    assert.equal(applySuppressions(one, [both])[0]!.suppressed, undefined);
    const all = documentWith({ ignore: ['ttl-missing'], reason: 'a' }, { 'x-idempotency-lint': { ignore: ['ttl-missing'], reason: 'b' } });
    assert.deepEqual(applySuppressions(all, [both])[0]!.suppressed, { reason: 'a; b' });
  });
});
