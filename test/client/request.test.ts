import assert from 'node:assert/strict';
import type { ParamFormat, ParamInput } from '../../src/runtime/client/params.js';
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

  it('holds each header once whatever its letter case: the last given wins, the encoded content type wins over all', () => {
    const r = buildRequest('http://h', 'POST', '/v1/items', {
      headers: { 'Content-Type': 'text/plain', Accept: 'application/vnd.x+json', 'x-trace': 'a', 'X-Trace': 'b' },
      body: { topic: 't' },
    });
    assert.deepEqual(r.headers, { Accept: 'application/vnd.x+json', 'X-Trace': 'b', 'content-type': 'application/json' });
  });

  it('omits the body when there is none and fails loudly on a missing path parameter', () => {
    const r = buildRequest('http://h', 'GET', '/v1/x', {});
    assert.equal(r.body, undefined);
    assert.equal(r.url, 'http://h/v1/x');
    assert.throws(() => buildRequest('http://h', 'GET', '/v1/{id}', {}), /path parameter "id" is missing/);
    // A parameter named like an Object.prototype member is neither found on the prototype nor formatted by it.
    assert.throws(() => buildRequest('http://h', 'GET', '/v1/{constructor}', { path: {} }), /path parameter "constructor" is missing/);
    assert.equal(buildRequest('http://h', 'GET', '/v1', { query: { constructor: ['a', 'b'], toString: ['c', 'd'] } }).url, 'http://h/v1?constructor=a&constructor=b&toString=c&toString=d');
  });

  it('a path parameter of "." or ".." is a TypeError: the URL would resolve it away and reach another route (was GET /api/)', () => {
    for (const [template, path] of [['/api/orders/{id}', { id: '..' }], ['/api/orders/{id}', { id: '.' }], ['/api/{a}{b}/x', { a: '.', b: '.' }]] as const) {
      assert.throws(() => buildRequest('http://h', 'GET', template, { path }), new TypeError(`a path parameter of ${template} is "." or "..": the URL would resolve it away and reach another path`), template);
    }
    // Dots inside a segment, a value with a slash (encoded), and a template's own dot segments are left alone.
    assert.equal(buildRequest('http://h', 'GET', '/api/orders/{id}', { path: { id: '...' } }).url, 'http://h/api/orders/...');
    assert.equal(buildRequest('http://h', 'GET', '/api/files/{name}.json', { path: { name: '.' } }).url, 'http://h/api/files/..json');
    assert.equal(buildRequest('http://h', 'GET', '/api/orders/{id}', { path: { id: '../x' } }).url, 'http://h/api/orders/..%2Fx');
    assert.equal(buildRequest('http://h', 'GET', '/api/./orders/{id}', { path: { id: 'a' } }).url, 'http://h/api/./orders/a');
  });

  it("never sends a template's fragment, which would take the query with it (AWS's `/#Action=…`, `/lenses/{id}#ClientRequestToken`)", () => {
    const lens = buildRequest('https://wellarchitected.example.com', 'DELETE', '/lenses/{LensAlias}#ClientRequestToken&LensStatus', {
      path: { LensAlias: 'lens 1' },
      query: { ClientRequestToken: 'k-1', LensStatus: 'ALL' },
    });
    assert.equal(lens.url, 'https://wellarchitected.example.com/lenses/lens%201?ClientRequestToken=k-1&LensStatus=ALL');
    const root = buildRequest('https://ec2.example.com/?v=1', 'POST', '/#Action=DescribeInstances', { query: { Action: 'DescribeInstances' } });
    assert.equal(root.url, 'https://ec2.example.com/?v=1&Action=DescribeInstances');
    assert.equal(buildRequest('http://h', 'GET', '/#X-Amz-Target=Svc.Op', {}).url, 'http://h/');
  });

  it("sends a template's own query with the call's, joined by & and its values percent-encoded, so a value adds no pair", () => {
    const r = buildRequest('http://h/api?key=K', 'GET', '/current/airquality?city={city}&country={country}', {
      path: { city: 'Paris', country: 'FR&x=1?' },
      query: { state: 'IDF' },
    });
    assert.equal(r.url, 'http://h/api/current/airquality?key=K&city=Paris&country=FR%26x%3D1%3F&state=IDF');
    const pairs = [...new URL(r.url).searchParams];
    assert.deepEqual(pairs, [['key', 'K'], ['city', 'Paris'], ['country', 'FR&x=1?'], ['state', 'IDF']]);
    // The call's value of a name the template writes is the one sent.
    assert.equal(buildRequest('http://h', 'GET', '/search?type=all', { query: { type: 'user' } }).url, 'http://h/search?type=user');
    assert.equal(buildRequest('http://h', 'GET', '/search?', {}).url, 'http://h/search');
  });

  it('sends text and bytes as they are for non-JSON media types; bytes are copied, so a retry sends what the call was given', () => {
    const text = buildRequest('http://h', 'POST', '/n', { body: 'plain "text"' }, { mediaType: 'text/plain' });
    assert.equal(text.body, 'plain "text"');
    assert.equal(text.headers['content-type'], 'text/plain');
    const bytes = new Uint8Array([1, 2, 3]);
    const binary = buildRequest('http://h', 'PUT', '/f', { body: bytes }, { mediaType: 'application/octet-stream' });
    bytes[0] = 9;
    assert.ok(binary.body instanceof ArrayBuffer);
    assert.deepEqual([...new Uint8Array(binary.body)], [1, 2, 3]);
    const blob = new Blob(['b']);
    assert.equal(buildRequest('http://h', 'PUT', '/f', { body: blob }, { mediaType: 'image/png' }).body, blob);
    // A JSON media type still gets JSON, a string included.
    assert.equal(buildRequest('http://h', 'POST', '/j', { body: 'x' }, { mediaType: 'application/merge-patch+json' }).body, '"x"');
  });

  it("sends text and bytes with the caller's content type when the document allows it, else a Blob's own, else the document's when concrete, else application/octet-stream", () => {
    const type = (body: unknown, mediaType: string, given?: string): string | undefined =>
      buildRequest('http://h', 'PUT', '/f', { body, headers: given === undefined ? {} : { 'Content-Type': given } }, { mediaType }).headers['content-type'];
    const png = new Blob([new Uint8Array([137, 80, 78, 71])], { type: 'image/png' });
    const bytes = new Uint8Array([1, 2, 3]);
    // A media range is no Content-Type: the caller's concrete type in it, else the Blob's, else octet-stream.
    assert.equal(type(png, 'image/*', 'image/png'), 'image/png');
    assert.equal(type(bytes, 'image/*', 'image/webp'), 'image/webp');
    assert.equal(type(png, 'image/*'), 'image/png');
    assert.equal(type(png, 'image/*', 'image/*'), 'image/png');
    assert.equal(type(png, 'image/*', 'text/plain'), 'image/png');
    assert.equal(type(bytes, 'image/*'), 'application/octet-stream');
    assert.equal(type(new Blob(['x'], { type: 'text/csv' }), 'image/*'), 'application/octet-stream');
    assert.equal(type('a,b', '*/*', 'text/csv'), 'text/csv');
    // application/octet-stream allows any concrete type; another concrete type only itself.
    assert.equal(type(bytes, 'application/octet-stream', 'application/pdf'), 'application/pdf');
    assert.equal(type(new Blob(['%PDF'], { type: 'application/pdf' }), 'application/octet-stream'), 'application/pdf');
    assert.equal(type(bytes, 'application/octet-stream'), 'application/octet-stream');
    assert.equal(type('x', 'text/plain', 'text/plain; charset=utf-8'), 'text/plain; charset=utf-8');
    assert.equal(type('x', 'text/plain', 'text/html'), 'text/plain');
    assert.equal(type(png, 'image/jpeg'), 'image/jpeg');
    // Forms, multipart and JSON keep the document's type (multipart's names its boundary).
    assert.equal(type({ a: 1 }, 'application/json', 'text/plain'), 'application/json');
    assert.equal(type({ a: 1 }, 'application/x-www-form-urlencoded', 'text/plain'), 'application/x-www-form-urlencoded');
    assert.match(type({ a: 1 }, 'multipart/form-data', 'multipart/form-data') ?? '', /^multipart\/form-data; boundary=idemkit-/);
  });

  describe('parameter styles (the OpenAPI 3 style table; Swagger 2.0 collectionFormat maps onto it)', () => {
    const array = ['blue', 'black', 'brown'];
    const object = { R: 100, G: 200, B: 150 };
    const path = (value: unknown, style: ParamFormat['style'], explode: boolean): string =>
      buildRequest('http://h', 'GET', '/{c}', { path: { c: value as ParamInput } }, { params: { path: { c: { style, explode } } } }).url.slice('http://h/'.length);
    const query = (value: unknown, style: ParamFormat['style'], explode: boolean): string =>
      buildRequest('http://h', 'GET', '/', { query: { color: value as ParamInput } }, { params: { query: { color: { style, explode } } } }).url.split('?')[1] ?? '';

    it('path: simple, label and matrix, exploded or not, for scalars, arrays and objects', () => {
      const table: [ParamFormat['style'], boolean, string, string, string][] = [
        ['simple', false, 'blue', 'blue,black,brown', 'R,100,G,200,B,150'],
        ['simple', true, 'blue', 'blue,black,brown', 'R=100,G=200,B=150'],
        ['label', false, '.blue', '.blue,black,brown', '.R,100,G,200,B,150'],
        ['label', true, '.blue', '.blue.black.brown', '.R=100.G=200.B=150'],
        ['matrix', false, ';c=blue', ';c=blue,black,brown', ';c=R,100,G,200,B,150'],
        ['matrix', true, ';c=blue', ';c=blue;c=black;c=brown', ';R=100;G=200;B=150'],
      ];
      for (const [style, explode, scalar, list, pairs] of table) {
        assert.deepEqual([path('blue', style, explode), path(array, style, explode), path(object, style, explode)], [scalar, list, pairs], `${style} explode=${explode}`);
      }
    });

    it('query: form, spaceDelimited, pipeDelimited, tabDelimited and deepObject; values are percent-encoded, separators are not', () => {
      assert.equal(query(array, 'form', true), 'color=blue&color=black&color=brown');
      assert.equal(query(array, 'form', false), 'color=blue,black,brown');
      assert.equal(query(object, 'form', true), 'R=100&G=200&B=150');
      assert.equal(query(object, 'form', false), 'color=R,100,G,200,B,150');
      assert.equal(query(array, 'spaceDelimited', false), 'color=blue%20black%20brown');
      assert.equal(query(array, 'pipeDelimited', false), 'color=blue|black|brown');
      assert.equal(query(array, 'tabDelimited', false), 'color=blue%09black%09brown');
      assert.equal(query(array, 'pipeDelimited', true), 'color=blue&color=black&color=brown');
      assert.equal(query(object, 'deepObject', true), 'color[R]=100&color[G]=200&color[B]=150');
      assert.equal(query(['a,b', 'c d', 'e|f&g'], 'form', false), 'color=a%2Cb,c%20d,e%7Cf%26g');
      assert.equal(query('a b+c', 'form', true), 'color=a%20b%2Bc');
    });

    it('empty lists and null members are left out; headers are not percent-encoded', () => {
      assert.equal(query([], 'form', false), '');
      assert.equal(query(['a', null, 'b'], 'form', false), 'color=a,b');
      assert.equal(query({ a: 1, b: null }, 'form', true), 'a=1');
      const r = buildRequest('http://h', 'GET', '/', { headers: { 'X-List': ['a b', 'c'], 'X-Tabs': ['a', 'b'], 'X-Obj': { k: 'v w' } } }, {
        params: { headers: { 'X-Tabs': { style: 'tabDelimited', explode: false }, 'X-Obj': { style: 'simple', explode: true } } },
      });
      assert.deepEqual(r.headers, { accept: 'application/json', 'X-List': 'a b,c', 'X-Tabs': 'a\tb', 'X-Obj': 'k=v w' });
    });
  });
});
