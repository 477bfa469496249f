/**
 * What generated clients put on the wire: each fixture's client is generated, compiled with tsc --strict, and
 * called against an HTTP server on 127.0.0.1 that records the request it gets.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { generateClient } from '../../../src/generate/client/index.js';
import { writeOutput } from '../../../src/generate/output.js';
import { loadDocument } from '../../../src/parser/index.js';
import { prepareTsProject, REPO_ROOT, runTsc } from '../tsc.js';

/** One request as the server received it. */
interface Received {
  readonly method: string;
  readonly url: string;
  readonly headers: IncomingHttpHeaders;
  readonly body: Buffer;
}

/** The generated module's surface these tests use: every operation takes `(input)` and resolves to a plain answer. */
interface AnyClient {
  createClient(options: { baseUrl: string }): Record<string, (input?: unknown) => Promise<{ kind?: string; status: number }>>;
}

/** One part of a multipart body: its headers (lower-case names) and content. */
interface Part {
  readonly headers: Record<string, string>;
  readonly content: Buffer;
}

/** Splits a `multipart/form-data` body by the boundary its content type names. */
function multipartParts(got: Received): Part[] {
  const boundary = /^multipart\/form-data; boundary=(.+)$/.exec(got.headers['content-type'] ?? '')?.[1];
  assert.ok(boundary !== undefined, `a multipart content type with a boundary: ${got.headers['content-type']}`);
  const text = got.body.toString('latin1');
  assert.ok(text.endsWith(`\r\n--${boundary}--\r\n`), 'the body ends with the closing delimiter');
  const sections = text.slice(0, -`\r\n--${boundary}--\r\n`.length).split(`\r\n--${boundary}\r\n`);
  assert.ok(sections[0]!.startsWith(`--${boundary}\r\n`));
  sections[0] = sections[0]!.slice(`--${boundary}\r\n`.length);
  return sections.map((section) => {
    const end = section.indexOf('\r\n\r\n');
    const headers = Object.fromEntries(
      section
        .slice(0, end)
        .split('\r\n')
        .map((line) => [line.slice(0, line.indexOf(':')).toLowerCase(), line.slice(line.indexOf(':') + 1).trim()]),
    );
    return { headers, content: Buffer.from(section.slice(end + 4), 'latin1') };
  });
}

/** `[content-disposition, content-type, content]` of each part, the content as text. */
function describeParts(parts: readonly Part[]): [string, string | undefined, string][] {
  return parts.map((part) => [part.headers['content-disposition']!, part.headers['content-type'], part.content.toString('utf8')]);
}

const FIXTURES = ['wire-2.0', 'wire-3.0'] as const;

