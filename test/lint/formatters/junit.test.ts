import assert from 'node:assert/strict';
import { escapeXml, formatJunit } from '../../../src/lint/formatters/junit.js';
import { report } from './fixture.js';

describe('junit formatter', () => {
  it('escapes XML and drops characters XML cannot carry', () => {
    assert.equal(escapeXml(`a<b>&"c"'\u0001\u0007d\ttab`), 'a&lt;b&gt;&amp;&quot;c&quot;&apos;d\ttab');
  });

  it('has one test case per operation and a failure for the findings of each', () => {
    const xml = formatJunit(report());
    assert.match(xml, /^<\?xml version="1\.0" encoding="UTF-8"\?>\n<testsuites name="idemkit" tests="3" failures="2" errors="0">/);
    assert.match(xml, /<testsuite name="api\/open api\.yaml" tests="3" failures="2" errors="0" skipped="0">/);
    const cases = [...xml.matchAll(/<testcase classname="[^"]*" name="([^"]*)"/g)].map((m) => m[1]);
    assert.deepEqual(cases, ['POST /payouts (createPayout)', 'POST /refunds (createRefund)', 'GET /payouts/{id} (getPayout)']);
    assert.match(xml, /<testcase classname="api\/open api\.yaml" name="GET \/payouts\/\{id\} \(getPayout\)"\/>/);
    assert.match(xml, /<failure message="POST \/payouts \(createPayout\): Scope 100% global[^"]*" type="scope-too-wide">api\/open api\.yaml:12:7 error scope-too-wide: Scope 100% global: keys, of &lt;tenants&gt; &amp; &quot;owners&quot; collide\nacross accounts \| `x`<\/failure>/);
    assert.match(
      xml,
      /<system-out>below --fail-on error: api\/open api\.yaml:10:5 warn ttl-missing: No ttl\.\nsuppressed \(owned by the ledger team\): api\/open api\.yaml:10:5 info effect-owner-missing: Owner\?<\/system-out>/,
    );
  });

  it('fails a test case only for findings at or above --fail-on; lower ones are output of a passing case', () => {
    const warnOnly = report();
    const findings = warnOnly.findings.filter((f) => f.ruleId === 'ttl-missing');
    const passing = formatJunit({ ...warnOnly, findings });
    assert.match(passing, /<testsuites name="idemkit" tests="3" failures="0" errors="0">/);
    assert.doesNotMatch(passing, /<failure/);
    assert.match(passing, /<testcase classname="api\/open api\.yaml" name="POST \/payouts \(createPayout\)">\n\s*<system-out>below --fail-on error: api\/open api\.yaml:10:5 warn ttl-missing: No ttl\.<\/system-out>/);
    const failing = formatJunit({ ...warnOnly, findings, failOn: 'warn' });
    assert.match(failing, /tests="3" failures="1"/);
    assert.match(failing, /<failure message="POST \/payouts \(createPayout\): No ttl\." type="ttl-missing">api\/open api\.yaml:10:5 warn ttl-missing: No ttl\.<\/failure>/);
    const both = formatJunit(report({ failOn: 'warn' }));
    assert.match(both, /<failure message="POST \/payouts \(createPayout\): 2 findings, first: No ttl\." type="ttl-missing">/);
    const cases = [...both.matchAll(/<testcase /g)].length;
    assert.equal(cases, 3, 'still one test case per operation');
  });

  it('names the operation in failure messages, once, and names an undeclared operation\'s case by its label', () => {
    const base = report();
    const refund = formatJunit({ ...base, findings: base.findings.filter((f) => f.ruleId === 'contract-missing') });
    // The message already starts with `POST /refunds`: no second mention.
    assert.match(refund, /<failure message="POST \/refunds takes Idempotency-Key but has no x-idempotency\." type="contract-missing">/);
    const shared = { ...base.findings[0]!, operations: ['createPayout', 'remoteOp'], operationLabels: ['POST /payouts (createPayout)', 'PUT /remote (remoteOp)'] };
    const xml = formatJunit({ ...base, findings: [shared] });
    const cases = [...xml.matchAll(/<testcase classname="[^"]*" name="([^"]*)"/g)].map((m) => m[1]);
    assert.deepEqual(cases, ['POST /payouts (createPayout)', 'POST /refunds (createRefund)', 'GET /payouts/{id} (getPayout)', 'PUT /remote (remoteOp)']);
    assert.match(xml, /<failure message="PUT \/remote \(remoteOp\): Scope 100%/);
    assert.match(xml, /error scope-too-wide: Scope 100%[^<]*\[also PUT \/remote \(remoteOp\)\]<\/failure>/);
  });

  it('is well-formed: every opened element is closed', () => {
    const xml = formatJunit(report());
    const stack: string[] = [];
    for (const match of xml.matchAll(/<(\/?)([a-z-]+)[^>]*?(\/?)>/g)) {
      const [, closing, name, selfClosing] = match;
      if (selfClosing) continue;
      if (closing) assert.equal(stack.pop(), name);
      else stack.push(name!);
    }
    assert.deepEqual(stack, []);
  });

  it('passes every operation of a clean report', () => {
    const xml = formatJunit(report({ findings: [] }));
    assert.match(xml, /tests="3" failures="0"/);
    assert.doesNotMatch(xml, /<failure/);
  });
});
