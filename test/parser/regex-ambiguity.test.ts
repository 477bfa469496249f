import assert from 'node:assert/strict';
import { exponentialBacktracking, polynomialDegree, quickToRun } from '../../src/parser/regex-ambiguity.js';

describe('parser/regex-ambiguity: key patterns that take exponential time', () => {
  it('finds the patterns whose part reads the same text in two ways, inside a loop or a long bounded repeat', () => {
    for (const pattern of [
      '([A-Za-z0-9]+-?)*', // the security review's: 13 s on a 32-character key
      '(a|a)*',
      '(a+)+',
      '^(\\w+\\s?)*$',
      '(\\w|\\d)+',
      '(x+x+)+y',
      '(\\d+)*\\.',
      '(aa|a)*b',
      '^([^-]+-?)+$',
      '([a-z]{1,255})*',
      '(?:a|a){1,300}', // no cycle, but 2^n ways for n ≤ 300
      '(.*a){12}',
      '^id-(?:[a-z]+)+$',
      '(?:😀|\\ud83d\\ude00)+', // an astral character is its two code units without the u flag
      '(?:[\\s\\S]|\\n)*',
      '(?:(?=x)[a-z]|x)*', // a lookahead reads nothing: still two ways
      // An inner loop closed and the outer iteration begun again reads what the inner one would (review, helper-125:
      // each of these was called safe and took 3-29 s on a 27-character key).
      '(a*)*',
      '((ab)*)*',
      '(\\d*)*',
      '^(?:\\w*\\.?)*$',
      '^([a-z0-9]*[-_]?)+$',
      '([A-Za-z0-9]*)+$',
      '(?:\\w*\\s*)+',
      '(?:a*b*)+',
      // A lookaround's body backtracks as any part does.
      '^(?=(?:[a-z0-9]+-?)*$).{1,64}$',
      '(?=(?:a+)+b)a*',
    ]) {
      const found = exponentialBacktracking(pattern);
      assert.ok(found, pattern);
      assert.ok(found.pump.length > 0);
      // The example is a key the pattern can read up to its failing character: the guard's own test shape.
      assert.equal(typeof found.prefix, 'string');
    }
  });

  it('gives an example that really is slow to refuse (the shape a client would send)', () => {
    const found = exponentialBacktracking('([A-Za-z0-9]+-?)*')!;
    assert.match(found.prefix, /^a+$/);
    assert.equal(found.pump, 'aa');
    const sliding = exponentialBacktracking('^id-(?:[a-z]+)+$')!;
    assert.match(sliding.prefix, /^id-/);
  });

  it('passes what real APIs and SDKs use: classes, bounded repeats, separators that start each repetition', () => {
    for (const pattern of [
      '^[A-Za-z0-9._:-]+$',
      '^[a-zA-Z0-9]+(-[a-zA-Z0-9]+)*$',
      '^([a-z0-9]+-)*[a-z0-9]+$',
      '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$',
      '^(stripe|stainless)-node-retry-[0-9a-f-]{36}$',
      '^[A-Za-z0-9+/]{22}==$',
      '^[\\x21-\\x7e]{1,255}$',
      '^(?:[A-Za-z0-9_-]{1,64})$',
      '(?:[a-f0-9]{2}){16}',
      '^(a|ab)*c$',
      '^\\d+\\d+$', // polynomial, and the key's length is bounded before the pattern runs
      '^[a-z]+[a-z0-9]*$',
      '.*',
      '^\\S+$',
      '(a?)*', // an iteration that reads nothing is not taken again
      '(x?)*y',
      '[^\\s]{1,255}',
      // Lengths that tell alternatives apart stay apart (one-character repeats are written out exactly).
      '^[0-9a-f]{8}(?:-[0-9a-f]{8}|-[0-9a-f]{12})*$',
      '(?:\\d{12}|\\d{16})(?:,(?:\\d{12}|\\d{16}))*',
      '^[A-Z]{3}-\\d{4,10}$',
    ]) {
      assert.equal(exponentialBacktracking(pattern), null, pattern);
    }
  });

  it('answers "not known" for what it cannot read as a regular language or check within its budget (a contract refuses those too)', () => {
    assert.equal(exponentialBacktracking('(a)\\1*'), undefined);
    assert.equal(exponentialBacktracking('(?<x>a)\\k<x>+'), undefined);
    assert.equal(exponentialBacktracking('(?:a|a)*(b)\\1'), undefined);
    // 1,000 alternatives in one loop: given up on within the edge budget, not run out of memory (it was a 4 GB crash).
    assert.equal(exponentialBacktracking(`(?:${Array(1000).fill('a').join('|')})*`), undefined);
  });
});

