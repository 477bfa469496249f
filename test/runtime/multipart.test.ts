import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import express from 'express';
import fastifyMultipart from '@fastify/multipart';
import Fastify from 'fastify';
import multer from 'multer';
import { createRouteGuard as createFastifyGuard } from '../../src/runtime/adapters/fastify.js';
import { createRouteGuard } from '../../src/runtime/adapters/express.js';
import { bodyForFingerprint } from '../../src/runtime/adapters/common.js';
import { computeFingerprint, type FieldSelection } from '../../src/runtime/fingerprint.js';
import { FilePart, multipartBoundary, multipartFields } from '../../src/runtime/multipart.js';
import { MemoryStore } from '../../src/runtime/stores/memory.js';
import { contract } from './adapters/fixtures.js';

/** A multipart body as `fetch` encodes it: every call picks a new random boundary, as browsers and undici do. */
async function encode(fill: (form: FormData) => void): Promise<{ bytes: Uint8Array; type: string }> {
  const form = new FormData();
  fill(form);
  const request = new Request('http://127.0.0.1/', { method: 'POST', body: form });
  return { bytes: new Uint8Array(await request.arrayBuffer()), type: request.headers.get('content-type')! };
}

const upload = (file = 'abc', name = 'a.txt') => (form: FormData) => {
  form.append('purpose', 'dispute_evidence');
  form.append('metadata[order]', 'o-1');
  form.append('file', new Blob([file], { type: 'text/plain' }), name);
};

async function fingerprintOf(fill: (form: FormData) => void, selection: FieldSelection = { include: 'all', exclude: [] }): Promise<string> {
  const { bytes, type } = await encode(fill);
  return computeFingerprint({ operationId: 'upload', pathParams: {}, query: {}, body: bodyForFingerprint(bytes, type), selection });
}

