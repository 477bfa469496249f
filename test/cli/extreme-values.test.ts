import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { main } from '../../src/cli/main.js';
import { summarise } from '../../src/parser/summarise.js';
import { bufferIo } from '../helpers/io.js';

/** A JSON document with one POST whose `x-idempotency` is `contract` (JSON text). */
function jsonSpec(contract: string): string {
  return `{"openapi":"3.1.0","info":{"title":"x","version":"1"},"paths":{"/a":{"post":{"responses":{"201":{"description":"ok"}},"x-idempotency":${contract}}}}}`;
}

describe('idemkit lint on extreme values: a finding or a usage error, bounded, never an internal error', () => {
  let dir: string;
  const lint = async (name: string, text: string, ...argv: string[]) => {
    writeFileSync(path.join(dir, name), text);
    const io = bufferIo(dir);
    const code = await main(['lint', name, ...argv], io);
    return { code, out: io.out, err: io.err };
  };
  beforeEach(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'idemkit-extreme-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('a contract value nested 100,000 deep is a contract-invalid finding quoting a summary of it', async () => {
    const deep = `${'['.repeat(100_000)}${']'.repeat(100_000)}`;
    const result = await lint('deep.json', jsonSpec(`{"ttl":"P1D","key":${deep}}`), '-f', 'json');
    assert.equal(result.code, 1, result.err);
    const invalid = (JSON.parse(result.out) as { findings: { ruleId: string; message: string }[] }).findings.filter((finding) => finding.ruleId === 'contract-invalid');
    assert.deepEqual(invalid.map((finding) => finding.message), ['x-idempotency.key is [[[…]]]; it must be object']);
  });

  it('a 200 KB wrong-typed value gives a message of a line, not of 200 KB', async () => {
    const huge = JSON.stringify({ note: 'x'.repeat(200_000), list: Array.from({ length: 10_000 }, (_, i) => i) });
    const result = await lint('huge.json', jsonSpec(`{"ttl":"P1D","key":{"header":"Idempotency-Key"},"scope":${huge}}`));
    assert.equal(result.code, 1, result.err);
    const line = result.out.split('\n').find((text) => text.includes('x-idempotency.scope is'));
    assert.ok(line !== undefined && line.length < 300, line?.slice(0, 400));
  });

  it('a body schema of 60 levels of YAML aliases (each level twice the one below: 2^60 paths, 4 KB of text) is linted at once, its findings in place', async () => {
    // The real-spec review's: 20 levels held lint 17 s and 800 MB, 22 levels 80 s and 3 GB, 40 never ended.
    const levels = Array.from({ length: 60 }, (_, i) => `x-a${i + 1}: &a${i + 1} {allOf: [*a${i}, *a${i}]}`);
    const text = [
      'openapi: 3.0.3',
      'info: {title: t, version: "1"}',
      'x-a0: &a0 {type: object, required: [name], properties: {name: {type: string}, idempotency_key: {type: string}}}',
      ...levels,
      'paths:',
      '  /a:',
      '    post:',
      '      x-idempotency:',
      '        key: {body: /idempotency_key}',
      '        fingerprint: {include: [/nosuch]}',
      '      requestBody:',
      '        content:',
      '          application/json:',
      '            schema: *a60',
      "      responses: {'201': {description: ok}}",
      '',
    ].join('\n');
    const result = await lint('aliases.yaml', text, '-f', 'json');
    assert.equal(result.code, 1, result.err);
    const findings = (JSON.parse(result.out) as { findings: { ruleId: string; message: string; line: number }[] }).findings;
    const unknown = findings.filter((finding) => finding.ruleId === 'fingerprint-field-unknown');
    assert.equal(unknown.length, 1, JSON.stringify(findings));
    assert.match(unknown[0]!.message, /\/nosuch/);
    // The required field the fingerprint leaves out is found through the aliases.
    assert.ok(findings.some((finding) => finding.ruleId === 'fingerprint-required-uncovered' && /name/.test(finding.message)), JSON.stringify(findings));
  });

  it('YAML nested over the depth limit is a one-line error at the place, not a stack overflow', async () => {
    const result = await lint('deep.yaml', `openapi: 3.1.0\ninfo: {title: x, version: "1"}\npaths: {}\nx-deep: ${'['.repeat(5000)}${']'.repeat(5000)}\n`);
    assert.deepEqual(result, { code: 2, out: '', err: 'deep.yaml:4:1008: invalid YAML: nested too deeply (over 1000 levels) — flatten the structure here\n' });
  });

  it('summarise keeps JSON shape within a depth, an item count and a length', () => {
    assert.equal(summarise('PT1S'), '"PT1S"');
    assert.equal(summarise({ a: [1, { b: 2 }], c: null }), '{"a":[1,{…}],"c":null}');
    assert.equal(summarise([1, 2, 3, 4, 5, 6, 7]), '[1,2,3,4,5,…]');
    assert.equal(summarise('y'.repeat(500)), `"${'y'.repeat(59)}…"`);
    assert.ok(summarise(Object.fromEntries(Array.from({ length: 5 }, (_, i) => [`key${i}`, 'z'.repeat(50)]))).length <= 100);
  });
});
