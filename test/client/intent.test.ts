import assert from 'node:assert/strict';
import { Intent } from '../../src/runtime/client/intent.js';

describe('client Intent', () => {
  it('makes one random UUID key before any attempt, and a deadline that starts with the first attempt', () => {
    const a = Intent.create({ operationId: 'op', deadlineMs: 30_000, now: 1_000 });
    const b = Intent.create({ operationId: 'op', deadlineMs: 30_000, now: 1_000 });
    assert.match(a.key, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    assert.notEqual(a.key, b.key);
    assert.equal(a.attempts, 0);
    assert.equal(a.deadlineAt, undefined);
    assert.equal(a.remainingMs(90_000), 30_000, 'not sent yet: the whole budget');
    a.recordAttempt('req-1', 100_000);
    a.recordAttempt('req-2', 101_000);
    assert.equal(a.firstSentAt, 100_000);
    assert.equal(a.deadlineAt, 130_000);
    assert.equal(a.remainingMs(129_500), 500);
    assert.equal(a.remainingMs(140_000), 0);
  });

  it('makes its key from getRandomValues where randomUUID is missing (a browser page over plain http)', () => {
    const real = Object.getOwnPropertyDescriptor(globalThis, 'crypto')!;
    const webcrypto = globalThis.crypto;
    const insecure = { getRandomValues: (array: Uint8Array): Uint8Array => webcrypto.getRandomValues(array) };
    Object.defineProperty(globalThis, 'crypto', { value: insecure, configurable: true });
    let keys: string[];
    try {
      keys = [1, 2, 3].map(() => Intent.create({ operationId: 'op', deadlineMs: 1, now: 0 }).key);
    } finally {
      Object.defineProperty(globalThis, 'crypto', real);
    }
    for (const key of keys) assert.match(key, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    assert.equal(new Set(keys).size, 3);
  });

  it('reads an intent saved by an earlier version (deadline from creation) with the same key and deadline', () => {
    const sent = Intent.fromJSON({ v: 1, operationId: 'op', key: 'k', createdAt: 1_000, deadlineAt: 31_000, requestIds: ['req-1'] });
    assert.equal(sent.key, 'k');
    assert.equal(sent.deadlineAt, 31_000);
    assert.deepEqual(sent.requestIds, ['req-1']);
    const unsent = Intent.fromJSON({ v: 1, operationId: 'op', key: 'k', createdAt: 1_000, deadlineAt: 31_000, requestIds: [] });
    assert.equal(unsent.remainingMs(500_000), 30_000);
  });

  it('survives a reload through JSON with the same key, deadline and attempts', () => {
    const a = Intent.create({ operationId: 'createDemoRequest', deadlineMs: 5_000, now: 10, key: 'demo-key-retry-2020-06-a7f1' });
    a.recordAttempt('req-51', 20);
    const text = JSON.stringify(a);
    const b = Intent.fromJSON(text);
    assert.deepEqual(b.toJSON(), a.toJSON());
    assert.equal(b.key, 'demo-key-retry-2020-06-a7f1');
    assert.deepEqual(b.requestIds, ['req-51']);
    assert.equal(b.deadlineAt, 5_020);
    assert.deepEqual(Intent.fromJSON(JSON.parse(text)).toJSON(), a.toJSON());
  });

  it('does not expose its attempt list for mutation', () => {
    const a = Intent.create({ operationId: 'op', deadlineMs: 1, now: 0 });
    (a.requestIds as string[]).push('x');
    assert.equal(a.attempts, 0);
  });

  it('rejects anything that is not a serialised intent', () => {
    for (const bad of [null, 1, '{}', { v: 2, operationId: 'op', key: 'k', createdAt: 0, deadlineAt: 1, requestIds: [] },
      { v: 1, operationId: 'op', key: '', createdAt: 0, deadlineAt: 1, requestIds: [] },
      { v: 1, operationId: 'op', key: 'k', createdAt: 0, deadlineAt: 1, requestIds: [3] },
      { v: 2, operationId: 'op', key: 'k', createdAt: 0, deadlineMs: -1, requestIds: [] },
      // Sent, but without the time of its first attempt: its deadline is unknown.
      { v: 2, operationId: 'op', key: 'k', createdAt: 0, deadlineMs: 1, requestIds: ['req-1'] }]) {
      assert.throws(() => Intent.fromJSON(bad), TypeError);
    }
  });
});
