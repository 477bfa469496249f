import assert from 'node:assert/strict';
import { escapeData, escapeProperty, formatGithub } from '../../../src/lint/formatters/github.js';
import { report } from './fixture.js';

describe('github formatter', () => {
  it('escapes message data and property values the way the Actions runner decodes them', () => {
    assert.equal(escapeData('100%\r\nnext: a,b'), '100%25%0D%0Anext: a,b');
    assert.equal(escapeProperty('C:\\a,b%\n'), 'C%3A\\a%2Cb%25%0A');
  });

  it('prints one annotation per unsuppressed finding, with file, line, col and the rule as title', () => {
    const lines = formatGithub(report()).trimEnd().split('\n');
    assert.deepEqual(lines, [
      '::warning file=api/open api.yaml,line=10,col=5,title=ttl-missing::No ttl. [createPayout] (ttl-missing)',
      '::error file=api/open api.yaml,line=12,col=7,title=scope-too-wide::Scope 100%25 global: keys, of <tenants> & "owners" collide%0Aacross accounts | `x` [createPayout] (scope-too-wide)',
      '::error file=api/open api.yaml,line=30,col=5,title=contract-missing::POST /refunds takes Idempotency-Key but has no x-idempotency. [createRefund] (contract-missing)',
    ]);
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
