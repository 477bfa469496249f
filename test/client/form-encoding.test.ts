/**
 * The exact wire strings of form bodies and query parameters: OpenAPI 3 `style` / `explode` (body fields through
 * their Encoding Object), and what Stripe (stripe-node, qs) and Twilio (twilio-node) send where the
 * document relies on convention.
 */
import assert from 'node:assert/strict';
import { encodeBody } from '../../src/runtime/client/body.js';
import type { ParamFormat, ParamInput } from '../../src/runtime/client/params.js';
import { buildRequest } from '../../src/runtime/client/request.js';
import { bracketPath } from '../../src/runtime/form-names.js';

const FORM = 'application/x-www-form-urlencoded';
const DEEP: ParamFormat = { style: 'deepObject', explode: true };

/** The urlencoded body of `value` with these field formats. */
function form(value: object, fields: Readonly<Record<string, ParamFormat>> = {}): string {
  const { body } = encodeBody(value, FORM, fields);
  assert.equal(typeof body, 'string');
  return body as string;
}

/** The query string of a GET with these parameters and formats. */
function query(params: Readonly<Record<string, ParamInput | null | undefined>>, formats: Readonly<Record<string, ParamFormat>> = {}): string {
  return buildRequest('https://api.example.com', 'GET', '/x', { query: params }, { params: { query: formats } }).url.split('?')[1] ?? '';
}

/** The parts of a multipart body as `[name, content]`. */
async function parts(value: object, fields: Readonly<Record<string, ParamFormat>>): Promise<[string, string][]> {
  const { body, contentType } = encodeBody(value, 'multipart/form-data', fields);
  const data = await new Response(body, { headers: { 'content-type': contentType } }).formData();
  const out: [string, string][] = [];
  data.forEach((item, name) => out.push([name, typeof item === 'string' ? item : `file ${item.name} ${item.type} ${item.size}B`]));
  return out;
}

