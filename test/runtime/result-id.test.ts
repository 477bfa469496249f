import assert from 'node:assert/strict';
import { resultIdOf, wrapperMembers } from '../../src/runtime/result-id.js';

describe('result id', () => {
  it('reads the id of the body, of its envelope, or of the one resource beside metadata', () => {
    assert.equal(resultIdOf({ id: 'py_1' }), 'py_1');
    assert.equal(resultIdOf({ data: { id: 7 } }), '7');
    assert.equal(resultIdOf({ payments: { id: 'PM1' }, links: {} }), 'PM1');
  });

  it('compares envelope and metadata names without case, and counts errors/warnings lists as metadata', () => {
    // UK Open Banking: {Data, Links, Meta}; Square: {errors, refund}.
    assert.deepEqual(wrapperMembers(['Data', 'Links', 'Meta']), ['Data']);
    assert.equal(resultIdOf({ Data: { id: 'c-1', ConsentId: 'c-1' }, Links: { Self: 'x' }, Meta: {} }), 'c-1');
    assert.equal(resultIdOf({ errors: [], refund: { id: 'R1' } }), 'R1');
    assert.equal(resultIdOf({ refund: { id: 'R1' }, warnings: [] }), 'R1');
  });

  it('names no result when two resources stand side by side', () => {
    assert.deepEqual(wrapperMembers(['payout', 'customer']), []);
    assert.equal(resultIdOf({ payout: { id: 'a' }, customer: { id: 'b' } }), undefined);
  });
});
