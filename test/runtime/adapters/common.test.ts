import assert from 'node:assert/strict';
import { concatBytes, headersFromEntries, nodeHeaders, queryFromSearchParams, readsQuery, singleHeader } from '../../../src/runtime/adapters/common.js';
import { contract } from './fixtures.js';

describe('runtime/adapters/common', () => {
  it('keeps a header sent several times as several values', () => {
    const headers = headersFromEntries([
      ['Idempotency-Key', 'a'],
      ['idempotency-key', ['b']],
      ['X-One', ['1']],
      ['x-none', undefined],
    ]);
    assert.deepEqual(headers, { 'idempotency-key': ['a', 'b'], 'x-one': '1' });
    assert.equal(singleHeader(headers, 'X-One'), '1');
    assert.equal(singleHeader(headers, 'idempotency-key'), undefined);
  });

  it("takes Node's joined headers but the key header's distinct values", () => {
    const joined = { 'idempotency-key': 'a, b', 'x-user': 'u' };
    assert.deepEqual(nodeHeaders(joined, () => ({ 'idempotency-key': ['a', 'b'], 'x-user': ['u'] }), 'idempotency-key'), { 'idempotency-key': ['a', 'b'], 'x-user': 'u' });
    // One value with a comma in it stays one (invalid) value.
    assert.deepEqual(nodeHeaders({ 'idempotency-key': 'a,b' }, () => ({ 'idempotency-key': ['a,b'] }), 'idempotency-key'), { 'idempotency-key': 'a,b' });
    assert.deepEqual(
      nodeHeaders({ 'idempotency-key': 'a' }, () => assert.fail('only asked when the value may be several'), 'idempotency-key'),
      { 'idempotency-key': 'a' },
    );
  });

  it('parses the query only when the contract reads it', () => {
    assert.equal(readsQuery(contract), true);
    assert.equal(readsQuery({ ...contract, fingerprint: { ...contract.fingerprint, query: [] } }), false);
    assert.equal(readsQuery({ ...contract, fingerprint: { ...contract.fingerprint, query: [] }, scope: [{ kind: 'query', name: 'tenant' }] }), true);
    assert.deepEqual(queryFromSearchParams(new URLSearchParams('a=1&b=2&a=3&c=')), { a: ['1', '3'], b: '2', c: '' });
  });

  it('concatenates byte chunks', () => {
    assert.deepEqual([...concatBytes([Uint8Array.of(1, 2), new Uint8Array(0), Uint8Array.of(3)])], [1, 2, 3]);
  });
});
