import assert from 'node:assert/strict';
import { compileKeyPattern, parseIdempotencyKey } from '../../src/runtime/key.js';

const rules = { maxLength: 64, pattern: compileKeyPattern('^[A-Za-z0-9._:-]+$') };

describe('runtime/key: parseIdempotencyKey', () => {
  it('reads the Structured-Field string and the bare form as the same key', () => {
    const bare = parseIdempotencyKey('abc-123', rules);
    const quoted = parseIdempotencyKey('"abc-123"', rules);
    assert.deepEqual(bare, { kind: 'valid', key: 'abc-123' });
    assert.deepEqual(quoted, bare);
  });

  it('trims optional whitespace around the field value', () => {
    assert.deepEqual(parseIdempotencyKey('  abc \t', rules), { kind: 'valid', key: 'abc' });
    assert.deepEqual(parseIdempotencyKey(' "abc" ', rules), { kind: 'valid', key: 'abc' });
    assert.equal(parseIdempotencyKey('\t', rules).kind, 'invalid');
    // In time linear in the value's length: a long inner run of blanks (a runtime that takes long headers) was
    // retried from every blank by a trimming regex, quadratic; the quadratic code runs into the suite's timeout.
    const long = ` a${' \t'.repeat(1 << 20)}b`;
    assert.equal(parseIdempotencyKey(long, { maxLength: 1 << 22 }).kind, 'invalid');
    assert.equal(parseIdempotencyKey(`${' '.repeat(1 << 20)}abc${'\t'.repeat(1 << 20)}`, rules).kind, 'valid');
  });

  it('unescapes \\" and \\\\ in the quoted form and refuses other escapes', () => {
    const loose = { maxLength: 64 };
    assert.deepEqual(parseIdempotencyKey('"a\\"b\\\\c"', loose), { kind: 'valid', key: 'a"b\\c' });
    assert.equal(parseIdempotencyKey('"a\\nb"', loose).kind, 'invalid');
    assert.equal(parseIdempotencyKey('"abc', loose).kind, 'invalid');
    assert.equal(parseIdempotencyKey('"abc";x=1', loose).kind, 'invalid');
  });

  it('accepts the keys real clients send (stripe-node, stainless, 54–57 characters) under the default 255 limit', () => {
    for (const key of ['stripe-node-retry-7c9f0b1e-3c1d-4a51-9a43-0d9d1b2a5f10', 'stainless-node-retry-7c9f0b1e-3c1d-4a51-9a43-0d9d1b2a5f10']) {
      assert.deepEqual(parseIdempotencyKey(key, { maxLength: 255, pattern: compileKeyPattern('^[A-Za-z0-9._:-]+$') }), { kind: 'valid', key });
    }
  });

  it('reports a missing header as missing, not invalid', () => {
    assert.deepEqual(parseIdempotencyKey(undefined, rules), { kind: 'missing' });
    assert.deepEqual(parseIdempotencyKey([], rules), { kind: 'missing' });
  });

  const invalid: Array<[string, string | readonly string[], string]> = [
    ['two header lines', ['a', 'b'], 'several-values'],
    ['a comma-joined list', 'a, b', 'several-values'],
    ['two quoted members', '"a", "b"', 'several-values'],
    ['an empty value', '', 'empty'],
    ['blank value', '   ', 'empty'],
    ['an empty quoted string', '""', 'empty'],
    ['a control character', 'ab\u0001c', 'non-printable'],
    ['a space inside a bare key', 'a b', 'non-printable'],
    ['non-ASCII', 'clé', 'non-printable'],
    ['non-ASCII in quotes', '"clé"', 'non-printable'],
    ['65 characters', 'k'.repeat(65), 'too-long'],
    ['off the pattern', 'abc/def', 'off-pattern'],
  ];
  for (const [name, raw, problem] of invalid) {
    it(`refuses ${name} as ${problem}`, () => {
      const parsed = parseIdempotencyKey(raw, rules);
      assert.equal(parsed.kind, 'invalid');
      assert.equal(parsed.kind === 'invalid' && parsed.problem, problem);
    });
  }

  it('accepts exactly maxLength characters', () => {
    assert.equal(parseIdempotencyKey('k'.repeat(64), rules).kind, 'valid');
  });

  it('anchors a pattern written without ^ and $', () => {
    const unanchored = { maxLength: 64, pattern: compileKeyPattern('[a-z]+') };
    assert.equal(parseIdempotencyKey('abc', unanchored).kind, 'valid');
    assert.equal(parseIdempotencyKey('abc1', unanchored).kind, 'invalid');
  });
});