describe('client form and query encoding on the wire', () => {
  describe('Stripe: encoding deepObject / explode on every structured field (stripe.com OpenAPI)', () => {
    it('postCheckoutSessions: an array of objects by index, nested objects, an array of strings by index', () => {
      const body = form(
        { mode: 'payment', line_items: [{ price: 'price_1', quantity: 2 }, { price: 'price_2', quantity: 1 }], expand: ['customer', 'payment_intent'] },
        { line_items: DEEP, expand: DEEP },
      );
      assert.equal(body, 'mode=payment&line_items[0][price]=price_1&line_items[0][quantity]=2&line_items[1][price]=price_2&line_items[1][quantity]=1&expand[0]=customer&expand[1]=payment_intent');
    });

    it('postCharges: an address two levels down', () => {
      const body = form({ amount: 100, currency: 'eur', shipping: { name: 'A', address: { city: 'Paris', line1: '1 rue' } } }, { shipping: DEEP });
      assert.equal(body, 'amount=100&currency=eur&shipping[name]=A&shipping[address][city]=Paris&shipping[address][line1]=1%20rue');
    });

    it('postCustomers: an array of objects inside an object, arrays of strings by index, null as Stripe\'s empty "unset"', () => {
      const body = form(
        {
          email: 'a@b.c',
          expand: ['default_source'],
          invoice_settings: { custom_fields: [{ name: 'PO', value: '42' }], footer: null },
          preferred_locales: ['fr', 'en'],
          metadata: { order_id: '6735', old: null, gone: undefined },
        },
        { expand: DEEP, invoice_settings: DEEP, preferred_locales: DEEP, metadata: DEEP },
      );
      assert.equal(
        body,
        'email=a%40b.c&expand[0]=default_source&invoice_settings[custom_fields][0][name]=PO&invoice_settings[custom_fields][0][value]=42' +
          '&invoice_settings[footer]=&preferred_locales[0]=fr&preferred_locales[1]=en&metadata[order_id]=6735&metadata[old]=',
      );
    });

    it('getCustomers: deepObject query parameters, an array by index and an object of ranges; null members are left out', () => {
      assert.equal(
        query({ expand: ['data.default_source', 'data.sources'], created: { gte: 1700000000, lt: null }, limit: 3 }, { expand: DEEP, created: DEEP }),
        'expand[0]=data.default_source&expand[1]=data.sources&created[gte]=1700000000&limit=3',
      );
    });

    it('keys and values are percent-encoded inside the brackets; the brackets themselves are not (as stripe-node sends them)', () => {
      assert.equal(form({ metadata: { 'a]b[c': 'x&y=z', 'é': ' + ' } }, { metadata: DEEP }), 'metadata[a%5Db%5Bc]=x%26y%3Dz&metadata[%C3%A9]=%20%2B%20');
    });

    it('multipart (postFiles): a deepObject field is one text part per leaf, named with brackets', async () => {
      const file = new Blob(['%PDF'], { type: 'application/pdf' });
      assert.deepEqual(await parts({ file, purpose: 'dispute_evidence', file_link_data: { create: true, metadata: { a: 'b' } } }, { file_link_data: DEEP }), [
        ['file', 'file blob application/pdf 4B'],
        ['purpose', 'dispute_evidence'],
        ['file_link_data[create]', 'true'],
        ['file_link_data[metadata][a]', 'b'],
      ]);
    });
  });

  describe('no encoding: OpenAPI\'s form default (style form, explode true)', () => {
    it('Twilio createMessage: a list of strings is the name repeated (MediaUrl=a&MediaUrl=b), as twilio-node sends it', () => {
      assert.equal(
        form({ To: '+15551234567', Body: 'hi there', MediaUrl: ['https://a.example/1.png', 'https://a.example/2.png'] }),
        'To=%2B15551234567&Body=hi%20there&MediaUrl=https%3A%2F%2Fa.example%2F1.png&MediaUrl=https%3A%2F%2Fa.example%2F2.png',
      );
    });

    it('objects, and lists holding objects, are bracket-nested at every depth (metadata[k]=v, items[0][id]=…)', () => {
      assert.equal(
        form({ metadata: { k: 'v', tags: ['x', 'y'] }, items: [{ id: 1, opts: { gift: true } }], matrix: [[1, 2]] }),
        'metadata[k]=v&metadata[tags][0]=x&metadata[tags][1]=y&items[0][id]=1&items[0][opts][gift]=true&matrix[0][0]=1&matrix[0][1]=2',
      );
    });
  });

  describe('explicit form, pipeDelimited and spaceDelimited', () => {
    it('form explode false: comma-joined in the body and the query; a comma inside a value is encoded, the separators are not', () => {
      const formats = { tags: { style: 'form', explode: false }, point: { style: 'form', explode: false } } as const;
      assert.equal(form({ tags: ['a', 'b,c', 'd'], point: { x: 1, y: 2 } }, formats), 'tags=a,b%2Cc,d&point=x,1,y,2');
      assert.equal(query({ tags: ['a', 'b,c', 'd'], point: { x: 1, y: 2 } }, formats), 'tags=a,b%2Cc,d&point=x,1,y,2');
    });

    it('form explode true: a list repeats the name, an object\'s members are fields of their own (the OpenAPI style table)', () => {
      const formats = { ids: { style: 'form', explode: true }, color: { style: 'form', explode: true } } as const;
      assert.equal(form({ ids: [1, 2], color: { R: 100, G: 200 } }, formats), 'ids=1&ids=2&R=100&G=200');
      assert.equal(query({ ids: [1, 2], color: { R: 100, G: 200 } }, formats), 'ids=1&ids=2&R=100&G=200');
    });

    it('pipeDelimited and spaceDelimited not exploded join with | and %20; exploded they repeat the name', () => {
      const formats = {
        pipes: { style: 'pipeDelimited', explode: false },
        spaces: { style: 'spaceDelimited', explode: false },
        many: { style: 'pipeDelimited', explode: true },
      } as const;
      const value = { pipes: [1, 2, 3], spaces: ['a', 'b c'], many: ['x', 'y'] };
      assert.equal(form(value, formats), 'pipes=1|2|3&spaces=a%20b%20c&many=x&many=y');
      assert.equal(query(value, formats), 'pipes=1|2|3&spaces=a%20b%20c&many=x&many=y');
    });

    it('a value its style cannot write (a list of objects, an object of lists) is bracket-nested instead', () => {
      const formats = { rows: { style: 'form', explode: false }, opts: { style: 'pipeDelimited', explode: false }, pairs: { style: 'form', explode: true } } as const;
      const value = { rows: [{ a: 1 }], opts: { tags: ['x'] }, pairs: { p: { q: 1 } } };
      assert.equal(form(value, formats), 'rows[0][a]=1&opts[tags][0]=x&pairs[p][q]=1');
      assert.equal(query(value, formats), 'rows[0][a]=1&opts[tags][0]=x&pairs[p][q]=1');
    });
  });

  it('a mixed body: scalars, a repeated list, a bracketed object, deepObject, a joined list, null and undefined fields', () => {
    const body = form(
      {
        name: 'Ann Lee',
        count: 0,
        active: false,
        cleared: null,
        skipped: undefined,
        MediaUrl: ['u1', 'u2'],
        address: { city: 'Paris', lines: ['1 rue', 'bis'] },
        line_items: [{ price: 'p', quantity: 1 }],
        tags: ['a', 'b'],
        empty: [],
      },
      { line_items: DEEP, tags: { style: 'form', explode: false } },
    );
    assert.equal(
      body,
      'name=Ann%20Lee&count=0&active=false&cleared=&MediaUrl=u1&MediaUrl=u2&address[city]=Paris&address[lines][0]=1%20rue&address[lines][1]=bis' +
        '&line_items[0][price]=p&line_items[0][quantity]=1&tags=a,b',
    );
    // What a qs-style server (Express extended, Stripe) reads back.
    const read = new URLSearchParams(body);
    assert.deepEqual(read.getAll('MediaUrl'), ['u1', 'u2']);
    assert.equal(read.get('address[lines][0]'), '1 rue');
  });

  it('no input is ever sent as [object Object], whatever its style, in the body or the query; a path or header value cannot nest', () => {
    const styles: ParamFormat['style'][] = ['form', 'simple', 'label', 'matrix', 'spaceDelimited', 'pipeDelimited', 'tabDelimited', 'deepObject'];
    const values: unknown[] = [
      [{ a: 1 }],
      { a: { b: [1, { c: 2 }] } },
      [[1, 2], []],
      { a: [], b: {}, c: null },
      [null, { a: null }],
    ];
    for (const style of styles) {
      for (const explode of [true, false]) {
        const format = { style, explode };
        for (const value of values) {
          const input = value as ParamInput;
          const request = buildRequest('https://h', 'POST', '/x', { query: { q: input }, body: { f: input } }, { mediaType: FORM, params: { query: { q: format } }, fields: { f: format } });
          const wire = `${request.url} ${String(request.body)}`;
          assert.doesNotMatch(wire, /object(%20| )Object/, `${style} explode=${explode} ${JSON.stringify(value)}: ${wire}`);
          // Brackets mean nothing in a path segment or a header: there it is the caller's mistake, said so.
          const unwritable = new RegExp(`^TypeError: "[ph]" holds an array or object inside it: it cannot be written as form fields or parameters \\(${style} style`);
          assert.throws(() => buildRequest('https://h', 'GET', '/{p}', { path: { p: input } }, { params: { path: { p: format } } }), unwritable);
          assert.throws(() => buildRequest('https://h', 'GET', '/', { headers: { h: input } }, { params: { headers: { h: format } } }), unwritable);
        }
      }
    }
  });

  it('a value that contains itself is a TypeError naming the field, not a stack overflow', () => {
    const looped: Record<string, unknown> = { a: 1 };
    looped['self'] = looped;
    assert.throws(() => form({ meta: looped }), new TypeError('"meta" contains itself: it cannot be written as form fields'));
  });

  it('a lone surrogate is sent as U+FFFD, as URLSearchParams does, not thrown as a URIError', () => {
    assert.equal(form({ note: 'a\uD800b', list: ['\uDC00'] }), 'note=a%EF%BF%BDb&list=%EF%BF%BD');
  });

  describe('values that are not arrays or plain objects (review helper-52)', () => {
    const at = new Date('2026-01-02T03:04:05Z');
    const iso = '2026-01-02T03%3A04%3A05.000Z';

    it('multipart deepObject: a file, a list of files and bytes are file parts under their bracketed names (not dropped, not one part per byte)', async () => {
      const pdf = new File(['%PDF-1.7'], 'id.pdf', { type: 'application/pdf' });
      const back = new File(['%PDF'], 'back.pdf', { type: 'application/pdf' });
      assert.deepEqual(await parts({ purpose: 'identity_document', docs: [pdf, back], doc: { front: pdf, raw: new Uint8Array([0x25, 0x50]), note: 'n' } }, { docs: DEEP, doc: DEEP }), [
        ['purpose', 'identity_document'],
        ['docs[0]', 'file id.pdf application/pdf 8B'],
        ['docs[1]', 'file back.pdf application/pdf 4B'],
        ['doc[front]', 'file id.pdf application/pdf 8B'],
        ['doc[raw]', 'file blob application/octet-stream 2B'],
        ['doc[note]', 'n'],
      ]);
    });

    it('a Date is its ISO time wherever a scalar goes: nested in a form or multipart deepObject, in a query list, in the path, a header, a cookie, a field of its own', async () => {
      assert.equal(form({ sub: { trial_end: at, plan: 'p' } }, { sub: DEEP }), `sub[trial_end]=${iso}&sub[plan]=p`);
      assert.equal(form({ at, days: [at] }), `at=${iso}&days=${iso}`);
      assert.equal(query({ days: [at] } as never), `days=${iso}`);
      assert.equal(query({ since: at, range: { gte: at } } as never, { range: DEEP }), `since=${iso}&range[gte]=${iso}`);
      const request = buildRequest('https://h', 'GET', '/days/{day}', { path: { day: at }, headers: { 'X-At': at }, cookies: { at } } as never);
      assert.equal(request.url, `https://h/days/${iso}`);
      assert.equal(request.headers['X-At'], '2026-01-02T03:04:05.000Z');
      assert.equal(request.headers['cookie'], `at=${iso}`);
      // A multipart Date field is text, not a JSON string in quotes.
      assert.deepEqual(await parts({ at, sub: { at } }, { sub: DEEP }), [
        ['at', '2026-01-02T03:04:05.000Z'],
        ['sub[at]', '2026-01-02T03:04:05.000Z'],
      ]);
      assert.throws(() => form({ at: new Date(Number.NaN) }), new TypeError('"at" is an invalid Date: it cannot be written as form fields or parameters'));
    });

    it('a Map, a Set, a class instance, or a file outside multipart is a TypeError naming the field, not silently dropped', () => {
      class Money {
        readonly amount = 5;
      }
      const hint = '(give strings, numbers, booleans, Dates, arrays or plain objects)';
      assert.throws(() => form({ meta: { tags: new Map([['a', 1]]) } }, { meta: DEEP }), new TypeError(`"meta[tags]" is a Map: it cannot be written as form fields or parameters ${hint}`));
      assert.throws(() => form({ ids: [1, new Set([2])] }), new TypeError(`"ids[1]" is a Set: it cannot be written as form fields or parameters ${hint}`));
      assert.throws(() => form({ price: new Money() }), new TypeError(`"price" is a Money: it cannot be written as form fields or parameters ${hint}`));
      assert.throws(() => query({ f: { g: new Money() } } as never), new TypeError(`"f[g]" is a Money: it cannot be written as form fields or parameters ${hint}`));
      const file = '(files and bytes go in a multipart/form-data body)';
      assert.throws(() => form({ a: 1, f: new File(['x'], 'x.txt') }), new TypeError(`"f" is a File: it cannot be written as form fields or parameters ${file}`));
      assert.throws(() => form({ doc: { raw: new Uint8Array([1]) } }, { doc: DEEP }), new TypeError(`"doc[raw]" is a Uint8Array: it cannot be written as form fields or parameters ${file}`));
      assert.throws(() => form({ docs: [new Blob(['x'])] }), new TypeError(`"docs[0]" is a Blob: it cannot be written as form fields or parameters ${file}`));
      assert.throws(() => encodeBody({ doc: { m: new Map() } }, 'multipart/form-data', { doc: DEEP }), /^TypeError: "doc\[m\]" is a Map/);
      // An object without a prototype is a plain object.
      assert.equal(form({ meta: Object.assign(Object.create(null) as object, { k: 'v' }) }), 'meta[k]=v');
    });

    it('array holes are left out like undefined, not a crash', () => {
      const holes = [, 'b'];
      const nested = [, ['a']];
      assert.equal(form({ t: holes }, { t: DEEP }), 't[1]=b');
      assert.equal(form({ t: holes }), 't=b');
      assert.equal(form({ t: [, { a: 1 }] }), 't[1][a]=1');
      assert.equal(query({ t: nested } as never), 't[1][0]=a');
      assert.equal(buildRequest('https://h', 'GET', '/{p}', { path: { p: holes } as never }).url, 'https://h/b');
    });

    it('a lone surrogate in a path value is sent as U+FFFD, as in the query and the body, not thrown as a URIError', () => {
      assert.equal(buildRequest('https://h', 'GET', '/x/{id}', { path: { id: 'a\uD800' }, query: { q: '\uDC00' } }).url, 'https://h/x/a%EF%BF%BD?q=%EF%BF%BD');
    });

    it('nesting is capped where the guard reads bracketed names (32 parts): deeper is a TypeError, not a stack overflow', () => {
      const nest = (levels: number): unknown => {
        let value: unknown = 'leaf';
        for (let level = 0; level < levels; level++) value = { k: value };
        return value;
      };
      const deepest = form({ o: nest(31) } as object, { o: DEEP });
      const name = decodeURIComponent(deepest.split('=')[0]!);
      assert.equal(bracketPath(name)?.length, 32, 'the guard reads the deepest name the client writes');
      const tooDeep = new TypeError('"o" is nested more than 32 names deep: it cannot be written as form fields or parameters (a bracketed name has at most 32 parts)');
      assert.throws(() => form({ o: nest(32) } as object, { o: DEEP }), tooDeep);
      assert.throws(() => form({ o: nest(6000) } as object, { o: DEEP }), tooDeep);
      assert.throws(() => query({ o: nest(6000) } as never), tooDeep);
      assert.throws(() => encodeBody({ o: nest(6000) }, 'multipart/form-data', { o: DEEP }), tooDeep);
    });

    it("!'()* are percent-encoded in form bodies, queries and paths, as stripe-node (qs) and RFC 6570 write them", () => {
      assert.equal(form({ description: "Gift (for Bob's 30th)!*", metadata: { 'a*': 'b!' } }), 'description=Gift%20%28for%20Bob%27s%2030th%29%21%2A&metadata[a%2A]=b%21');
      assert.equal(buildRequest('https://h', 'GET', '/n/{id}', { path: { id: "(it's)!*" }, query: { q: "(it's)!*" } }).url, 'https://h/n/%28it%27s%29%21%2A?q=%28it%27s%29%21%2A');
    });
  });
});
