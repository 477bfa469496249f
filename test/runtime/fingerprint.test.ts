import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import {
  CanonicalJsonError,
  canonicalJson,
  computeFingerprint,
  computeRecordId,
  fingerprintFor,
  JsonNumberText,
  parseJsonExact,
  parseJsonPointer,
  recordIdFor,
  resolveJsonPointer,
  selectFields,
  type FingerprintInput,
} from '../../src/runtime/fingerprint.js';

describe('runtime/fingerprint: canonicalJson (RFC 8785)', () => {
  it('matches the RFC 8785 §3.2.2 example', () => {
    const input = JSON.parse(
      '{"numbers":[333333333.33333329,1E30,4.50,2e-3,0.000000000000000000000000001],"string":"\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/","literals":[null,true,false]}',
    );
    assert.equal(
      canonicalJson(input),
      '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}',
    );
  });

  it('sorts member names by UTF-16 code units (RFC 8785 §3.2.3 example)', () => {
    const input = JSON.parse('{"\\u20ac":"Euro Sign","\\r":"Carriage Return","\\ufb33":"Hebrew Letter Dalet With Dagesh","1":"One","\\ud83d\\ude00":"Emoji: Grinning Face","\\u0080":"Control","\\u00f6":"Latin Small Letter O With Diaeresis"}');
    // Read the order off the text: Object.keys would put the integer-like "1" first.
    const names = [...canonicalJson(input).matchAll(/"((?:[^"\\]|\\.)*)":/g)].map((m) => JSON.parse(`"${m[1]}"`));
    assert.deepEqual(names, ['\r', '1', '\u0080', '\u00f6', '\u20ac', '\ud83d\ude00', '\ufb33']);
  });

  it('escapes strings and member names exactly as JSON.stringify, for every UTF-16 code unit', () => {
    for (let unit = 0; unit <= 0xffff; unit += 1) {
      const text = `a${String.fromCharCode(unit)}b`;
      assert.equal(canonicalJson(text), JSON.stringify(text), `U+${unit.toString(16)}`);
      assert.equal(canonicalJson({ [text]: 1 }), `{${JSON.stringify(text)}:1}`, `name U+${unit.toString(16)}`);
    }
    // A surrogate pair is one character, written as is; a lone half is escaped.
    for (const text of ['\ud83d\ude00', '\ud83d', 'x\ude00', '', 'plain']) assert.equal(canonicalJson(text), JSON.stringify(text));
  });

  it('writes numbers in ECMAScript form', () => {
    const cases: Array<[number, string]> = [
      [0, '0'], [-0, '0'], [1, '1'], [-1.5, '-1.5'], [1e21, '1e+21'], [1e20, '100000000000000000000'],
      [1e-7, '1e-7'], [0.000001, '0.000001'], [9007199254740992, '9007199254740992'], [5e-324, '5e-324'],
      [1.7976931348623157e308, '1.7976931348623157e+308'], [0.1 + 0.2, '0.30000000000000004'],
    ];
    for (const [value, text] of cases) assert.equal(canonicalJson(value), text, String(value));
  });

  it('refuses values with no JSON form', () => {
    assert.throws(() => canonicalJson(Number.NaN), CanonicalJsonError);
    assert.throws(() => canonicalJson(Infinity), CanonicalJsonError);
    assert.throws(() => canonicalJson(10n), CanonicalJsonError);
    assert.throws(() => canonicalJson([undefined]), CanonicalJsonError);
  });

  it('leaves out undefined members like JSON.stringify', () => {
    assert.equal(canonicalJson({ b: 1, a: undefined }), '{"b":1}');
  });
});

