import assert from 'node:assert/strict';
import { buildRequest } from '../../src/runtime/client/request.js';
import { clientBase, mergeQuery, operationBaseUrl } from '../../src/runtime/client/server.js';

/** The URL a client sends an operation to: the client's base URL, or the operation's own server's. */
const urlOf = (server: string, baseUrl: string | undefined, own?: string, operationServers?: Record<string, string>): string => {
  const base = clientBase(server, baseUrl, operationServers);
  return own === undefined ? base.url : operationBaseUrl(base, 'op', own);
};

const isTypeError = (pattern: RegExp) => (error: unknown) => error instanceof TypeError && pattern.test(error.message);

describe('client base URL', () => {
  it("an absolute server URL is the default; a caller's baseUrl replaces it whole", () => {
    assert.equal(urlOf('https://api.example.com/v1', undefined), 'https://api.example.com/v1');
    assert.equal(urlOf('https://api.example.com/v1', 'http://127.0.0.1:8080/v1/'), 'http://127.0.0.1:8080/v1');
    // A mock server that serves the paths at its root: the caller says so.
    assert.equal(urlOf('https://api.example.com/v1', 'http://127.0.0.1:4010'), 'http://127.0.0.1:4010');
  });

  it("a server given as a path is added to the caller's baseUrl once, whether or not baseUrl already ends with it", () => {
    assert.equal(urlOf('/v1', 'https://api.example.com'), 'https://api.example.com/v1');
    assert.equal(urlOf('/v1', 'https://api.example.com/'), 'https://api.example.com/v1');
    assert.equal(urlOf('/v1', 'https://api.example.com/v1'), 'https://api.example.com/v1');
    assert.equal(urlOf('/v1', 'https://proxy.example.com/gateway'), 'https://proxy.example.com/gateway/v1');
    // Whole segments only: `/xv1` does not end with the segment `/v1`.
    assert.equal(urlOf('/v1', 'https://api.example.com/xv1'), 'https://api.example.com/xv1/v1');
    assert.equal(urlOf('/open-banking/v2.1', 'https://h.example/open-banking/v2.1'), 'https://h.example/open-banking/v2.1');
    assert.equal(urlOf('/api/v1', 'https://h.example/gw/api/v1/'), 'https://h.example/gw/api/v1');
    // No servers in the document (`/`): baseUrl is the whole prefix.
    assert.equal(urlOf('/', 'http://127.0.0.1:8080/api/'), 'http://127.0.0.1:8080/api');
    // A browser page may give a relative base.
    assert.equal(urlOf('/v1', ''), '/v1');
    assert.equal(urlOf('/v1', '/api'), '/api/v1');
  });

  it("a baseUrl ending with only the start of a multi-segment document path is refused, naming both ways to write it (was /api/api/v1)", () => {
    assert.throws(
      () => urlOf('/api/v1', 'https://host.example/api'),
      isTypeError(/baseUrl "https:\/\/host\.example\/api" ends with "\/api", only the start of the document's path "\/api\/v1": pass the server's URL without it \("https:\/\/host\.example"\), or with the whole path \("https:\/\/host\.example\/api\/v1"; "https:\/\/host\.example\/api\/api\/v1" if the API is mounted under "\/api"\)/),
    );
    assert.throws(() => urlOf('/a/b/c', 'https://host.example/x/a/b'), isTypeError(/ends with "\/a\/b", only the start of the document's path "\/a\/b\/c"/));
    // Both ways the message names work.
    assert.equal(urlOf('/api/v1', 'https://host.example'), 'https://host.example/api/v1');
    assert.equal(urlOf('/api/v1', 'https://host.example/api/api/v1'), 'https://host.example/api/api/v1');
    // An absolute document server is replaced whole: nothing is added, so nothing to guess.
    assert.equal(urlOf('https://api.example.com/api/v1', 'http://127.0.0.1:8080/api'), 'http://127.0.0.1:8080/api');
  });

  it('a server given as a path without a baseUrl fails loudly, naming the path', () => {
    assert.throws(() => clientBase('/v1', undefined), isTypeError(/gives only the path "\/v1".*pass baseUrl/));
  });

  it('a baseUrl that cannot be a server URL is a TypeError, not a request to somewhere else', () => {
    assert.throws(() => clientBase('/v1', 'localhost:8080'), isTypeError(/baseUrl "localhost:8080" is not an http\(s\) URL or a path: write it with http:\/\//));
    // A host written without a scheme would be fetched as a path relative to the page (or fail in Node).
    for (const host of ['api.example.com', 'localhost', 'api.example.com/v1']) {
      assert.throws(() => clientBase('/v1', host), isTypeError(/is neither an http\(s\) URL nor a path from the root: write it with https:\/\//), host);
    }
    assert.equal(clientBase('/v1', './api').url, './api/v1');
    assert.throws(() => clientBase('/v1', 'https://api.example.com/#top'), isTypeError(/has a fragment/));
    assert.throws(() => clientBase('/v1', 'https://user:secret@api.example.com'), (error: unknown) => error instanceof TypeError && /credentials/.test(error.message) && !error.message.includes('secret'));
    assert.throws(() => clientBase('/v1', 'http://'), isTypeError(/is not a valid URL/));
    assert.throws(() => clientBase('https://a.example', undefined, { upload: 'ftp://files.example' }), isTypeError(/operationServers\.upload "ftp:\/\/files\.example" is not an http\(s\) URL/));
  });

  it("a query in the server URL is kept on every request; a query in baseUrl is split off before the path, not pasted into it", () => {
    assert.equal(urlOf('https://api.example.com/v1?api-version=2024-01-01', undefined), 'https://api.example.com/v1?api-version=2024-01-01');
    assert.equal(urlOf('/v1', 'https://fn.example.net?code=KEY'), 'https://fn.example.net/v1?code=KEY');
    assert.equal(urlOf('/v1', 'https://fn.example.net/v1/?code=KEY'), 'https://fn.example.net/v1?code=KEY');
    // Both: the server's query, then the caller's; the caller's value wins for the same name.
    assert.equal(urlOf('/v1?api-version=1&x=a', 'https://h.example?code=K&x=b'), 'https://h.example/v1?api-version=1&code=K&x=b');
    // An absolute server replaced by baseUrl keeps its query (it is part of the API, not of where it is).
    assert.equal(urlOf('https://api.example.com/v1?api-version=2024-01-01', 'http://127.0.0.1:8080/v1'), 'http://127.0.0.1:8080/v1?api-version=2024-01-01');
    const request = buildRequest(urlOf('/v1?api-version=1', 'https://h.example?code=K'), 'GET', '/orders/{id}', { path: { id: 'a b' }, query: { limit: 5 } });
    assert.equal(request.url, 'https://h.example/v1/orders/a%20b?api-version=1&code=K&limit=5');
  });

  it("a query parameter the call sets replaces the base URL's pair of the same name; the others stay", () => {
    assert.equal(buildRequest('https://h.example/v1?api-version=1&code=K', 'GET', '/x', { query: { 'api-version': '2' } }).url, 'https://h.example/v1/x?code=K&api-version=2');
    assert.equal(buildRequest('https://h.example/v1?api-version=1', 'GET', '/x', { query: { 'api-version': undefined } }).url, 'https://h.example/v1/x?api-version=1');
    assert.deepEqual(mergeQuery(['a=1', 'a=2', 'b=1'], ['c=1'], ['a=3', 'a=4']), ['b=1', 'c=1', 'a=3', 'a=4']);
    assert.deepEqual(mergeQuery(['api%2Dversion=1'], ['api-version=2']), ['api-version=2']);
  });

  it("an operation's own server: a path replaces the document's path, under baseUrl when given; an absolute one is used as is unless baseUrl moved the whole API", () => {
    // The document's server is only a path.
    assert.equal(urlOf('/v1', 'https://api.example.com', '/v2'), 'https://api.example.com/v2');
    assert.equal(urlOf('/v1', 'https://api.example.com/v1/', '/v2'), 'https://api.example.com/v2');
    assert.equal(urlOf('/v1', 'https://gw.example.com/mount', '/v2'), 'https://gw.example.com/mount/v2');
    assert.equal(urlOf('/v1', '', '/v2'), '/v2');
    assert.equal(urlOf('/v1', 'https://api.example.com/v1', 'https://uploads.example.com'), 'https://uploads.example.com');
    // The document's server is absolute.
    assert.equal(urlOf('https://api.example.com/v1', undefined, '/uploads'), 'https://api.example.com/uploads');
    assert.equal(urlOf('https://api.example.com/v1', 'http://127.0.0.1:9/v1', '/uploads'), 'http://127.0.0.1:9/uploads');
    assert.equal(urlOf('https://api.example.com/v1', 'http://127.0.0.1:9', '/uploads'), 'http://127.0.0.1:9/uploads');
    assert.equal(urlOf('https://api.example.com/v1', undefined, 'https://uploads.example.com'), 'https://uploads.example.com');
    // A baseUrl given for a document with an absolute server moves the whole API (a local mock in tests): an
    // operation's absolute server moves with it, its path kept, so nothing reaches the real upload host.
    assert.equal(urlOf('https://api.example.com/v1', 'http://127.0.0.1:9/v1', 'https://uploads.example.com'), 'http://127.0.0.1:9');
    assert.equal(urlOf('https://api.example.com/v1', 'http://127.0.0.1:9', 'https://uploads.example.com/blobs?sv=3'), 'http://127.0.0.1:9/blobs?sv=3');
    // A baseUrl on the documented server's origin moves nothing else; a default port or a non-ASCII host keeps the path.
    assert.equal(urlOf('https://api.example.com/v1', 'https://api.example.com/v1?code=K', 'https://uploads.example.com/u1'), 'https://uploads.example.com/u1');
    assert.equal(urlOf('https://api.example.com/v1', 'http://localhost:3000', 'https://uploads.example.com:443/u1'), 'http://localhost:3000/u1');
    assert.equal(urlOf('https://api.example.com/v1', 'http://localhost:3000', 'https://bücher.example/u1'), 'http://localhost:3000/u1');
    assert.equal(urlOf('https://api.example.com:443/v1', 'https://api.example.com', '/v2'), 'https://api.example.com/v2');
    // Queries: the operation server's own, and baseUrl's for a path on the same host; never baseUrl's for another host.
    assert.equal(urlOf('/v1?api-version=1', 'https://h.example?code=K', '/v2?api-version=2'), 'https://h.example/v2?api-version=2&code=K');
    assert.equal(urlOf('/v1', 'https://h.example?code=K', 'https://uploads.example.com?sv=3'), 'https://uploads.example.com?sv=3');
    // operationServers sends it elsewhere, used as is.
    assert.equal(urlOf('/v1', 'https://h.example', 'https://uploads.example.com', { op: 'http://127.0.0.1:9/up/' }), 'http://127.0.0.1:9/up');
    assert.equal(urlOf('/v1', 'https://h.example', '/v2', { other: 'http://127.0.0.1:9' }), 'https://h.example/v2');
  });

  it('buildRequest puts one `/` between the base URL and a path written without one', () => {
    assert.equal(buildRequest('https://h.example/open-banking/v2.1', 'GET', 'business-current-accounts/{id}', { path: { id: 'a' } }).url, 'https://h.example/open-banking/v2.1/business-current-accounts/a');
    assert.equal(buildRequest('https://h.example/v1/', 'GET', 'x', {}).url, 'https://h.example/v1/x');
    assert.equal(buildRequest('https://h.example/v1/', 'GET', '/x', {}).url, 'https://h.example/v1/x');
  });
});
