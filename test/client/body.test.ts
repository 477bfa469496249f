import assert from 'node:assert/strict';
import { Readable } from 'node:stream';
import vm from 'node:vm';
import { encodeBody } from '../../src/runtime/client/body.js';

/** The text of an encoded body (a Blob for multipart). */
async function text(body: string | Blob | ArrayBuffer): Promise<string> {
  if (typeof body === 'string') return body;
  return new TextDecoder().decode(body instanceof Blob ? await body.arrayBuffer() : body);
}

describe('client encodeBody', () => {
  it('sends a body of a non-JSON type as it is, whatever its name says (application/x-ndjson is not JSON)', () => {
    const lines = '{"a":1}\n{"a":2}\n';
    assert.equal(encodeBody(lines, 'application/x-ndjson').body, lines);
    assert.equal(encodeBody({ a: 1 }, 'application/merge-patch+json').body, '{"a":1}');
    assert.equal(encodeBody({ a: 1 }, 'application/json; charset=utf-8').body, '{"a":1}');
  });

  it('a form field named like an Object.prototype member takes no format from it', async () => {
    assert.equal(encodeBody({ constructor: ['a', 'b'], toString: ['c'] }, 'application/x-www-form-urlencoded').body, 'constructor=a&constructor=b&toString=c');
    const { body } = encodeBody({ constructor: ['a', 'b'] }, 'multipart/form-data');
    assert.equal((await text(body)).match(/name="constructor"/g)?.length, 2, 'one part per item');
  });

  it('form bodies must be objects of fields: anything else is a TypeError, not a mangled request', () => {
    for (const media of ['application/x-www-form-urlencoded', 'multipart/form-data']) {
      for (const [value, got] of [['x', 'string'], [1, 'number'], [['a'], 'an array'], [null, 'null'], [new Uint8Array(1), 'a file or bytes'], [new Blob(['x']), 'a file or bytes'],
        [new Map([['a', '1']]), 'a Map'], [new Set(['a']), 'a Set'], [new Date(0), 'a Date'], [new ReadableStream(), 'a stream'], [Readable.from(['a=1']), 'a stream']] as const) {
        assert.throws(() => encodeBody(value, media), new TypeError(`a ${media} body must be an object of fields (or a URLSearchParams or FormData), not ${got}`), `${media} ${String(value)}`);
      }
    }
  });

  it('a form body of no fields (a Promise, an Error, a RegExp, a WeakMap, a Date or Map of another realm) is a TypeError, not an empty form', () => {
    for (const media of ['application/x-www-form-urlencoded', 'multipart/form-data']) {
      for (const thenable of [Promise.resolve({ a: 'x' }), { then: () => undefined, a: 'x' }]) {
        assert.throws(() => encodeBody(thenable, media), new TypeError(`a ${media} body must be an object of fields, not a Promise or other thenable (a forgotten await?)`));
      }
      const cases = [[new Error('boom'), 'an Error'], [/a/, 'a RegExp'], [new WeakMap(), 'a WeakMap'], [vm.runInNewContext('new Date(0)'), 'a Date'],
        [vm.runInNewContext('new Map([["a", "x"]])'), 'a Map'], [vm.runInNewContext('["a"]'), 'an array']] as const;
      for (const [value, got] of cases) {
        assert.throws(() => encodeBody(value, media), new TypeError(`a ${media} body must be an object of fields (or a URLSearchParams or FormData), not ${got}`), `${media} ${got}`);
      }
    }
  });

  it('a class instance (a DTO) or an object of another realm is a form of its own enumerable fields, nested members too', async () => {
    class Order {
      item = 'book';
      metadata = vm.runInNewContext('({ ref: "r-1" })') as object;
      get total(): number {
        return 1;
      }
    }
    const foreign = vm.runInNewContext('({ item: "book", metadata: { ref: "r-1" } })') as object;
    // A class that names itself (Symbol.toStringTag) is still an object of fields.
    const tagged = Object.assign(new Order(), { [Symbol.toStringTag]: 'Order' });
    for (const value of [new Order(), foreign, tagged]) {
      assert.equal(encodeBody(value, 'application/x-www-form-urlencoded').body, 'item=book&metadata[ref]=r-1');
      const { body } = encodeBody(value, 'multipart/form-data', { metadata: { style: 'deepObject', explode: true } });
      assert.match(await text(body), /name="item"\r\n\r\nbook\r\n[^]*name="metadata\[ref\]"\r\n\r\nr-1\r\n/);
    }
  });

  it('a URLSearchParams or FormData is sent as the form it holds; a file in a urlencoded form is a TypeError', async () => {
    const params = new URLSearchParams([['a', '1'], ['b', 'x y'], ['a', '2']]);
    assert.equal(encodeBody(params, 'application/x-www-form-urlencoded').body, 'a=1&b=x%20y&a=2');
    const strings = new FormData();
    strings.append('a', '1');
    assert.equal(encodeBody(strings, 'application/x-www-form-urlencoded').body, 'a=1');
    const form = new FormData();
    form.append('title', 'report');
    form.append('file', new Blob(['%PDF'], { type: 'application/pdf' }), 'r.pdf');
    assert.throws(() => encodeBody(form, 'application/x-www-form-urlencoded'), new TypeError('"file" holds a file: files go in a multipart/form-data body'));
    const { body, contentType } = encodeBody(form, 'multipart/form-data');
    const boundary = contentType.split('boundary=')[1]!;
    assert.equal(
      await text(body),
      `--${boundary}\r\nContent-Disposition: form-data; name="title"\r\n\r\nreport\r\n` +
        `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="r.pdf"\r\nContent-Type: application/pdf\r\n\r\n%PDF\r\n--${boundary}--\r\n`,
    );
  });

  it('a stream, a Map or a Set is a TypeError in any body, and field data or bytes in a JSON body, never sent as {} or empty', () => {
    for (const value of [new ReadableStream(), Readable.from(['x']), new Map([['a', 1]]), new Set([1])]) {
      assert.throws(() => encodeBody(value, 'application/octet-stream'), /^TypeError: a application\/octet-stream body is a string, a Blob or bytes, not a (stream|Map|Set)$/);
      assert.throws(() => encodeBody(value, 'application/json'), /^TypeError: a application\/json body is JSON data, not a (stream|Map|Set)/);
    }
    for (const value of [new Blob(['x']), new Uint8Array(1), new URLSearchParams('a=1'), new FormData()]) {
      assert.throws(() => encodeBody(value, 'application/json'), /^TypeError: a application\/json body is JSON data, not a (file or bytes|URLSearchParams|FormData) \(its JSON text would be \{\} or empty\)$/);
    }
    // Plain data, Dates and class instances with fields stay JSON.
    assert.equal(encodeBody([1, new Date(0), new (class Point { x = 1; })()], 'application/json').body, '[1,"1970-01-01T00:00:00.000Z",{"x":1}]');
  });

  it('a Promise, a Response, an Error or another opaque object is a TypeError as a whole body of any type, and nested in a JSON body (was {} or numbers, sent and completed)', async () => {
    const { createReadStream } = await import('node:fs');
    const opaque = [
      [Promise.resolve({ a: 1 }), 'a Promise or other thenable (a forgotten await?)'],
      [new Blob(['x']).arrayBuffer(), 'a Promise or other thenable (a forgotten await?)'],
      [new Response('x'), 'a Response'],
      [new Request('http://127.0.0.1/'), 'a Request'],
      [new Headers({ a: 'b' }), 'a Headers'],
      [new Error('boom'), 'an Error'],
      [/x/, 'a RegExp'],
      [new WeakMap(), 'a WeakMap'],
      [new AbortController().signal, 'an AbortSignal'],
    ] as const;
    for (const [value, kind] of opaque) {
      assert.throws(() => encodeBody(value, 'application/octet-stream'), new TypeError(`a application/octet-stream body is a string, a Blob or bytes, not ${kind}`), kind);
      assert.throws(() => encodeBody(value, 'application/json'), (error: Error) => error instanceof TypeError && error.message.startsWith(`a application/json body is JSON data, not ${kind}`), kind);
      assert.throws(() => encodeBody({ order: { doc: value } }, 'application/json'), new TypeError(`a application/json body holds ${kind} at \`doc\`: JSON would write it as {} or leave it out`), kind);
    }
    const stream = createReadStream(new URL(import.meta.url));
    try {
      for (const [value, kind] of [[new Blob(['x']), 'a file or bytes'], [Uint8Array.of(1, 2), 'a file or bytes'], [Buffer.from('x'), 'a file or bytes'], [stream, 'a stream'],
        [new Map([['a', 1]]), 'a Map'], [new URLSearchParams('a=1'), 'a URLSearchParams']] as const) {
        assert.throws(() => encodeBody({ doc: value }, 'application/json'), new TypeError(`a application/json body holds ${kind} at \`doc\`: JSON would write it as {} or leave it out`), kind);
      }
    } finally {
      stream.destroy();
    }
    // Data stays data: Dates, URLs (their toJSON), class instances with or without fields, null-prototype objects,
    // arrays, boxed scalars.
    class Empty {}
    // Second read: an Error with fields of its own, an object with pipe() and its own toJSON (Effect's Option), an
    // empty class of the app's that names itself.
    const appError = Object.assign(new Error('x'), { code: 'E1', detail: 'd' });
    const option = { _tag: 'Some', value: 1, pipe: () => undefined, toJSON: () => ({ _tag: 'Some', value: 1 }) };
    class Cancel {
      get [Symbol.toStringTag]() {
        return 'Cancel';
      }
    }
    assert.equal(encodeBody({ lastError: appError, option, cancel: new Cancel() }, 'application/json').body, '{"lastError":{"code":"E1","detail":"d"},"option":{"_tag":"Some","value":1},"cancel":{}}');
    const data = { at: new Date(0), url: new URL('https://h/p'), empty: new Empty(), bare: Object.assign(Object.create(null) as object, { a: 1 }), list: [1, 'x'], boxed: Object(2) as number };
    assert.equal(encodeBody(data, 'application/json').body, '{"at":"1970-01-01T00:00:00.000Z","url":"https://h/p","empty":{},"bare":{"a":1},"list":[1,"x"],"boxed":2}');
  });

  it('multipart: a stream, a Promise or a Response as a field is a TypeError before anything is sent (a ReadStream was sent as JSON with its local path)', async () => {
    const { createReadStream } = await import('node:fs');
    const stream = createReadStream(new URL(import.meta.url));
    try {
      const cases = [[stream, 'a stream'], [new ReadableStream(), 'a stream'], [Promise.resolve(new Blob(['x'])), 'a Promise or other thenable (a forgotten await?)'], [new Response('x'), 'a Response']] as const;
      for (const [value, kind] of cases) {
        assert.throws(
          () => encodeBody({ f: value, n: 'x' }, 'multipart/form-data'),
          new TypeError(`"f" is ${kind}: a multipart/form-data field is text, a file (a Blob: read a stream into one first, so every attempt sends the same bytes) or JSON data`),
          kind,
        );
        assert.throws(() => encodeBody({ doc: { f: value } }, 'multipart/form-data'), (error: Error) => error instanceof TypeError && error.message.startsWith(`"doc" holds ${kind} inside a JSON part (at \`f\`)`), kind);
      }
    } finally {
      stream.destroy();
    }
  });

  it('urlencoded: null is sent empty (unset), undefined left out, nested values bracketed, 2.0 formats applied', () => {
    const { body, contentType } = encodeBody({ a: null, b: undefined, c: { d: [1, 2] }, e: ['x', 'y'] }, 'application/x-www-form-urlencoded', {
      e: { style: 'spaceDelimited', explode: false },
    });
    assert.equal(contentType, 'application/x-www-form-urlencoded');
    assert.equal(body, 'a=&c[d][0]=1&c[d][1]=2&e=x%20y');
  });

  it('multipart: a file, bytes, a Map or a Set inside a JSON part is a TypeError naming the field, never a silent {}', async () => {
    const file = new File(['x'], 'a.txt', { type: 'text/plain' });
    const cases = [
      [{ front: file }, 'a file or bytes'],
      [{ raw: Uint8Array.of(1) }, 'a file or bytes'],
      [{ raw: Buffer.from('x') }, 'a file or bytes'],
      [{ m: new Map([['a', 1]]) }, 'a Map'],
      [{ s: new Set([1]) }, 'a Set'],
      [{ w: { toJSON: () => Buffer.from('hi') } }, 'a file or bytes'],
    ] as const;
    for (const [value, kind] of cases) {
      assert.throws(() => encodeBody({ doc: value }, 'multipart/form-data'), (error: Error) => error instanceof TypeError && error.message.startsWith(`"doc" holds ${kind} inside a JSON part (at \``));
    }
    // Plain objects, lists, Dates and class instances with fields are still one JSON part.
    class Address {
      constructor(readonly city: string) {}
    }
    const ok = encodeBody({ doc: { at: new Date('2026-01-02T03:04:05Z'), tags: ['a'], address: new Address('Paris') } }, 'multipart/form-data');
    assert.match(await text(ok.body), /Content-Type: application\/json\r\n\r\n\{"at":"2026-01-02T03:04:05.000Z","tags":\["a"\],"address":\{"city":"Paris"\}\}/);
  });

  it('multipart: names are escaped as browsers do, null and undefined fields and items left out, a fresh boundary per body', async () => {
    const first = encodeBody({ 'we"ird\r\nname': 'v', gone: null, none: undefined, list: ['a', null, 'b'] }, 'multipart/form-data');
    const boundary = /boundary=(idemkit-[0-9a-f-]{36})$/.exec(first.contentType)?.[1];
    assert.ok(boundary !== undefined, first.contentType);
    assert.equal(
      await text(first.body),
      [
        `--${boundary}`,
        'Content-Disposition: form-data; name="we%22ird%0D%0Aname"',
        '',
        'v',
        `--${boundary}`,
        'Content-Disposition: form-data; name="list"',
        '',
        'a',
        `--${boundary}`,
        'Content-Disposition: form-data; name="list"',
        '',
        'b',
        `--${boundary}--`,
        '',
      ].join('\r\n'),
    );
    assert.notEqual(encodeBody({}, 'multipart/form-data').contentType, first.contentType);
  });
});
