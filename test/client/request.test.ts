import assert from 'node:assert/strict';
import { buildRequest } from '../../src/runtime/client/request.js';

describe('client buildRequest', () => {
  it('fills and encodes path parameters, appends the query, serialises the body as JSON', () => {
    const r = buildRequest('http://127.0.0.1:8080/', 'POST', '/v1/items/{id}/notes', {
      path: { id: 'a b/c' },
      query: { tag: ['x', 'y'], limit: 5, skip: undefined },
      headers: { 'X-Tenant-Id': 't1', 'X-None': undefined },
      body: { topic: 'bundle review' },
    });
    assert.equal(r.url, 'http://127.0.0.1:8080/v1/items/a%20b%2Fc/notes?tag=x&tag=y&limit=5');
    assert.equal(r.method, 'POST');
    assert.equal(r.body, '{"topic":"bundle review"}');
    assert.deepEqual(r.headers, { accept: 'application/json', 'X-Tenant-Id': 't1', 'content-type': 'application/json' });
  });

  it('omits the body when there is none and fails loudly on a missing path parameter', () => {
    const r = buildRequest('http://h', 'GET', '/v1/x', {});
    assert.equal(r.body, undefined);
    assert.equal(r.url, 'http://h/v1/x');
    assert.throws(() => buildRequest('http://h', 'GET', '/v1/{id}', {}), /path parameter "id" is missing/);
  });
});