describe('runtime/multipart', () => {
  let uploads = '';
  before(() => {
    uploads = mkdtempSync(path.join(os.tmpdir(), 'idemkit-uploads-'));
  });
  after(() => rmSync(uploads, { recursive: true, force: true }));

  it('reads the boundary of a multipart/form-data type only, quoted or not', () => {
    assert.equal(multipartBoundary('multipart/form-data; boundary=----x1'), '----x1');
    assert.equal(multipartBoundary('Multipart/Form-Data; charset=utf-8; boundary="a b:c"'), 'a b:c');
    assert.equal(multipartBoundary('multipart/mixed; boundary=x'), undefined);
    assert.equal(multipartBoundary('application/json'), undefined);
    assert.equal(multipartBoundary(undefined), undefined);
  });

  it('reads text fields as text and file parts by name, type, size and SHA-256', async () => {
    const { bytes, type } = await encode(upload());
    const fields = multipartFields(bytes, multipartBoundary(type)!);
    assert.deepEqual(fields, [
      { name: 'purpose', value: 'dispute_evidence' },
      { name: 'metadata[order]', value: 'o-1' },
      { name: 'file', value: new FilePart('a.txt', 'text/plain', 3, 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad') },
    ]);
    // Form objects have no prototype (a field named `__proto__` is data): compare as plain JSON-like values.
    assert.deepEqual(JSON.parse(JSON.stringify(bodyForFingerprint(bytes, type))), {
      purpose: 'dispute_evidence',
      metadata: { order: 'o-1' },
      file: { filename: 'a.txt', type: 'text/plain', size: 3, sha256: 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad' },
    });
  });

  it('gives a retry of the same upload the same fingerprint though its boundary differs', async () => {
    const first = await encode(upload());
    const retry = await encode(upload());
    assert.notEqual(first.type, retry.type, 'each FormData body has its own boundary');
    assert.equal(await fingerprintOf(upload()), await fingerprintOf(upload()));
  });

  it('tells apart another file, another file name, a file from a text field with the same content, and another field', async () => {
    const base = await fingerprintOf(upload());
    assert.notEqual(await fingerprintOf(upload('abd')), base);
    assert.notEqual(await fingerprintOf(upload('abc', 'b.txt')), base);
    const asText = (form: FormData) => {
      form.append('purpose', 'dispute_evidence');
      form.append('metadata[order]', 'o-1');
      form.append('file', 'abc');
    };
    assert.notEqual(await fingerprintOf(asText), base);
    assert.notEqual(
      await fingerprintOf((form) => {
        upload()(form);
        form.append('note', 'x');
      }),
      base,
    );
  });

  it('lets fingerprint pointers select fields, nested by their bracketed names', async () => {
    const selection: FieldSelection = { include: ['/purpose', '/metadata/order'], exclude: [] };
    assert.equal(await fingerprintOf(upload('abc'), selection), await fingerprintOf(upload('another file'), selection));
    const otherOrder = (form: FormData) => {
      form.append('purpose', 'dispute_evidence');
      form.append('metadata[order]', 'o-2');
    };
    assert.notEqual(await fingerprintOf(otherOrder, selection), await fingerprintOf(upload(), selection));
  });

  it('hashes the exact bytes of a body that is not well-formed multipart (truncated, no part name)', async () => {
    const { bytes, type } = await encode(upload());
    const truncated = bytes.subarray(0, bytes.length - 10);
    assert.equal(bodyForFingerprint(truncated, type), truncated);
    const boundary = multipartBoundary(type)!;
    const nameless = Buffer.from(`--${boundary}\r\nContent-Disposition: form-data\r\n\r\nx\r\n--${boundary}--\r\n`);
    assert.equal(multipartFields(nameless, boundary), undefined);
    assert.equal(bodyForFingerprint(nameless, type), nameless);
  });

  it('nests thousands of `a[]` parts, and plain values beside nested ones, in order (each append finds its index directly)', () => {
    const boundary = 'xYz';
    let text = '';
    for (let i = 0; i < 5000; i++) text += `--${boundary}\r\nContent-Disposition: form-data; name="a[]"\r\n\r\nv${i}\r\n`;
    text += `--${boundary}\r\nContent-Disposition: form-data; name="b[c]"\r\n\r\n1\r\n`;
    for (let i = 0; i < 3; i++) text += `--${boundary}\r\nContent-Disposition: form-data; name="b"\r\n\r\np${i}\r\n`;
    text += `--${boundary}--\r\n`;
    const body = bodyForFingerprint(Buffer.from(text), `multipart/form-data; boundary=${boundary}`) as { a: string[]; b: Record<string, unknown> };
    assert.equal(body.a.length, 5000);
    assert.deepEqual([body.a[0], body.a[4999]], ['v0', 'v4999']);
    assert.deepEqual({ ...body.b }, { c: '1', '': ['p0', 'p1', 'p2'] });
  });

  it('reads a JSON part without a file name (how the generated client sends an object field) as its value, so pointers reach into it', () => {
    const order = (kind: string, boundary: string) => ({
      bytes: Buffer.from(
        `--${boundary}\r\nContent-Disposition: form-data; name="meta"\r\nContent-Type: application/json\r\n\r\n${JSON.stringify({ kind, n: 1 })}\r\n` +
          `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="a.txt"\r\nContent-Type: text/plain\r\n\r\nabc\r\n--${boundary}--\r\n`,
      ),
      type: `multipart/form-data; boundary=${boundary}`,
    });
    const fingerprint = ({ bytes, type }: { bytes: Uint8Array; type: string }) =>
      computeFingerprint({ operationId: 'upload', pathParams: {}, query: {}, body: bodyForFingerprint(bytes, type), selection: { include: ['/meta/kind'], exclude: [] } });
    assert.notEqual(fingerprint(order('invoice', 'b1')), fingerprint(order('receipt', 'b1')));
    assert.equal(fingerprint(order('invoice', 'b1')), fingerprint(order('invoice', 'b2')));
    assert.deepEqual(multipartFields(order('invoice', 'b1').bytes, 'b1')![0], { name: 'meta', value: { kind: 'invoice', n: 1 } });
  });

  it('takes no boundary longer than 70 characters (a cut prefix could match delimiters that are not there)', () => {
    assert.equal(multipartBoundary(`multipart/form-data; boundary=${'b'.repeat(70)}`), 'b'.repeat(70));
    assert.equal(multipartBoundary(`multipart/form-data; boundary=${'b'.repeat(70)}--x`), undefined);
    assert.equal(multipartBoundary(`multipart/form-data; boundary="${'b'.repeat(71)}"`), undefined);
  });

  it('reads Content-Disposition parameters left to right, and takes no field from a part without headers', () => {
    const boundary = 'b1';
    const body = (disposition: string) => Buffer.from(`--${boundary}\r\nContent-Disposition: ${disposition}\r\n\r\nx\r\n--${boundary}--\r\n`);
    assert.deepEqual(multipartFields(body('form-data; filename="x; name=evil"; name="doc"'), boundary), [
      { name: 'doc', value: FilePart.of('x; name=evil', '', Buffer.from('x')) },
    ]);
    assert.deepEqual(multipartFields(body('form-data; name="a\\"b"'), boundary), [{ name: 'a"b', value: 'x' }]);
    assert.equal(multipartFields(body('attachment; name="a"'), boundary), undefined);
    assert.equal(multipartFields(body('form-data; name="a"; junk'), boundary), undefined);
    const headerless = Buffer.from(`--${boundary}\r\n\r\nContent-Disposition: form-data; name="a"\r\n\r\nx\r\n--${boundary}--\r\n`);
    assert.equal(multipartFields(headerless, boundary), undefined);
  });

  it('keeps a preamble out, reads RFC 5987 file names and binary parts', () => {
    const boundary = 'b0';
    const body = Buffer.concat([
      Buffer.from(`preamble\r\n--${boundary}\r\nContent-Disposition: form-data; name="doc"; filename*=UTF-8''r%C3%A9sum%C3%A9.pdf\r\nContent-Type: application/pdf\r\n\r\n`),
      Buffer.from([0x25, 0x50, 0xff, 0x00]),
      Buffer.from(`\r\n--${boundary}\r\nContent-Disposition: form-data; name="empty"\r\n\r\n\r\n--${boundary}--`),
    ]);
    const fields = multipartFields(body, boundary)!;
    assert.equal(fields.length, 2);
    assert.ok(fields[0]!.value instanceof FilePart);
    assert.equal(fields[0]!.value.filename, 'résumé.pdf');
    assert.equal(fields[0]!.value.size, 4);
    assert.deepEqual(fields[1], { name: 'empty', value: '' });
  });

  /** An Express app with one upload route: `parse` in front of the guard, the handler counting effects. */
  async function uploadRoute(parse: express.RequestHandler, run: (send: (file: string, purpose?: string) => Promise<{ status: number; replayed: string | null; body: string }>) => Promise<void>): Promise<number> {
    let effects = 0;
    const app = express();
    app.post('/things/:tenant', parse, createRouteGuard(contract, { store: new MemoryStore(), principal: () => 'u' }), (_req, res) => {
      effects += 1;
      res.status(201).json({ id: `file_${effects}` });
    });
    const server = await new Promise<import('node:http').Server>((resolve) => {
      const s = app.listen(0, '127.0.0.1', () => resolve(s));
    });
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/things/t1`;
      await run(async (file, purpose = 'dispute_evidence') => {
        const form = new FormData();
        form.append('purpose', purpose);
        form.append('file', new Blob([file], { type: 'text/plain' }), 'a.txt');
        const response = await fetch(url, { method: 'POST', headers: { 'idempotency-key': 'upload-1' }, body: form });
        return { status: response.status, replayed: response.headers.get('idempotent-replayed'), body: await response.text() };
      });
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
    return effects;
  }

  /** multer's memory storage, with `req.file` then served by a getter on the request's prototype instead of an own property. */
  function inheritedFile(): express.RequestHandler {
    const parse = multer({ storage: multer.memoryStorage() }).single('file');
    return (req, res, next) => {
      parse(req, res, (error?: unknown) => {
        const { file } = req as { file?: unknown };
        delete (req as { file?: unknown }).file;
        Object.setPrototypeOf(req, Object.create(Object.getPrototypeOf(req) as object, { file: { get: () => file } }) as object);
        next(error);
      });
    };
  }

  for (const [parser, parse] of [
    ['express.raw: the guard parses the parts', () => express.raw({ type: 'multipart/form-data' })],
    ['multer, memory storage: the files it takes out of the body are fingerprinted', () => multer({ storage: multer.memoryStorage() }).single('file')],
    ['multer, disk storage: the files it takes out of the body are fingerprinted', () => multer({ storage: multer.diskStorage({ destination: uploads }) }).single('file')],
    ['an upload middleware that serves the file from the request prototype (a getter): it is fingerprinted too', () => inheritedFile()],
  ] as const) {
    it(`over HTTP behind ${parser}: a retried upload (new boundary) replays, another file or field under the key is refused, one effect`, async () => {
      const effects = await uploadRoute(parse(), async (send) => {
        assert.deepEqual(await send('abc'), { status: 201, replayed: 'false', body: '{"id":"file_1"}' });
        assert.deepEqual(await send('abc'), { status: 201, replayed: 'true', body: '{"id":"file_1"}' });
        const other = await send('another file');
        assert.equal(other.status, 422, 'another file under the same key');
        assert.match(other.body, /idempotency-key-reused/);
        assert.equal((await send('abc', 'other purpose')).status, 422, 'another text field under the same key');
      });
      assert.equal(effects, 1);
    });
  }

  describe('behind Fastify', () => {
    /** A Fastify app whose multipart parser is `parse` (standing in for @fastify/multipart's two modes), with one guarded upload route. */
    async function fastifyUpload(parse: (raw: Buffer, type: string) => Promise<unknown>, run: (url: string) => Promise<void>): Promise<number> {
      let effects = 0;
      const app = Fastify();
      app.addContentTypeParser('multipart/form-data', { parseAs: 'buffer' }, (request, raw, done) => {
        parse(raw as Buffer, String(request.headers['content-type'])).then((body) => done(null, body), done);
      });
      const guard = createFastifyGuard(contract, { store: new MemoryStore(), principal: () => 'u' });
      app.post('/things/:tenant', { ...guard.hooks }, async (_request, reply) => {
        effects += 1;
        reply.code(201);
        return { id: `file_${effects}` };
      });
      const address = await app.listen({ port: 0, host: '127.0.0.1' });
      try {
        await run(`${address}/things/t1`);
      } finally {
        await app.close();
      }
      return effects;
    }
    const send = async (url: string, file: string) => {
      const form = new FormData();
      upload(file)(form);
      const response = await fetch(url, { method: 'POST', headers: { 'idempotency-key': 'upload-1' }, body: form });
      return { status: response.status, replayed: response.headers.get('idempotent-replayed'), body: await response.text() };
    };

    it('refuses a body no parser read (the handler would read the file itself): never one fingerprint for every upload', async () => {
      const effects = await fastifyUpload(
        async () => undefined,
        async (url) => {
          const answer = await send(url, 'abc');
          assert.equal(answer.status, 500);
          assert.match(answer.body, /the request body was not parsed before the guard/);
        },
      );
      assert.equal(effects, 0);
    });

    it('fingerprints the parts @fastify/multipart attaches with attachFieldsToBody: true (each holds the whole body again)', async () => {
      let effects = 0;
      const app = Fastify();
      await app.register(fastifyMultipart, { attachFieldsToBody: true });
      const guard = createFastifyGuard(contract, { store: new MemoryStore(), principal: () => 'u' });
      app.post('/things/:tenant', { ...guard.hooks }, async (request, reply) => {
        effects += 1;
        reply.code(201);
        return { id: `file_${effects}`, purpose: (request.body as { purpose: { value: string } }).purpose.value };
      });
      const address = await app.listen({ port: 0, host: '127.0.0.1' });
      try {
        const url = `${address}/things/t1`;
        const first = await send(url, 'abc');
        assert.deepEqual(first, { status: 201, replayed: 'false', body: '{"id":"file_1","purpose":"dispute_evidence"}' });
        assert.deepEqual(await send(url, 'abc'), { ...first, replayed: 'true' });
        assert.equal((await send(url, 'another file')).status, 422);
      } finally {
        await app.close();
      }
      assert.equal(effects, 1);
    });

    it("fingerprints parts read as key values (files as bytes, as attachFieldsToBody: 'keyValues' gives them)", async () => {
      const keyValues = async (raw: Buffer, type: string) => {
        const form = await new Response(new Uint8Array(raw), { headers: { 'content-type': type } }).formData();
        const entries: [string, string | Blob][] = [];
        form.forEach((value, name) => entries.push([name, value]));
        const out: Record<string, unknown> = {};
        for (const [name, value] of entries) out[name] = typeof value === 'string' ? value : Buffer.from(await value.arrayBuffer());
        return out;
      };
      // The bytes are hashed once, not written out as JSON (a 10 MB file would be a 100 MB canonical text).
      const parsed = bodyForFingerprint({ purpose: 'x', file: Buffer.from('abc'), more: [Buffer.from('d'), Buffer.from('e')] }, 'multipart/form-data; boundary=b');
      assert.deepEqual(JSON.parse(JSON.stringify(parsed)), JSON.parse(JSON.stringify({ purpose: 'x', file: FilePart.of('', '', Buffer.from('abc')), more: [FilePart.of('', '', Buffer.from('d')), FilePart.of('', '', Buffer.from('e'))] })));
      // Bracketed part names are nested as the raw multipart path nests them, so `/doc/front` sees the file.
      const flat = { 'doc[front]': Buffer.from('front'), 'doc[note]': 'n', 'docs[0]': Buffer.from('a'), 'docs[1]': Buffer.from('b') };
      const pointers: FieldSelection = { include: ['/doc/front', '/docs/1'], exclude: [] };
      const of = (body: unknown) => computeFingerprint({ operationId: 'upload', pathParams: {}, query: {}, body, selection: pointers });
      const nested = bodyForFingerprint(flat, 'multipart/form-data; boundary=b');
      assert.notEqual(of(nested), of(bodyForFingerprint({ ...flat, 'doc[front]': Buffer.from('other') }, 'multipart/form-data; boundary=b')));
      assert.notEqual(of(nested), of(bodyForFingerprint({ ...flat, 'docs[1]': Buffer.from('other') }, 'multipart/form-data; boundary=b')));
      assert.ok(JSON.stringify((nested as { doc: unknown }).doc).includes('"note":"n"'));
      // A JSON part's own list of none or one item is that value, not repeated parts: never the same as a text part or no part.
      const all: FieldSelection = { include: 'all', exclude: [] };
      const whole = (body: unknown) => computeFingerprint({ operationId: 'upload', pathParams: {}, query: {}, body: bodyForFingerprint(body, 'multipart/form-data; boundary=b'), selection: all });
      assert.notEqual(whole({ tags: ['a'] }), whole({ tags: 'a' }));
      assert.notEqual(whole({ tags: [] }), whole({}));
      assert.notEqual(whole({ tags: [['a', 'b']] }), whole({ tags: ['a', 'b'] }));
      const effects = await fastifyUpload(keyValues, async (url) => {
        assert.deepEqual(await send(url, 'abc'), { status: 201, replayed: 'false', body: '{"id":"file_1"}' });
        assert.deepEqual(await send(url, 'abc'), { status: 201, replayed: 'true', body: '{"id":"file_1"}' });
        assert.equal((await send(url, 'another file')).status, 422);
      });
      assert.equal(effects, 1);
    });
  });
});