describe('runtime/fingerprint: JSON Pointer', () => {
  it('unescapes ~1 and ~0 and refuses a bad escape', () => {
    assert.deepEqual(parseJsonPointer('/a~1b/c~0d'), ['a/b', 'c~d']);
    assert.deepEqual(parseJsonPointer(''), []);
    assert.throws(() => parseJsonPointer('a'), SyntaxError);
    assert.throws(() => parseJsonPointer('/a~2'), SyntaxError);
  });

  it('resolves objects and array indexes, and reports missing steps', () => {
    const doc = { a: [{ b: 1 }, { b: null }], 'x/y': true };
    assert.deepEqual(resolveJsonPointer(doc, '/a/1/b'), { found: true, value: null });
    assert.deepEqual(resolveJsonPointer(doc, '/x~1y'), { found: true, value: true });
    assert.equal(resolveJsonPointer(doc, '/a/2').found, false);
    assert.equal(resolveJsonPointer(doc, '/a/01').found, false);
    assert.equal(resolveJsonPointer(doc, '/a/0/c').found, false);
    assert.equal(resolveJsonPointer(doc, '/toString').found, false);
    // `-` is the slot after the last item (RFC 6901), never "every item"; the linter flags it (fingerprint-field-unknown).
    assert.equal(resolveJsonPointer(doc, '/a/-/b').found, false);
    assert.equal(resolveJsonPointer(doc, '/a/-').found, false);
  });

  it('selects included fields, tells absent from null, and removes excluded ones', () => {
    const body = { topic: 'x', contact: { email: 'e', phone: 'p' }, note: null };
    assert.deepEqual(selectFields(body, { include: ['/topic', '/missing', '/note'], exclude: [] }), { '/topic': 'x', '/note': null });
    assert.deepEqual(selectFields(body, { include: ['/contact'], exclude: ['/contact/phone'] }), { '/contact': { email: 'e' } });
    assert.deepEqual(selectFields(body, { include: 'all', exclude: ['/note', '/contact/phone'] }), { '': { topic: 'x', contact: { email: 'e' } } });
    assert.deepEqual(selectFields(body, { include: ['/topic'], exclude: ['/topic'] }), {});
    assert.deepEqual(selectFields(undefined, { include: 'all', exclude: [] }), {});
    // the original body is not changed by exclusion
    assert.deepEqual(body.contact, { email: 'e', phone: 'p' });
  });

  it('splices excluded array items', () => {
    assert.deepEqual(selectFields({ items: [1, 2, 3] }, { include: 'all', exclude: ['/items/1'] }), { '': { items: [1, 3] } });
  });
});