describe('generate client: requests on the wire (generated, compiled, sent to 127.0.0.1)', function () {
  this.timeout(120_000);

  let dir: string;
  let server: Server;
  let baseUrl: string;
  let received: Received[] = [];
  /** How many of the next requests get a 503. */
  let failures = 0;
  const modules = new Map<string, AnyClient>();

  before(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'idemkit-client-wire-'));
    for (const name of FIXTURES) {
      const spec = path.join(REPO_ROOT, 'test', 'fixtures', 'client', `${name}.yaml`);
      await writeOutput(path.join(dir, 'src', name), generateClient(await loadDocument(spec), { source: `${name}.yaml` }));
    }
    // ES modules, as users of the generated client run it.
    writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ type: 'module', private: true }));
    const tsconfig = prepareTsProject(dir, { outDir: path.join(dir, 'out'), include: ['src/**/*.ts'] });
    assert.equal(await runTsc(tsconfig), '', 'the generated clients compile under tsc --strict');
    for (const name of FIXTURES) {
      modules.set(name, (await import(pathToFileURL(path.join(dir, 'out', 'src', name, 'index.js')).href)) as AnyClient);
    }
    server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        received.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks) });
        if (failures > 0) {
          failures--;
          res.writeHead(503, { 'content-type': 'application/json' }).end('{}');
          return;
        }
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });

  after(async () => {
    if (server !== undefined) await new Promise<void>((resolve) => server.close(() => resolve()));
    rmSync(dir, { recursive: true, force: true });
  });

  beforeEach(() => {
    received = [];
    failures = 0;
  });

  /** Calls `operation` of the `fixture` client; resolves to what the server received last (after `failures` 503s). */
  async function send(fixture: (typeof FIXTURES)[number], operation: string, input: unknown): Promise<Received> {
    const attempts = failures + 1;
    const client = modules.get(fixture)!.createClient({ baseUrl });
    const answer = await client[operation]!(input);
    assert.equal(answer.status, 200, JSON.stringify(answer));
    assert.equal(received.length, attempts);
    return received[attempts - 1]!;
  }

  it('2.0 collectionFormat: csv by default, ssv, tsv, pipes, multi in the query; pipes in the path; csv and ssv in headers', async () => {
    const got = await send('wire-2.0', 'findPets', {
      path: { ids: [1, 2] },
      query: { tags: ['a', 'b'], csv: ['x,y', 'z'], ssv: ['a', 'b c'], tsv: ['a', 'b'], pipes: [1, 2], multi: ['m', 'n'], limit: 5 },
      headers: { 'X-Tags': ['t1', 't2'], 'X-Spaced': ['s1', 's2'] },
    });
    assert.equal(got.method, 'GET');
    const [pathname, search] = got.url.split('?');
    assert.equal(pathname, '/pets/1|2');
    // A separator inside a value is percent-encoded; the list's own separators are not.
    assert.deepEqual(search!.split('&'), ['tags=a,b', 'csv=x%2Cy,z', 'ssv=a%20b%20c', 'tsv=a%09b', 'pipes=1|2', 'multi=m', 'multi=n', 'limit=5']);
    assert.equal(got.headers['x-tags'], 't1,t2');
    assert.equal(got.headers['x-spaced'], 's1 s2');
  });

  it('3.0 style/explode: label and matrix paths, form lists, space/pipe delimited, deepObject, form objects, exploded header objects', async () => {
    const got = await send('wire-3.0', 'findPets', {
      path: { label: ['a', 'b'], matrix: ['c', 'd'], simple: ['e', 'f'] },
      query: { tags: ['a', 'b'], csv: ['x', 'y'], spaced: ['s', 't'], piped: [1, 2], filter: { color: 'red', size: 2 }, point: { x: 1, y: 2 } },
      headers: { 'X-Pairs': { a: '1', b: '2' } },
      cookies: { session: 's; id=1', prefs: ['a', 'b'] },
    });
    const [pathname, search] = got.url.split('?');
    assert.equal(pathname, '/pets/.a,b/;matrix=c;matrix=d/e,f');
    assert.deepEqual(search!.split('&'), ['tags=a', 'tags=b', 'csv=x,y', 'spaced=s%20t', 'piped=1|2', 'filter[color]=red', 'filter[size]=2', 'point=x,1,y,2']);
    assert.equal(got.headers['x-pairs'], 'a=1,b=2');
    // One Cookie header; a `;` in a value is percent-encoded, so it cannot forge another cookie.
    assert.equal(got.headers.cookie, 'session=s%3B%20id%3D1; prefs=a,b');
  });

  it('cookie parameters join a Cookie header the caller gives with the call, whatever its case; absent ones are left out', async () => {
    const client = modules.get('wire-3.0')!.createClient({ baseUrl }) as unknown as Record<
      string,
      (input: unknown, call?: { headers?: Record<string, string> }) => Promise<{ status: number }>
    >;
    const answer = await client['findPets']!(
      { path: { label: ['a'], matrix: ['c'], simple: ['e'] }, cookies: { session: 'abc', theme: undefined } },
      { headers: { Cookie: 'tracking=off' } },
    );
    assert.equal(answer.status, 200);
    assert.equal(received.length, 1);
    assert.equal(received[0]!.headers.cookie, 'tracking=off; session=abc');
  });

  for (const fixture of FIXTURES) {
    it(`${fixture}: a body is sent in the media type the operation consumes — bytes and text as they are, JSON as JSON`, async () => {
      const bytes = new Uint8Array([0, 255, 10, 34, 1]);
      // A view into a larger buffer: only its own bytes go out.
      const view = new Uint8Array(new Uint8Array([9, 9, ...bytes, 9]).buffer, 2, bytes.length);
      const binary = await send(fixture, 'uploadFile', { path: { name: 'a.bin' }, body: view });
      assert.equal(binary.method, 'PUT');
      assert.equal(binary.url, '/files/a.bin');
      assert.equal(binary.headers['content-type'], 'application/octet-stream');
      assert.deepEqual([...binary.body], [...bytes]);

      received = [];
      const text = await send(fixture, 'uploadFile', { path: { name: 'a.txt' }, body: 'raw bytes' });
      assert.equal(text.headers['content-type'], 'application/octet-stream');
      assert.equal(text.body.toString('utf8'), 'raw bytes');

      received = [];
      const note = await send(fixture, 'createNote', { body: 'hello "world"' });
      assert.equal(note.headers['content-type'], 'text/plain');
      assert.equal(note.body.toString('utf8'), 'hello "world"');
    });
  }

  it('wire-2.0: JSON is picked when consumes lists it among others', async () => {
    const got = await send('wire-2.0', 'createPet', { body: { name: 'Rex' } });
    assert.equal(got.headers['content-type'], 'application/json');
    assert.deepEqual(JSON.parse(got.body.toString('utf8')), { name: 'Rex' });
  });

  it('2.0 formData in multipart/form-data: the file as a file part, text fields, csv joined, multi repeated', async () => {
    const file = new Blob(['\u0000PNG\r\n--not-a-boundary'], { type: 'image/png' });
    const got = await send('wire-2.0', 'uploadPhoto', { path: { id: 'p1' }, body: { file, caption: 'a "cat"\r\nphoto', tags: ['a', 'b'], labels: ['x', 'y'] } });
    assert.equal(got.url, '/pets/p1/photo');
    assert.deepEqual(describeParts(multipartParts(got)), [
      ['form-data; name="file"; filename="blob"', 'image/png', '\u0000PNG\r\n--not-a-boundary'],
      ['form-data; name="caption"', undefined, 'a "cat"\r\nphoto'],
      ['form-data; name="tags"', undefined, 'a,b'],
      ['form-data; name="labels"', undefined, 'x'],
      ['form-data; name="labels"', undefined, 'y'],
    ]);
  });

  it('a multipart body parses with a standard parser (undici, what Node servers and fetch use) into the same fields and files', async () => {
    const bytes = new Uint8Array([0, 13, 10, 45, 45, 255]);
    const got = await send('wire-3.0', 'upload', { body: { file: new File([bytes], 'a.bin', { type: 'application/x-thing' }), note: 'n', extra: ['x', 'y'] } });
    const form = await new Response(new Uint8Array(got.body), { headers: { 'content-type': got.headers['content-type']! } }).formData();
    const file = form.get('file');
    assert.ok(file instanceof File);
    assert.equal(file.name, 'a.bin');
    assert.equal(file.type, 'application/x-thing');
    assert.deepEqual([...new Uint8Array(await file.arrayBuffer())], [...bytes]);
    assert.equal(form.get('note'), 'n');
    assert.deepEqual(form.getAll('extra'), ['x', 'y']);
  });

  it('2.0 formData in application/x-www-form-urlencoded: collectionFormat pipes and multi, scalars as they are', async () => {
    const got = await send('wire-2.0', 'login', { body: { user: 'ann lee', scopes: ['read', 'write'], roles: ['admin', 'ops'], remember: true } });
    assert.equal(got.headers['content-type'], 'application/x-www-form-urlencoded');
    assert.equal(got.body.toString('utf8'), 'user=ann%20lee&scopes=read|write&roles=admin&roles=ops&remember=true');
    assert.deepEqual(new URLSearchParams(got.body.toString('utf8')).getAll('roles'), ['admin', 'ops']);
  });

  it('3.0 multipart/form-data: files (a File keeps its name), bytes, JSON objects, numbers; a retry sends the same bytes and boundary', async () => {
    const file = new File([new Uint8Array([0, 1, 2, 255])], 'scan "1".pdf', { type: 'application/pdf' });
    const input = { body: { file, extra: [new Uint8Array([7, 8]), 'as text'], meta: { kind: 'scan' }, note: 'ünïcode', count: 3 } };
    failures = 1;
    const got = await send('wire-3.0', 'upload', input);
    assert.equal(received.length, 2, 'the first attempt got a 503 and was retried');
    assert.equal(received[0]!.headers['content-type'], received[1]!.headers['content-type']);
    assert.ok(received[0]!.body.equals(received[1]!.body), 'both attempts sent the same bytes');
    const parts = multipartParts(got);
    assert.deepEqual([...parts[0]!.content], [0, 1, 2, 255]);
    assert.deepEqual([...parts[1]!.content], [7, 8]);
    assert.deepEqual(describeParts(parts).map(([disposition, type, content], i) => [disposition, type, i < 2 ? '' : content]), [
      ['form-data; name="file"; filename="scan %221%22.pdf"', 'application/pdf', ''],
      ['form-data; name="extra"; filename="blob"', 'application/octet-stream', ''],
      ['form-data; name="extra"', undefined, 'as text'],
      ['form-data; name="meta"', 'application/json', '{"kind":"scan"}'],
      ['form-data; name="note"', undefined, 'ünïcode'],
      ['form-data; name="count"', undefined, '3'],
    ]);
  });

  it('3.0 application/x-www-form-urlencoded without encoding: lists repeated (OpenAPI form default), objects bracketed as Stripe-style APIs read them', async () => {
    const got = await send('wire-3.0', 'token', { body: { grant_type: 'client_credentials', scope: ['a', 'b'], metadata: { k: 'v' } } });
    assert.equal(got.headers['content-type'], 'application/x-www-form-urlencoded');
    assert.equal(decodeURIComponent(got.body.toString('utf8')), 'grant_type=client_credentials&scope=a&scope=b&metadata[k]=v');
  });

  it('3.0 encoding style/explode on urlencoded fields: spaceDelimited, repeated form, deepObject; fields without one stay bracketed', async () => {
    const got = await send('wire-3.0', 'encodedToken', {
      body: { grant_type: 'client_credentials', scope: ['read', 'write'], roles: ['a', 'b'], filter: { color: 'red' }, metadata: { k: 'v' } },
    });
    assert.equal(got.body.toString('utf8'), 'grant_type=client_credentials&scope=read%20write&roles=a&roles=b&filter[color]=red&metadata[k]=v');
  });

  it('parameters and form fields named like Object.prototype members (or __proto__) keep their formats; the client compiles', async () => {
    const input = JSON.parse(
      '{"query":{"constructor":["a","b"],"__proto__":["c","d"]},"cookies":{"toString":["e","f"]},"headers":{"hasOwnProperty":{"k":"v"}},' +
        '"body":{"__proto__":["g","h"],"valueOf":["i","j"]}}',
    ) as unknown;
    const got = await send('wire-3.0', 'oddNames', input);
    assert.deepEqual(got.url.split('?')[1]!.split('&'), ['constructor=a,b', '__proto__=c,d']);
    assert.equal(got.headers.cookie, 'toString=e,f');
    assert.equal(got.headers['hasownproperty'], 'k=v');
    assert.equal(got.body.toString('utf8'), '__proto__=g|h&valueOf=i%20j');
  });

  it('3.0 encoding contentType on multipart parts: typeless bytes and text get the named type; wildcards and header-breaking values are ignored', async () => {
    const got = await send('wire-3.0', 'uploadScan', {
      body: {
        image: new Uint8Array([1]),
        raw: new Uint8Array([2]),
        caption: '**bold**',
        label: 'plain',
        meta: { kind: 'scan' },
        tags: ['x', 'y'],
      },
    });
    assert.deepEqual(describeParts(multipartParts(got)).map(([disposition, type]) => [disposition, type]), [
      ['form-data; name="image"; filename="blob"', 'image/png'],
      ['form-data; name="raw"; filename="blob"', 'application/octet-stream'],
      ['form-data; name="caption"', 'text/markdown'],
      ['form-data; name="label"', undefined],
      ['form-data; name="meta"', 'application/vnd.scan+json'],
      ['form-data; name="tags"', undefined],
    ]);
    assert.equal(multipartParts(got)[5]!.content.toString('utf8'), 'x,y');
    assert.ok(!got.body.toString('latin1').includes('X-Injected'), 'a CR LF in a spec value never reaches the wire');
    // A File keeps its own type over the document's.
    received = [];
    const typed = await send('wire-3.0', 'uploadScan', { body: { image: new File([new Uint8Array([1])], 'a.jpg', { type: 'image/jpeg' }) } });
    assert.equal(multipartParts(typed)[0]!.headers['content-type'], 'image/jpeg');
  });
});
