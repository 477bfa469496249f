import assert from 'node:assert/strict';
import { buildRequest } from '../../src/runtime/client/request.js';
import { baseUrlOf, operationBaseUrl } from '../../src/runtime/client/server.js';

describe('client base URL', () => {
  it("an absolute server URL is the default; a caller's baseUrl replaces it whole", () => {
    assert.equal(baseUrlOf('https://api.example.com/v1', undefined), 'https://api.example.com/v1');
    assert.equal(baseUrlOf('https://api.example.com/v1', 'http://127.0.0.1:8080/v1/'), 'http://127.0.0.1:8080/v1');
    // A mock server that serves the paths at its root: the caller says so.
    assert.equal(baseUrlOf('https://api.example.com/v1', 'http://127.0.0.1:4010'), 'http://127.0.0.1:4010');
  });

  it("a server given as a path is added to the caller's baseUrl once, whether or not baseUrl already ends with it", () => {
    assert.equal(baseUrlOf('/v1', 'https://api.example.com'), 'https://api.example.com/v1');
    assert.equal(baseUrlOf('/v1', 'https://api.example.com/'), 'https://api.example.com/v1');
    assert.equal(baseUrlOf('/v1', 'https://api.example.com/v1'), 'https://api.example.com/v1');
    assert.equal(baseUrlOf('/v1', 'https://proxy.example.com/gateway'), 'https://proxy.example.com/gateway/v1');
    // Whole segments only: `/xv1` does not end with the segment `/v1`.
    assert.equal(baseUrlOf('/v1', 'https://api.example.com/xv1'), 'https://api.example.com/xv1/v1');
    assert.equal(baseUrlOf('/open-banking/v2.1', 'https://h.example/open-banking/v2.1'), 'https://h.example/open-banking/v2.1');
    // No servers in the document (`/`): baseUrl is the whole prefix.
    assert.equal(baseUrlOf('/', 'http://127.0.0.1:8080/api/'), 'http://127.0.0.1:8080/api');
    // A browser page may give a relative base.
    assert.equal(baseUrlOf('/v1', ''), '/v1');
  });

  it('a server given as a path without a baseUrl fails loudly, naming the path', () => {
    assert.throws(() => baseUrlOf('/v1', undefined), (error: unknown) => error instanceof TypeError && /gives only the path "\/v1".*pass baseUrl/.test(error.message));
  });

  it("an operation's own server: the caller's baseUrl wins, else an absolute one, else a path resolved against the client's base", () => {
    assert.equal(operationBaseUrl('https://uploads.example.com/', undefined, 'https://api.example.com/v1'), 'https://uploads.example.com');
    assert.equal(operationBaseUrl('https://uploads.example.com', 'http://127.0.0.1:9/v1', 'http://127.0.0.1:9/v1'), 'http://127.0.0.1:9/v1');
    assert.equal(operationBaseUrl('/uploads', undefined, 'https://api.example.com/v1'), 'https://api.example.com/uploads');
    assert.equal(operationBaseUrl('/uploads', undefined, '/v1'), '/uploads');
  });

  it('buildRequest puts one `/` between the base URL and a path written without one', () => {
    assert.equal(buildRequest('https://h.example/open-banking/v2.1', 'GET', 'business-current-accounts/{id}', { path: { id: 'a' } }).url, 'https://h.example/open-banking/v2.1/business-current-accounts/a');
    assert.equal(buildRequest('https://h.example/v1/', 'GET', 'x', {}).url, 'https://h.example/v1/x');
    assert.equal(buildRequest('https://h.example/v1/', 'GET', '/x', {}).url, 'https://h.example/v1/x');
  });
});