describe('runtime/fingerprint: computeFingerprint', () => {
  const base: Omit<FingerprintInput, 'body'> = { operationId: 'op', pathParams: {}, query: {}, selection: { include: 'all', exclude: [] } };
  const fp = (body: unknown, extra: Partial<Omit<FingerprintInput, 'body'>> = {}) => computeFingerprint({ ...base, ...extra, body });

  it('is versioned and hex', () => {
    assert.match(fp({ a: 1 }), /^v1:[0-9a-f]{64}$/);
  });
  it('ignores member order', () => {
    assert.equal(fp({ a: 1, b: { c: 2, d: 3 } }), fp({ b: { d: 3, c: 2 }, a: 1 }));
  });
  it('keeps types: 100 is not "100", true is not "true", null is not absent', () => {
    assert.notEqual(fp({ amount: 100 }), fp({ amount: '100' }));
    assert.notEqual(fp({ flag: true }), fp({ flag: 'true' }));
    assert.notEqual(fp({ a: null }), fp({}));
    assert.equal(fp({ amount: 100 }), fp({ amount: 100.0 }));
  });
  it('keeps array order', () => {
    assert.notEqual(fp({ items: [1, 2] }), fp({ items: [2, 1] }));
  });
  it('handles unicode: same text same fingerprint, different normalisation different', () => {
    assert.equal(fp({ name: 'Zoë 😀' }), fp(JSON.parse('{"name":"Zo\\u00eb \\ud83d\\ude00"}')));
    assert.notEqual(fp({ name: 'Zo\u00eb' }), fp({ name: 'Zoe\u0308' }));
  });
  it('ignores fields outside the selection and missing optional fields', () => {
    const selection = { include: ['/topic', '/contact/email'], exclude: [] };
    assert.equal(fp({ topic: 't', clientSentAt: 1 }, { selection }), fp({ topic: 't', clientSentAt: 2 }, { selection }));
    assert.notEqual(fp({ topic: 't' }, { selection }), fp({ topic: 't', contact: { email: 'e' } }, { selection }));
  });
  it('handles large bodies', () => {
    const big = { items: Array.from({ length: 20_000 }, (_, i) => ({ i, text: `item ${i}` })) };
    const copy = JSON.parse(JSON.stringify(big));
    assert.equal(fp(big), fp(copy));
    copy.items[19_999].text = 'changed';
    assert.notEqual(fp(big), fp(copy));
  });
  it('takes a body nested deeper than the call stack goes (any depth JSON.parse reads), order-blind and leaf-exact as at any depth', () => {
    const nest = (depth: number, leaf: unknown) => {
      let value: unknown = leaf;
      for (let i = 0; i < depth; i += 1) value = i % 2 === 0 ? [value, i] : { z: i, a: value, u: undefined };
      return value;
    };
    const text = (depth: number, leaf: string) => `${'['.repeat(depth)}${leaf}${']'.repeat(depth)}`;
    // 50,000 levels of `[…]`: 100 KB that a body parser reads; recursion would overflow the stack (a 500 before the handler).
    assert.equal(fp(JSON.parse(text(50_000, '1'))), fp(JSON.parse(text(50_000, '1'))));
    assert.notEqual(fp(JSON.parse(text(50_000, '1'))), fp(JSON.parse(text(50_000, '2'))));
    assert.notEqual(fp(JSON.parse(text(50_000, '1'))), fp(JSON.parse(text(49_999, '[1]').replace('[[1]]', '[1,1]'))));
    const deep = nest(20_000, { b: 1, a: [2, 'x'] });
    let reordered: unknown = { a: [2, 'x'], b: 1 };
    for (let i = 0; i < 20_000; i += 1) reordered = i % 2 === 0 ? [reordered, i] : { a: reordered, z: i };
    assert.equal(fp(deep), fp(reordered), 'member order and undefined members do not count');
    assert.notEqual(fp(deep), fp(nest(20_000, { b: 1, a: [2, 'y'] })));
    assert.notEqual(fp(deep), fp(nest(19_999, { b: 1, a: [2, 'x'] })));
    // Past the stack's depth the text is the same one, as canonical JSON shows (JSON.stringify still goes 3,000 levels deep).
    const sorted = (depth: number): unknown => (depth === 0 ? { a: 'é\u0001"', b: [1e21, -0, true, null] } : [{ k: sorted(depth - 1), m: '' }]);
    assert.equal(canonicalJson(sorted(1_500)), JSON.stringify(sorted(1_500)));
    assert.throws(() => canonicalJson(nest(2_000, [undefined])), CanonicalJsonError);
    const cycle: unknown[] = [];
    cycle.push(new Set([nest(1_100, cycle)]));
    assert.throws(() => fp(cycle), /value contains itself/);
    // A body parser's class whose toJSON answers with itself is written as its members, not followed without end.
    class Self {
      constructor(readonly a: number) {}
      toJSON(): this {
        return this;
      }
    }
    assert.equal(fp({ x: new Self(1) }), fp({ x: new Self(1) }));
    assert.notEqual(fp({ x: new Self(1) }), fp({ x: new Self(2) }));
    class Ping {
      toJSON(): unknown {
        return new Pong();
      }
    }
    class Pong {
      toJSON(): unknown {
        return new Ping();
      }
    }
    assert.throws(() => fp(new Ping()), /toJSON answers with values that have toJSON without end/);
  });
  it('never collapses bodies the pointers cannot select from: text, bytes and scalars are fingerprinted by their exact bytes', () => {
    const selection = { include: ['/amount'], exclude: [] };
    assert.notEqual(fp('{"amount":1}', { selection }), fp('{"amount":999}', { selection }));
    assert.notEqual(fp('amount=1', { selection }), fp('amount=2', { selection }));
    assert.notEqual(fp(Buffer.from('a'), { selection }), fp(Buffer.from('b'), { selection }));
    assert.notEqual(fp(Buffer.from('a')), fp(Buffer.from('b')));
    assert.notEqual(fp(1, { selection }), fp(2, { selection }));
    assert.notEqual(fp('', { selection }), fp(undefined, { selection }), 'an empty body is not an absent one');
    assert.equal(fp('same text', { selection }), fp(Buffer.from('same text'), { selection }), 'the same bytes, however they arrived');
    assert.equal(fp('{"amount":1}', { selection }), fp('{"amount":1}', { selection }));
    // A parsed form (express.urlencoded, @fastify/formbody) is an object: pointers keep working on it.
    assert.equal(fp({ amount: '1', note: 'a' }, { selection }), fp({ amount: '1', note: 'b' }, { selection }));
  });
  it('includes operation, path params and declared query', () => {
    assert.notEqual(fp({}, { operationId: 'a' }), fp({}, { operationId: 'b' }));
    assert.notEqual(fp({}, { pathParams: { id: '1' } }), fp({}, { pathParams: { id: '2' } }));
    assert.notEqual(fp({}, { query: { dry: 'true' } }), fp({}, { query: {} }));
  });
});

