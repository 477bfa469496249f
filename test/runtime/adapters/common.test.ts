import assert from 'node:assert/strict';
import { concatBytes, formFields, headersFromEntries, nodeHeaders, formEntries, pathMatcher, queryFromSearch, readsQuery, requestPathname, routerPathParams, searchOf, singleHeader, templateParamNames } from '../../../src/runtime/adapters/common.js';
import { canonicalJson } from '../../../src/runtime/fingerprint.js';
import { contract } from './fixtures.js';

describe('runtime/adapters/common', () => {
  it('keeps a header sent several times as several values', () => {
    const headers = headersFromEntries([
      ['Idempotency-Key', 'a'],
      ['idempotency-key', ['b']],
      ['X-One', ['1']],
      ['x-none', undefined],
    ]);
    assert.deepEqual({ ...headers }, { 'idempotency-key': ['a', 'b'], 'x-one': '1' });
    assert.equal(Object.getPrototypeOf(headers), null);
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
    assert.equal(readsQuery({ ...contract, fingerprint: { ...contract.fingerprint, query: [], queryAll: true } }), true, 'a free-form query object: every parameter counts');
    assert.deepEqual({ ...queryFromSearch('?a=1&b=2&a=3&c=') }, { a: ['1', '3'], b: '2', c: '' });
    // Object.prototype's names are parameters like any other: no inherited `constructor`, no prototype set.
    const odd = queryFromSearch('constructor=a&__proto__=b&__proto__=c');
    assert.deepEqual(Object.entries(odd), [['constructor', 'a'], ['__proto__', ['b', 'c']]]);
    assert.equal(queryFromSearch('x=1')['constructor'], undefined);
  });

  it('reads urlencoded text as URLSearchParams does, but keeps bytes that are not UTF-8 apart (%E9 is not %E8, nor U+FFFD)', () => {
    // ASCII text: Node 20's URLSearchParams makes a raw é U+FFFD when the same value holds an escape and a lone `%`
    // (`a=%3D%z é`), which the URL standard does not; formEntries follows the standard there.
    const pieces = ['q', '=', '&', '+', '%20', '%2B', '%26', '%3D', '%C3%A9', '%E2%82%AC', '%F0%9F%98%80', '%', '%z', '%4', ' ', '?', '#x', '%00'];
    let seed = 7;
    const random = () => (seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff;
    for (let n = 0; n < 3000; n += 1) {
      const text = Array.from({ length: Math.floor(random() * 12) }, () => pieces[Math.floor(random() * pieces.length)]).join('');
      assert.deepEqual(formEntries(text), [...new URLSearchParams(text)], text);
    }
    assert.deepEqual(formEntries('a=é+%C3%A9&b=%3D%z é'), [['a', 'é é'], ['b', '=%z é']]);
    assert.deepEqual(formEntries('?note=%E9'), [['note', '\udce9']]);
    assert.notDeepEqual(formEntries('note=%E9'), formEntries('note=%E8'));
    assert.notDeepEqual(formEntries('note=%E9'), formEntries('note=%EF%BF%BD'));
    assert.notDeepEqual(formEntries('note=%E9'), formEntries('note=%25E9'));
    // Valid sequences around an invalid byte are still decoded; an overlong or surrogate encoding is bytes.
    assert.deepEqual(formEntries('a=%C3%A9%FF%C3%A9&b=%C0%AF&c=%ED%A0%80&d=%F0%9F%98'), [['a', 'é\udcffé'], ['b', '\udcc0\udcaf'], ['c', '\udced\udca0\udc80'], ['d', '\udcf0\udc9f\udc98']]);
    assert.equal(searchOf('/things/t1?mode=a&b=%E9#frag'), '?mode=a&b=%E9');
    assert.equal(searchOf('/things/t1'), '');
    // A `#` ends the query, also before any `?`; a bare `?` is an empty query, as URL's `search` ('') reads it.
    assert.deepEqual(['/things/t1#?mode=x', '/a?b=1#c?d=2', '/?', '/x?#', '/x?a=%E9&b'].map(searchOf), ['', '?b=1', '?', '?', '?a=%E9&b']);
    assert.deepEqual(formEntries('?'), []);
    assert.equal(formEntries('a&'.repeat(1_000)).length, 1_000);
  });

  it('reads urlencoded text in time linear in its length: 2,000,000 names without a value (a 4 MB form a fetch guard reads) in one pass', function () {
    // Each `=` looked for in the whole rest of the text took 1.5 s at 800 KB and grew with the square of the length.
    this.timeout(10_000);
    assert.equal(formEntries('a&'.repeat(2_000_000)).length, 2_000_000);
    assert.deepEqual({ ...(formFields('n=%E9') as object) }, { n: '\udce9' });
  });

  it('completes router params with the template names the router cannot spell, from the percent-decoded path', () => {
    assert.deepEqual(templateParamNames('/v1/items/{item.id}/actions/{action-name}'), ['item.id', 'action-name']);
    const resolve = routerPathParams('/v1/items/{item.id}/actions/{action-name}');
    let asked = 0;
    const target = (url: string) => () => {
      asked += 1;
      return url;
    };
    assert.deepEqual(resolve({ itemId: 'x' }, target('/api/v1/items/a%20b%2F%C3%BC/actions/run?x=1')), { itemId: 'x', 'item.id': 'a b/ü', 'action-name': 'run' });
    // The router's value wins; the path is not even read when every name is there.
    assert.deepEqual(resolve({ 'item.id': 'r', 'action-name': 's' }, target('/v1/items/p/actions/q')), { 'item.id': 'r', 'action-name': 's' });
    assert.equal(asked, 1);
    // A path the template does not match adds nothing (the guard then answers scope-unresolved).
    assert.deepEqual(resolve({}, target('/v1/other/1')), {});
    assert.deepEqual(resolve(undefined, target('//v1/items/1/actions/2')), { 'item.id': '1', 'action-name': '2' });
  });

  it('splits a segment of several parameters as a greedy pattern would, and stays linear on a long path that does not match', () => {
    const date = pathMatcher('/reports/{year}-{month}-{day}/export');
    assert.deepEqual(date('/api/reports/2026-11-30/export/'), { year: '2026', month: '11', day: '30' });
    // Each parameter before a literal takes as much as it can: the last one is the shortest.
    assert.deepEqual(date('/reports/a-b-c-d/export'), { year: 'a-b', month: 'c', day: 'd' });
    assert.equal(date('/reports/2026-11/export'), undefined);
    assert.deepEqual(pathMatcher('/f/{name}.{ext}')('/f/a.tar.gz'), { name: 'a.tar', ext: 'gz' });
    assert.deepEqual(pathMatcher('/v{version}/{a}{b}')('/v2/xyz'), { version: '2', a: 'xy', b: 'z' });
    // A template without its leading '/' (OpenAPI requires one) matches whole segments, never the end of one.
    assert.deepEqual(pathMatcher('things/{id}')('/api/things/5'), { id: '5' });
    assert.equal(pathMatcher('things/{id}')('/otherthings/5'), undefined);
    // A RegExp built from this template backtracked cubically here (minutes at 20 KB; the whole server stalls).
    const hostile = `/reports/${'1-'.repeat(10_000)}/exporT`;
    assert.equal(date(hostile), undefined);
    assert.equal(date(`/reports/${'1-'.repeat(10_000)}`), undefined);
  });

  it('keeps a malformed percent escape as sent instead of throwing', () => {
    assert.deepEqual(pathMatcher('/items/{id}')('/items/%E0%A4%A'), { id: '%E0%A4%A' });
    assert.equal(requestPathname('/a%20b/c?d=e#f'), '/a%20b/c');
    assert.equal(requestPathname('http://h.example/x/y?z'), '/x/y');
  });

  it('nests urlencoded forms as v1 fingerprints did (records made before an upgrade keep matching), but for the two shapes marked', () => {
    // Canonical forms as the fingerprint hashes them, written down from the nesting before it was made linear.
    const v1: [string, string][] = [
      ['a=1&b=2', '{"a":"1","b":"2"}'],
      ['a[]=x&a[]=y', '{"a":["x","y"]}'],
      ['a[1]=x&a[0]=y', '{"a":["y","x"]}'],
      ['a[0]=x&a[2]=y', '{"a":{"0":"x","2":"y"}}'],
      ['metadata[order_id]=1&expand[]=a&expand[]=b', '{"expand":["a","b"],"metadata":{"order_id":"1"}}'],
      // Changed on purpose: a plain field before a nested one of the same name used to keep the nested one under
      // its literal name (`a[b]`), so the nesting hung on the order the client sent them in, and lint could not
      // tell which pointer matches. Both orders now put the plain value under the empty name.
      ['a=1&a[b]=2', '{"a":{"":"1","b":"2"}}'],
      ['a[b]=2&a=1', '{"a":{"":"1","b":"2"}}'],
      ['a=1&a[]=2&a[]=3', '{"a":{"":"1","0":"2","1":"3"}}'],
      ['a[b]=1&a=2&a=3', '{"a":{"":["2","3"],"b":"1"}}'],
      ['a=1&a=2', '{"a":["1","2"]}'],
      ['__proto__[x]=1', '{"__proto__":{"x":"1"}}'],
      ['a[][b]=1&a[][b]=2', '{"a":[{"b":"1"},{"b":"2"}]}'],
      // `[]` in the middle fills the last item until it already has that member (Rack's rule, for raw bodies; qs and flat parsers group per name).
      ['items[][price]=p1&items[][qty]=2&items[][price]=p2&items[][qty]=3', '{"items":[{"price":"p1","qty":"2"},{"price":"p2","qty":"3"}]}'],
      ['x[0][]=1&x[0][]=2&x[1]=3', '{"x":[["1","2"],"3"]}'],
      ['=v&0=w', '[["v","w"]]'],
      ['a[b][c][d]=1&a[b][e]=2', '{"a":{"b":{"c":{"d":"1"},"e":"2"}}}'],
    ];
    for (const [form, canonical] of v1) assert.equal(canonicalJson(formFields(form)), canonical, form);
  });

  it('concatenates byte chunks', () => {
    assert.deepEqual([...concatBytes([Uint8Array.of(1, 2), new Uint8Array(0), Uint8Array.of(3)])], [1, 2, 3]);
  });
});
