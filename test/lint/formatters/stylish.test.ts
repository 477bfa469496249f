import assert from 'node:assert/strict';
import { formatStylish } from '../../../src/lint/formatters/stylish.js';
import { fakeFinding } from '../fake-document.js';
import type { Finding } from '../../../src/lint/rule.js';
import { payoutName, refundName, report, spec } from './fixture.js';

const input = (findings?: Finding[]) => ({ ...report(), files: [spec], ...(findings ? { findings } : {}) });

describe('stylish formatter', () => {
  it('prints file, aligned rows and a summary; an operation is not repeated when the line is inside it; a row stays one line', () => {
    assert.equal(
      formatStylish(input()),
      [
        'api/open api.yaml',
        // The message's line feed (a value quoted from the file) is written as an escape, not a break.
        '  12:7  error    Scope 100% global: keys, of <tenants> & "owners" collide\\nacross accounts | `x`  scope-too-wide',
        '  10:5  warning  No ttl.  ttl-missing',
        '  30:5  error    POST /refunds takes Idempotency-Key but has no x-idempotency.  contract-missing',
        '',
        '✖ 3 problems (2 errors, 1 warning, 0 info), 1 suppressed',
        '',
      ].join('\n'),
    );
  });

  it('names the operation of a finding located in the document defaults, a shared component, a path item or another file', () => {
    // The fake document places a node on the line numbered by its pointer's depth: createPayout is on line 4.
    const at = (pointer: string, file = spec, line = 3) => fakeFinding({ ruleId: 'ttl-missing', file, pointer, line, column: 1, severity: 'warn', message: 'No ttl.', operations: [payoutName] });
    const rows = (finding: ReturnType<typeof at>) => formatStylish(input([finding])).split('\n')[1];
    assert.equal(rows(at('/x-idempotency')), '  3:1  warning  No ttl. (in createPayout)  ttl-missing');
    assert.equal(rows(at('/components/responses/Problem')), '  3:1  warning  No ttl. (in createPayout)  ttl-missing');
    assert.equal(rows(at('/paths/~1payouts/parameters/0')), '  3:1  warning  No ttl. (in createPayout)  ttl-missing');
    assert.equal(rows(at('/post/x-idempotency', '/repo/api/ops/payout.yaml')), '  3:1  warning  No ttl. (in createPayout)  ttl-missing');
    assert.equal(rows(at('/paths/~1payouts/post/x-idempotency', spec, 5)), '  5:1  warning  No ttl.  ttl-missing');
    // An operation-local pointer whose node is written before the operation (a YAML alias of an anchor in
    // the document's extensions or in another operation): the line is not inside the operation.
    assert.equal(rows(at('/paths/~1payouts/post/x-idempotency', spec, 3)), '  3:1  warning  No ttl. (in createPayout)  ttl-missing');
    // Several operations always: the line alone cannot say which of them.
    const shared = { ...at('/paths/~1payouts/post/responses/409'), operations: [payoutName, refundName] };
    assert.equal(rows(shared), '  3:1  warning  No ttl. (in createPayout, createRefund)  ttl-missing');
  });

  it('does not repeat an operation the message already names', () => {
    const finding = fakeFinding({
      ruleId: 'key-header-undeclared', file: spec, pointer: '/x-idempotency/key/header', line: 3, column: 1, severity: 'error',
      message: 'the key header is not declared by POST /payouts (createPayout): declare it', operations: [payoutName],
      operationLabels: ['POST /payouts (createPayout)'],
    });
    assert.equal(formatStylish(input([finding])).split('\n')[1], '  3:1  error  the key header is not declared by POST /payouts (createPayout): declare it  key-header-undeclared');
    const other = { ...finding, message: 'the key header is not declared: declare it' };
    assert.equal(formatStylish(input([other])).split('\n')[1], '  3:1  error  the key header is not declared: declare it (in createPayout)  key-header-undeclared');
  });

  it('leaves document warnings (no operation) as they are', () => {
    const warning = fakeFinding({ ruleId: 'document-invalid', file: spec, pointer: '/components/schemas/A/type', line: 8, column: 9, severity: 'warn', message: 'type arrays are OpenAPI 3.1', operations: [] });
    assert.equal(formatStylish(input([warning])).split('\n')[1], '  8:9  warning  type arrays are OpenAPI 3.1  document-invalid');
  });
});