describe('runtime/fingerprint: stored values stay the same', () => {
  // Records already stored carry these: a change of how they are computed must not change them.
  it('fingerprints: selected fields, all fields with an exclude, opaque text, no body', () => {
    const selection = { include: ['/topic', '/contact/email'], exclude: [] };
    assert.equal(
      computeFingerprint({ operationId: 'createDemoRequest', pathParams: { id: 'a b/ü' }, query: { dry: 'true', tags: ['x', 'y'] }, body: { topic: 't', contact: { email: 'e', phone: 1 } }, selection }),
      'v1:e78598d3ddc4c855258b91faf6f23b4b601ac143541ee0b24d28eb311fd7d833',
    );
    assert.equal(
      computeFingerprint({ operationId: 'op', pathParams: {}, query: {}, body: { b: [1, 2.5, -0, null, true], a: 'Zoë 😀' }, selection: { include: 'all', exclude: ['/b/1'] } }),
      'v1:85c386189b1d77e2ebea9c5d27ce176d8a9332368acd9dadbb461e7148966a0a',
    );
    assert.equal(computeFingerprint({ operationId: 'op', pathParams: {}, query: {}, body: 'amount=1', selection }), 'v1:2f404758dd71202abcd7d797069ae08eaab6b5dba9e8d70ad0afa6864e483822');
    assert.equal(computeFingerprint({ operationId: 'op', pathParams: {}, query: {}, body: undefined, selection }), 'v1:6d2f5d607371ac63ff1a856d7d551b57822be6917bdbd95dfc83efe02acd2dbc');
  });
  it('is the SHA-256 of the canonical material, as the guard builds it once per operation', () => {
    const selection = { include: 'all' as const, exclude: ['/note'] };
    const body = { z: 1, a: { y: [true, null], b: 'x' }, note: 'n' };
    const material = { v: 'v1', operation: 'op', path: { id: '7' }, query: { q: ['1', '2'] }, body: { '': { z: 1, a: { y: [true, null], b: 'x' } } } };
    const expected = `v1:${createHash('sha256').update(canonicalJson(material)).digest('hex')}`;
    assert.equal(fingerprintFor('op', selection)({ id: '7' }, { q: ['1', '2'] }, body), expected);
    assert.equal(computeFingerprint({ operationId: 'op', pathParams: { id: '7' }, query: { q: ['1', '2'] }, body, selection }), expected);
  });
  it('record ids', () => {
    assert.equal(computeRecordId([['principal', 'u'], ['path', 'item.id', 'a b/ü']], 'items.actions-run now', 'k1'), 'ec0e53d9653cebe1d8d30eb0e04fc9c4173f506ff5bae35b4078a2c624368451');
    assert.equal(computeRecordId([['global']], 'op', '"quoted\\'), '1536e05dcd732fee571f0cf2e498d662fd983e99142579bbf65111f548c89878');
    const expected = createHash('sha256').update(canonicalJson(['idemkit-record/v1', [['principal', 'u']], 'op', 'k'])).digest('hex');
    assert.equal(recordIdFor('op')([['principal', 'u']], 'k'), expected);
  });
});

