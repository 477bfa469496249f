import assert from 'node:assert/strict';
import { escapeData, escapeProperty, formatGithub } from '../../../src/lint/formatters/github.js';
import { report } from './fixture.js';

describe('github formatter', () => {
  it('escapes message data and property values the way the Actions runner decodes them', () => {
    assert.equal(escapeData('100%\r\nnext: a,b'), '100%25%0D%0Anext: a,b');
    assert.equal(escapeProperty('C:\\a,b%\n'), 'C%3A\\a%2Cb%25%0A');
  });

  it('writes out other control characters of spec text (an ESC would reach the job log as a terminal sequence)', () => {
    const escaped = escapeData('create\u001b[31mCharge\u0007\tok');
    assert.ok(!/[\u0000-\u0008\u000b-\u001f\u007f]/.test(escaped.replace(/\t/g, '')), escaped);
    assert.match(escaped, /^create\\e\[31mCharge\\u0007\tok$/);
  });

  it('prints one annotation per unsuppressed finding, with file, line, col and the rule as title', () => {
    const lines = formatGithub(report()).trimEnd().split('\n');
    assert.deepEqual(lines, [
      '::warning file=api/open api.yaml,line=10,col=5,title=ttl-missing::No ttl. [POST /payouts (createPayout)] (ttl-missing)',
      '::error file=api/open api.yaml,line=12,col=7,title=scope-too-wide::Scope 100%25 global: keys, of <tenants> & "owners" collide%0Aacross accounts | `x` [POST /payouts (createPayout)] (scope-too-wide)',
      '::error file=api/open api.yaml,line=30,col=5,title=contract-missing::POST /refunds takes Idempotency-Key but has no x-idempotency. (contract-missing)',
    ]);
  });

  it('names the operation by the engine label unless the message already names it', () => {
    const base = report();
    const shared = { ...base.findings[1]!, operations: ['createPayout', 'createRefund'], operationLabels: ['POST /payouts (createPayout)', 'POST /refunds (createRefund)'] };
    assert.match(formatGithub({ ...base, findings: [shared] }), /::No ttl\. \[POST \/payouts \(createPayout\); POST \/refunds \(createRefund\)\] \(ttl-missing\)$/m);
    // The engine's label wins over a lookup (an operation of a document not given to the formatter).
    const external = { ...base.findings[1]!, operations: ['remoteOp'], operationLabels: ['PUT /remote (remoteOp)'] };
    assert.match(formatGithub({ ...base, findings: [external] }), /::No ttl\. \[PUT \/remote \(remoteOp\)\] \(ttl-missing\)$/m);
    // `POST /refunds` in the message names it; `POST /refunds/{id}` would not.
    const named = { ...base.findings[1]!, message: 'POST /refunds lacks a ttl.', operations: ['createRefund'] };
    assert.match(formatGithub({ ...base, findings: [named] }), /::POST \/refunds lacks a ttl\. \(ttl-missing\)$/m);
    const other = { ...named, message: 'POST /refunds/{id} is similar.' };
    assert.match(formatGithub({ ...base, findings: [other] }), /::POST \/refunds\/\{id\} is similar\. \[POST \/refunds \(createRefund\)\] \(ttl-missing\)$/m);
  });

  it('escapes commas and colons in the file property', () => {
    const base = report();
    const out = formatGithub({ ...base, findings: [{ ...base.findings[0]!, file: '/repo/a,b:c.yaml' }] });
    assert.match(out, /^::error file=a%2Cb%3Ac\.yaml,line=12,col=7,title=scope-too-wide::/);
  });

  it('prints nothing for a clean report, and a notice per stale baseline entry', () => {
    assert.equal(formatGithub(report({ findings: [] })), '');
    const out = formatGithub(
      report({
        findings: [],
        baseline: { file: '/repo/b.json', matched: 0, stale: [{ rule: 'ttl-missing', file: 'api/x.yaml', operation: 'createPayout', pointer: '/x-idempotency', count: 1, message: '' }] },
      }),
    );
    assert.match(out, /^::notice title=idemkit baseline::stale baseline entry: ttl-missing at api\/x\.yaml createPayout \/x-idempotency/);
  });
});