describe('parser/regex-ambiguity: key patterns whose backtracking grows as a power of the key length', () => {
  it('counts the unbounded repeats that follow one another over a shared character, across optional parts and plain groups', () => {
    for (const [pattern, degree] of [
      ['[a-z0-9]*-?[a-z0-9]*-?[a-z0-9]*-?[a-z0-9]*-?[a-z0-9]*', 5], // the security review's: 4.4 s on a 121-character key
      ['[a-z]+[a-z]+[a-z]+[a-z]+', 4],
      ['\\w*\\d*\\w*', 3], // digits are read by all three
      ['a*b?a*c?a*', 3],
      ['(?:[a-z]*_?[a-z]*)_?[a-z]*', 3],
      ['[a-z]*[0-9]*[a-z]*', 2], // the digits' repeat shares nothing, but reads nothing either
      ['\\d+\\d+', 2],
      ['^[A-Za-z0-9._:-]+$', 1],
      ['^[a-z]+-[a-z]+-[a-z]+$', 1], // a separator each side must read ends the chain
      ['^[a-zA-Z0-9]+(-[a-zA-Z0-9]+)*$', 1],
      ['^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$', 0],
      // Bounded, but wide: as many ways to split a long key as an unbounded repeat (the second security review's).
      ['[a-z0-9]{0,2000}-?[a-z0-9]{0,2000}-?[a-z0-9]{0,2000}', 3],
      ['^(?:[a-z]{0,3000}[a-z]{0,3000}[a-z]{0,3000})$', 3],
      ['^[0-9a-f]{1,8}[0-9a-f]{1,8}$', 0], // narrow: a few ways each, whatever the key
      ['^[a-z0-9]{1,64}-?[a-z0-9]{1,64}-?[a-z0-9]{1,64}$', 0], // 64^3 ways at most, about 1 ms (the diff review's)
    ] as const) {
      assert.equal(polynomialDegree(pattern), degree, pattern);
    }
    assert.equal(polynomialDegree('(a'), undefined);
  });

  it('tells lint which document patterns it may run on a text of a given length: a low power of it, never an exponential one', () => {
    assert.equal(quickToRun('^[a-z]*[0-9]*[a-z]*[0-9]*[a-z]*$', 57), true, 'a 57-character SDK key: 57^3 ways at most');
    assert.equal(quickToRun('[a-z0-9]*-?[a-z0-9]*-?[a-z0-9]*-?[a-z0-9]*-?[a-z0-9]*', 57), false);
    assert.equal(quickToRun('^(a+)+$', 3), false);
    assert.equal(quickToRun('(a', 3), false);
    assert.equal(quickToRun('\\d+\\d+', 200), true);
    // An unanchored search tries each position: a power more.
    assert.equal(quickToRun('[a-z]*[a-z]*[a-z]*', 200, true), false);
    assert.equal(quickToRun('^[a-z]*[a-z]*[a-z]*', 200, true), true);
    // Lint's own check of a document's patternProperties: 6,000^3 ways, never run (it held lint 33.6 s).
    assert.equal(quickToRun('^(?:[a-z]{0,3000}[a-z]{0,3000}[a-z]{0,3000})$', 6000), false);
  });
});