describe('runtime/fingerprint: computeRecordId', () => {
  it('separates scope parts unambiguously and never contains the key', () => {
    const id = computeRecordId([['principal', 'ab']], 'op', 'c');
    assert.notEqual(id, computeRecordId([['principal', 'a']], 'op', 'bc'));
    assert.notEqual(id, computeRecordId([['principal', 'ab']], 'op2', 'c'));
    assert.match(id, /^[0-9a-f]{64}$/);
  });
});

describe('runtime/fingerprint: numbers a double cannot hold', () => {
  const all = { include: 'all', exclude: [] } as const;
  const fpOf = (body: unknown, selection: FingerprintInput['selection'] = all) => fingerprintFor('op', selection)({}, {}, body);

  it('parseJsonExact is JSON.parse where every number round-trips, also with 16 and 17 digits and long digit strings', () => {
    for (const text of [
      '{"a":1,"b":[1.5,-0,0.1,1e21,5e-324,1.7976931348623157e308],"c":"9007199254740993123"}',
      '[9007199254740992,0.30000000000000004,1234567890123456,1.0000000000000000,12345678.5,1e-300,100e-2]',
      '"00000000000000000001"',
      '{"card":"4111111111111111","at":"2026-12-02T01:54:39.123456789Z"}',
    ]) {
      assert.deepEqual(parseJsonExact(text), JSON.parse(text), text);
    }
    assert.throws(() => parseJsonExact('{"a":01234567890123456789}'), SyntaxError);
    assert.throws(() => parseJsonExact('not json'), SyntaxError);
  });

  it('keeps the text of a number a double cannot hold, wherever it sits, and leaves strings alone', () => {
    const parsed = parseJsonExact(
      '{"amount":9007199254740993,"rate":0.12345678901234567891,"list":[1, 1e400, -1e400, 1e-400, 1.234567891e-320, 2.5e-320],"s":"9007199254740993","n":{"x":123456789012345678901234567890}}',
    ) as Record<string, unknown>;
    assert.deepEqual(parsed['amount'], new JsonNumberText('9007199254740993'));
    assert.deepEqual(parsed['rate'], new JsonNumberText('0.12345678901234567891'));
    assert.deepEqual(parsed['list'], [1, new JsonNumberText('1e400'), new JsonNumberText('-1e400'), new JsonNumberText('1e-400'), new JsonNumberText('1.234567891e-320'), 2.5e-320]);
    assert.equal(parsed['s'], '9007199254740993');
    assert.deepEqual(parsed['n'], { x: new JsonNumberText('123456789012345678901234567890') });
    // Escaped quotes and backslashes inside strings do not end them early.
    const escaped = String.raw`{"q":"say \"9007199254740993\" \\","b":"\\\\","n":[9007199254740993,"\"",1.5]}`;
    assert.deepEqual(parseJsonExact(escaped), { ...(JSON.parse(escaped) as object), n: [new JsonNumberText('9007199254740993'), '"', 1.5] });
    assert.deepEqual(parseJsonExact(String.raw`{"q":"\"1e999\\\"","n":1}`), { q: String.raw`"1e999\"`, n: 1 });
  });

  it('fingerprints bodies that differ past a double apart, and the same value however it is written alike', () => {
    const fpText = (text: string) => fpOf(parseJsonExact(text));
    assert.notEqual(fpText('{"amount":9007199254740993}'), fpText('{"amount":9007199254740992}'));
    assert.notEqual(fpText('{"rate":0.12345678901234567891}'), fpText('{"rate":0.12345678901234567899}'));
    assert.notEqual(fpText('{"x":1e400}'), fpText('{"x":1e401}'));
    assert.notEqual(fpText('{"x":1e-400}'), fpText('{"x":0}'));
    assert.equal(fpText('{"amount":9007199254740993}'), fpText('{"amount":9007199254740993}'));
    assert.equal(fpText('{"amount":9007199254740993}'), fpText('{"amount":9007199254740993.000}'));
    assert.equal(fpText('{"amount":90071992547409930e-1}'), fpText('{"amount":9007199254740993}'));
    // An exact number is written as before (records made before keep matching): 1.50 is 1.5.
    assert.equal(fpText('{"a":1.50,"b":1234567890123456}'), fpOf({ a: 1.5, b: 1234567890123456 }));
    // A string that looks like a number is still a string.
    assert.notEqual(fpText('{"amount":"9007199254740993"}'), fpText('{"amount":9007199254740993}'));
    // Under include pointers too, and as a whole body.
    const selection = { include: ['/amount'], exclude: [] };
    assert.notEqual(fpOf(parseJsonExact('{"amount":9007199254740993,"n":1}'), selection), fpOf(parseJsonExact('{"amount":9007199254740992,"n":1}'), selection));
    assert.notEqual(fpOf(parseJsonExact('9007199254740993'), selection), fpOf(parseJsonExact('9007199254740992'), selection));
    // A number text is a leaf: pointers do not reach into it.
    assert.deepEqual(selectFields(parseJsonExact('{"amount":9007199254740993}'), { include: ['/amount/text'], exclude: [] }), {});
  });

  it('takes time linear in a number\'s length: a 1 MiB number is parsed and fingerprinted like any body', () => {
    // A regex that stripped trailing zeros retried from every zero of an inner run: a 150 KB body held a server's
    // event loop for 25 s before the guard had looked at the key (quadratic; 1 MiB would take about 20 minutes).
    // Here the four shapes take well under a second each; the quadratic code runs into the suite's timeout.
    const zeros = '0'.repeat(1 << 20);
    for (const [text, other] of [
      [`{"a":0.1${zeros}1}`, `{"a":0.1${zeros}2}`],
      [`{"a":1${zeros}1}`, `{"a":1${zeros}2}`],
      [`{"a":1.5e-${zeros}3}`, `{"a":1.5e-${zeros}4}`],
      [`{"a":1${zeros}}`, `{"a":2${zeros}}`],
    ] as const) {
      const parsed = parseJsonExact(text) as { a: unknown };
      assert.ok(parsed.a instanceof JsonNumberText || typeof parsed.a === 'number');
      assert.notEqual(fpOf(parsed), fpOf(parseJsonExact(other)), text.slice(0, 12));
    }
  });

  it('bigints (a lossless JSON parser), NaN, Infinity, Dates, Maps and Sets neither throw nor collapse', () => {
    assert.equal(fpOf({ amount: 9007199254740993n }), fpOf(parseJsonExact('{"amount":9007199254740993}')), 'a bigint is its number, as the text path takes it');
    assert.notEqual(fpOf({ amount: 9007199254740993n }), fpOf({ amount: 9007199254740992n }));
    assert.equal(fpOf({ amount: 10n }), fpOf({ amount: 10 }));
    assert.notEqual(fpOf({ x: Infinity }), fpOf({ x: -Infinity }));
    assert.notEqual(fpOf({ x: Number.NaN }), fpOf({ x: null }));
    assert.notEqual(fpOf({ x: Infinity }), fpOf({ x: 'Infinity' }));
    assert.equal(fpOf({ at: new Date('2026-12-02T00:00:00Z') }), fpOf({ at: '2026-12-02T00:00:00.000Z' }), 'a reviver’s Date is its JSON text');
    assert.notEqual(fpOf({ at: new Date('2026-12-02T00:00:00Z') }), fpOf({ at: new Date('2026-12-03T00:00:00Z') }));
    assert.notEqual(fpOf({ m: new Map([['a', 1]]) }), fpOf({ m: new Map([['a', 2]]) }));
    assert.notEqual(fpOf({ m: new Map() }), fpOf({ m: {} }));
    assert.notEqual(fpOf({ s: new Set([1]) }), fpOf({ s: [1] }));
    assert.match(computeRecordId([['path', 'n', 5n]], 'op', 'k'), /^[0-9a-f]{64}$/);
    // canonicalJson stays RFC 8785: it refuses them.
    assert.throws(() => canonicalJson({ amount: 1n }), CanonicalJsonError);
  });
});
