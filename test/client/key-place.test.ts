import assert from 'node:assert/strict';
import type { CompiledContract } from '../../src/runtime/contract.js';
import { keyGiven, withIntentKey } from '../../src/runtime/client/key-place.js';
import { fittingKey } from '../../src/runtime/client/intent.js';

const place = (where: CompiledContract['key']['in'], name: string): CompiledContract['key'] => ({ in: where, name, required: true, maxLength: 255 });

describe('runtime/client/key-place: a key in the query or the body', () => {
  it('writes the intent\'s key into the body at the pointer, nested objects made, the caller\'s objects untouched', () => {
    const body = { payment: { amount: 100 }, note: 'n' };
    const parts = { body };
    const sent = withIntentKey(place('body', '/payment/idempotency_key'), parts, 'k-1');
    assert.deepEqual(sent.body, { payment: { amount: 100, idempotency_key: 'k-1' }, note: 'n' });
    assert.deepEqual(body, { payment: { amount: 100 }, note: 'n' }, 'the caller\'s body is not changed');
    assert.deepEqual(withIntentKey(place('body', '/meta/token'), {}, 'k-2').body, { meta: { token: 'k-2' } });
    assert.deepEqual(withIntentKey(place('body', '/a~1b~0c'), { body: {} }, 'k-3').body, { 'a/b~c': 'k-3' });
  });

  it('keeps __proto__ a plain field when it is on the way to the key', () => {
    const body = JSON.parse('{"__proto__": {"x": 1}}') as Record<string, unknown>;
    const sent = withIntentKey(place('body', '/__proto__/token'), { body }, 'k') as { body: Record<string, unknown> };
    assert.deepEqual(Object.getOwnPropertyDescriptor(sent.body, '__proto__')?.value, { x: 1, token: 'k' });
    assert.equal(({} as Record<string, unknown>)['token'], undefined, 'Object.prototype untouched');
  });

  it('reads a key the caller wrote, so the intent can adopt it; refuses a non-string there', () => {
    assert.equal(keyGiven(place('body', '/ClientToken'), { body: { ClientToken: 'mine' } }), 'mine');
    assert.equal(keyGiven(place('body', '/ClientToken'), { body: { other: 1 } }), undefined);
    assert.equal(keyGiven(place('query', 'requestId'), { query: { requestId: 'q-1' } }), 'q-1');
    assert.equal(keyGiven(place('header', 'Idempotency-Key'), { headers: { 'Idempotency-Key': 'h' } }), 'h', 'a key header the caller set');
    assert.throws(() => keyGiven(place('body', '/ClientToken'), { body: { ClientToken: 7 } }), /body field \/ClientToken holds the idempotency key: it must be a string/);
  });

  it('sets the query parameter, and refuses a caller\'s other key rather than send two keys for one intent', () => {
    assert.deepEqual(withIntentKey(place('query', 'requestId'), { query: { page: 2 } }, 'q-9').query, { page: 2, requestId: 'q-9' });
    assert.throws(() => withIntentKey(place('query', 'requestId'), { query: { requestId: 'other' } }, 'q-9'), TypeError);
    assert.throws(() => withIntentKey(place('body', '/ClientToken'), { body: { ClientToken: 'other' } }, 'q-9'), /another key than the intent's/);
    assert.deepEqual(withIntentKey(place('body', '/ClientToken'), { body: { ClientToken: 'q-9' } }, 'q-9').body, { ClientToken: 'q-9' });
  });

  it('refuses a null on the way to the key rather than send an object where the caller sent null', () => {
    assert.throws(() => withIntentKey(place('body', '/payment/idempotency_key'), { body: { payment: null } }, 'k'), /the body field \/payment is null, so it cannot carry the idempotency key at \/payment\/idempotency_key/);
    assert.throws(() => withIntentKey(place('body', '/a~1b/c/key'), { body: { 'a/b': { c: null } } }, 'k'), /the body field \/a~1b\/c is null/);
    assert.throws(() => withIntentKey(place('body', '/ClientToken'), { body: null }, 'k'), /the body is null/);
    assert.deepEqual(withIntentKey(place('body', '/payment/idempotency_key'), { body: { payment: undefined } }, 'k').body, { payment: { idempotency_key: 'k' } }, 'an absent object is made');
  });

  it('refuses a body (or an object on the way to the key) with its own toJSON: JSON.stringify would send what it returns, without the key', () => {
    const serialised = { amount: 1, toJSON: () => ({ amount: 1 }) };
    assert.throws(() => withIntentKey(place('body', '/idempotency_key'), { body: serialised }, 'k'), /^TypeError: the body has its own toJSON, which decides what is sent, so the idempotency key at \/idempotency_key would not be/);
    assert.throws(() => withIntentKey(place('body', '/payment/key'), { body: { payment: serialised } }, 'k'), /the body field \/payment has its own toJSON/);
    assert.deepEqual(withIntentKey(place('body', '/payment/key'), { body: { payment: { amount: 1 }, meta: serialised } }, 'k').body, { payment: { amount: 1, key: 'k' }, meta: serialised }, 'off the way to the key: sent as it is');
  });

  it('refuses a body that is not an object of fields (a string, an array, a Blob) for a body key', () => {
    for (const body of ['text', [1], new Blob(['x'])]) {
      assert.throws(() => withIntentKey(place('body', '/ClientToken'), { body }, 'k'), /must be an object of fields/);
    }
  });

  it('refuses a key that is not well-formed text or holds U+FFFD: sent, it would be one key with another', () => {
    assert.throws(() => keyGiven(place('body', '/ClientToken'), { body: { ClientToken: 'x\ud800' } }), /lone surrogate/);
    assert.throws(() => withIntentKey(place('query', 'requestId'), {}, 'x\ufffd'), /U\+FFFD/);
    assert.equal(keyGiven(place('body', '/ClientToken'), { body: { ClientToken: 'ключ-🔑' } }), 'ключ-🔑', 'a surrogate pair is well-formed');
    // What the server refuses anyway is refused before anything is sent: a control character, a %FF left in the text.
    assert.throws(() => withIntentKey(place('body', '/ClientToken'), {}, 'k\n1'), /control characters/);
    assert.throws(() => withIntentKey(place('query', 'requestId'), {}, 'k%FF'), /percent-escape that is not UTF-8/);
  });

  it('refuses an Idempotency-Key header on a call keyed in its body or query: it would count for nothing', () => {
    assert.throws(() => withIntentKey(place('body', '/ClientToken'), { headers: { 'Idempotency-Key': 'k' }, body: {} }, 'k'), /the header Idempotency-Key counts for nothing/);
    assert.throws(() => withIntentKey(place('query', 'requestId'), { headers: { 'x-idempotency-key': 'k' } }, 'k'), TypeError);
    assert.deepEqual(withIntentKey(place('query', 'requestId'), { headers: { 'X-Request-Id': 'r' } }, 'k').query, { requestId: 'k' });
  });

  it('adopts a key header the caller set (any letter case) as the intent\'s, and refuses another than a given intent\'s', () => {
    const header = place('header', 'Idempotency-Key');
    assert.equal(keyGiven(header, { headers: { 'idempotency-key': ' order-42 ' } }), 'order-42', 'as fetch sends it: trimmed');
    assert.equal(keyGiven(header, { headers: { Accept: 'application/json' } }), undefined);
    assert.throws(() => keyGiven(header, { headers: { 'Idempotency-Key': 42 } }), /the Idempotency-Key header holds the idempotency key: it must be a non-empty string/);
    assert.throws(() => keyGiven(header, { headers: { 'Idempotency-Key': '  ' } }), /non-empty string/);
    const parts = { headers: { 'IDEMPOTENCY-KEY': 'order-42' } };
    assert.equal(withIntentKey(header, parts, 'order-42'), parts);
    assert.throws(() => withIntentKey(header, parts, 'other'), /the Idempotency-Key header holds another key than the intent's/);
  });

  it('leaves the parts of a header-keyed call as they are', () => {
    const parts = { body: { a: 1 } };
    assert.equal(withIntentKey(place('header', 'Idempotency-Key'), parts, 'k'), parts);
  });
});

describe('runtime/client: keys the contract\'s server takes', () => {
  it('refuses, before anything is sent, a body or query key longer than the contract allows or off its pattern (the server would answer 400)', () => {
    const bounded = { ...place('body', '/idempotency_key'), maxLength: 64 };
    assert.throws(() => withIntentKey(bounded, { body: {} }, 'k'.repeat(100)), /the idempotency key for the body field \/idempotency_key is refused by the server: the key is longer than 64 characters/);
    const patterned = { ...place('query', 'requestId'), pattern: '[a-f0-9]+' };
    assert.throws(() => withIntentKey(patterned, {}, 'NOT-HEX'), /the query parameter "requestId" is refused by the server: the key does not match the documented pattern/);
    assert.deepEqual(withIntentKey(patterned, {}, 'abc123').query, { requestId: 'abc123' });
  });

  it('makes a UUID key, or its 32 hex digits when the pattern or bound refuses dashes; a UUID when nothing fits', () => {
    assert.match(fittingKey({ maxLength: 255 }), /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    // The client review's: `^[A-Za-z0-9]+$` made every call of the generated client end rejected/invalid-key.
    assert.match(fittingKey({ maxLength: 255, pattern: '^[A-Za-z0-9]+$' }), /^[0-9a-f]{32}$/);
    assert.match(fittingKey({ maxLength: 32 }), /^[0-9a-f]{32}$/);
    assert.match(fittingKey({ maxLength: 255, pattern: '[0-9]+' }), /^[0-9a-f]{8}-/);
  });
});
