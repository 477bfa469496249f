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
  createClient(options: { baseUrl: string }): Record<string, (input?: unknown) => Promise<{ ok: boolean; status: number }>>;
}

const FIXTURES = ['wire-2.0', 'wire-3.0'] as const;

describe('generate client: requests on the wire (generated, compiled, sent to 127.0.0.1)', function () {
  this.timeout(120_000);

  let dir: string;
  let server: Server;
  let baseUrl: string;
  let received: Received[] = [];
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
  });

  /** Calls `operation` of the `fixture` client once; resolves to what the server received. */
  async function send(fixture: (typeof FIXTURES)[number], operation: string, input: unknown): Promise<Received> {
    const client = modules.get(fixture)!.createClient({ baseUrl });
    const answer = await client[operation]!(input);
    assert.equal(answer.status, 200);
    assert.equal(received.length, 1);
    return received[0]!;
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
    });
    const [pathname, search] = got.url.split('?');
    assert.equal(pathname, '/pets/.a,b/;matrix=c;matrix=d/e,f');
    assert.deepEqual(search!.split('&'), ['tags=a', 'tags=b', 'csv=x,y', 'spaced=s%20t', 'piped=1|2', 'filter[color]=red', 'filter[size]=2', 'point=x,1,y,2']);
    assert.equal(got.headers['x-pairs'], 'a=1,b=2');
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
});
