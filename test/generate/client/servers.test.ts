/**
 * Where generated clients send requests: the document's servers (3.x `servers` with variables and queries, path-
 * and operation-level overrides; 2.0 `schemes` / `host` / `basePath`), the caller's `baseUrl` and
 * `operationServers`, paths written without a leading `/`, and the Swagger 2.0 `$ref: Name` shorthand. Each client
 * is generated, compiled with tsc --strict next to a usage file, and called against HTTP servers on 127.0.0.1 (the
 * API's, and an upload host's) that record the URLs.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { generateClient } from '../../../src/generate/client/index.js';
import { documentServers, operationServer } from '../../../src/generate/client/servers.js';
import { writeOutput } from '../../../src/generate/output.js';
import { loadDocument } from '../../../src/parser/index.js';
import { prepareTsProject, runTsc } from '../tsc.js';

/** The generated module's surface these tests use. */
interface AnyClient {
  readonly DEFAULT_SERVER_URL: string;
  readonly SERVERS: readonly { url: string; description?: string }[];
  createClient(options?: { baseUrl?: string; operationServers?: Record<string, string> }): Record<string, (input?: unknown) => Promise<{ ok: boolean; status: number; body: unknown }>>;
}

/** Swagger 2.0: `host` + `basePath`, a path without its leading `/`, the `$ref: Name` shorthand. */
const swagger = (port: number): string => `
swagger: "2.0"
info: { title: charges, version: "1" }
host: 127.0.0.1:${port}
basePath: /v1
schemes: [http]
paths:
  charges/{id}:
    get:
      operationId: getCharge
      parameters:
        - $ref: ChargeId
      responses:
        "200": { description: ok, schema: { $ref: Charge } }
  /charges:
    post:
      operationId: createCharge
      parameters:
        - { name: body, in: body, required: true, schema: { $ref: ChargeInput } }
      responses:
        "200": { $ref: ChargeAnswer }
parameters:
  ChargeId: { name: id, in: path, required: true, type: string }
responses:
  ChargeAnswer: { description: ok, schema: { $ref: Charge } }
definitions:
  Charge:
    type: object
    required: [id, lines]
    properties:
      id: { type: string }
      lines: { type: array, items: { $ref: Line } }
  ChargeInput: { type: object, required: [amount], properties: { amount: { type: integer } } }
  Line: { type: object, required: [sku], properties: { sku: { type: string } } }
`;

/** OpenAPI 3.0: a server URL with variables, a path-level absolute server and an operation-level relative one. */
const servers = (port: number): string => `
openapi: 3.0.3
info: { title: items, version: "1" }
servers:
  - url: "{scheme}://127.0.0.1:{port}/{version}"
    description: local
    variables:
      scheme: { default: http, enum: [http, https] }
      port: { default: "${port}" }
      version: { default: v2 }
  - url: https://api.example.com/v2
paths:
  /items:
    get:
      operationId: listItems
      responses: { "200": { description: ok } }
  /uploads:
    servers:
      - url: http://127.0.0.1:${port}/upload-host
    post:
      operationId: upload
      responses: { "200": { description: ok } }
    get:
      operationId: uploadStatus
      servers:
        - url: /status-host
      responses: { "200": { description: ok } }
`;

/** OpenAPI 3.1 with a relative server URL only: the caller gives the server, the client adds the path. */
const relative = `
openapi: 3.1.0
info: { title: relative, version: "1" }
servers:
  - url: /v1
paths:
  /items:
    get:
      operationId: listItems
      responses: { "200": { description: ok } }
`;

/**
 * OpenAPI 3.0 whose server is only a path, with operations on servers of their own: a path (`/v2`, path-level) and
 * an absolute upload host (operation-level).
 */
const ownServers = (uploadsPort: number): string => `
openapi: 3.0.3
info: { title: own servers, version: "1" }
servers:
  - url: /v1
paths:
  /orders:
    get:
      operationId: listOrders
      responses: { "200": { description: ok } }
  /files:
    servers:
      - url: /v2
    post:
      operationId: createFile
      responses: { "200": { description: ok } }
    put:
      operationId: uploadFile
      servers:
        - url: http://127.0.0.1:${uploadsPort}/blobs
      responses: { "200": { description: ok } }
`;

/** A server URL with a query (Azure's `api-version`), and an operation that may set the same parameter itself. */
const query = (port: number): string => `
openapi: 3.0.3
info: { title: query, version: "1" }
servers:
  - url: http://127.0.0.1:${port}/v1?api-version=2024-01-01
paths:
  /orders:
    get:
      operationId: listOrders
      parameters:
        - { name: api-version, in: query, schema: { type: string } }
        - { name: limit, in: query, schema: { type: integer } }
      responses: { "200": { description: ok } }
`;

/** A relative server URL of two segments. */
const gateway = `
openapi: 3.0.3
info: { title: gateway, version: "1" }
servers:
  - url: /api/v1
paths:
  /orders:
    get:
      operationId: listOrders
      responses: { "200": { description: ok } }
`;

/** Compiled with the clients: what a user writes against them (each `@ts-expect-error` must be a real error). */
const USAGE = `
import * as charges from './swagger/index.js';
import * as items from './servers/index.js';
import * as relative from './relative/index.js';
import * as own from './own/index.js';

// The document says where the API is: no options needed.
charges.createClient();
items.createClient({});
// @ts-expect-error the document gives only a path: baseUrl is required
relative.createClient();
relative.createClient({ baseUrl: 'https://api.example.com' });
// Only operations with a server of their own can be sent elsewhere.
own.createClient({ baseUrl: 'https://api.example.com', operationServers: { uploadFile: 'http://127.0.0.1:9', createFile: 'http://127.0.0.1:9' } });
// @ts-expect-error listOrders has no server of its own: baseUrl says where it goes
own.createClient({ baseUrl: 'https://api.example.com', operationServers: { listOrders: 'http://127.0.0.1:9' } });

// \`$ref: Charge\` is the definition Charge, not unknown.
const charge: charges.Charge = { id: 'ch_1', lines: [{ sku: 'a' }] };
const ok: charges.GetChargeOk = charge;
const created: charges.CreateChargeOk = charge;
const input: charges.CreateChargeInput = { body: { amount: 5 } };
// @ts-expect-error the Line definition types sku as a string
const wrong: charges.Charge = { id: 'ch_1', lines: [{ sku: 1 }] };
// @ts-expect-error the ChargeId parameter is required
const missing: charges.GetChargeInput = {};
export { ok, created, input, wrong, missing };
`;

describe('generate client: where requests go (servers, baseUrl, paths; generated, compiled, sent to 127.0.0.1)', function () {
  this.timeout(120_000);

  let dir: string;
  let server: Server;
  let uploads: Server;
  let port: number;
  let origin: string;
  let uploadsOrigin: string;
  let received: string[] = [];
  const modules = new Map<string, AnyClient>();

  /** An HTTP server on 127.0.0.1 that records each request as `METHOD url` (after `label`, if any). */
  async function recorder(label: string): Promise<[Server, string]> {
    const recording = createServer((req, res) => {
      received.push(`${label}${req.method ?? ''} ${req.url ?? ''}`);
      req.resume();
      req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end('{"id":"ch_1","lines":[]}'));
    });
    await new Promise<void>((resolve) => recording.listen(0, '127.0.0.1', resolve));
    return [recording, `http://127.0.0.1:${(recording.address() as AddressInfo).port}`];
  }

  before(async () => {
    [server, origin] = await recorder('');
    [uploads, uploadsOrigin] = await recorder('uploads: ');
    port = (server.address() as AddressInfo).port;
    dir = mkdtempSync(path.join(os.tmpdir(), 'idemkit-client-servers-'));
    const uploadsPort = (uploads.address() as AddressInfo).port;
    const specs = { swagger: swagger(port), servers: servers(port), relative, own: ownServers(uploadsPort), query: query(port), gateway };
    for (const [name, text] of Object.entries(specs)) {
      const spec = path.join(dir, `${name}.yaml`);
      writeFileSync(spec, text);
      await writeOutput(path.join(dir, 'src', name), generateClient(await loadDocument(spec), { source: `${name}.yaml` }));
    }
    writeFileSync(path.join(dir, 'src', 'usage.ts'), USAGE);
    writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ type: 'module', private: true }));
    const tsconfig = prepareTsProject(dir, { outDir: path.join(dir, 'out'), include: ['src/**/*.ts'] });
    assert.equal(await runTsc(tsconfig), '', 'the generated clients and the usage file compile under tsc --strict');
    for (const name of Object.keys(specs)) {
      modules.set(name, (await import(pathToFileURL(path.join(dir, 'out', 'src', name, 'index.js')).href)) as AnyClient);
    }
  });

  after(async () => {
    for (const open of [server, uploads]) if (open !== undefined) await new Promise<void>((resolve) => open.close(() => resolve()));
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  });

  beforeEach(() => {
    received = [];
  });

  /** Calls each `[operation, input]` in turn; resolves to the requests the server got. */
  async function send(client: ReturnType<AnyClient['createClient']>, ...calls: [string, unknown][]): Promise<string[]> {
    for (const [operation, input] of calls) {
      const answer = await client[operation]!(input);
      assert.equal(answer.status, 200, `${operation}: ${JSON.stringify(answer)}`);
    }
    return received;
  }

  it('Swagger 2.0: with no baseUrl the client sends to schemes://host + basePath (/v1), and exports that URL', async () => {
    const mod = modules.get('swagger')!;
    assert.equal(mod.DEFAULT_SERVER_URL, `${origin}/v1`);
    assert.deepEqual(mod.SERVERS, [{ url: `${origin}/v1` }]);
    const got = await send(mod.createClient(), ['createCharge', { body: { amount: 5 } }]);
    assert.deepEqual(got, ['POST /v1/charges']);
  });

  it('a path written without its leading `/` is joined to the base URL with one', async () => {
    const got = await send(modules.get('swagger')!.createClient(), ['getCharge', { path: { id: 'ch_1' } }]);
    assert.deepEqual(got, ['GET /v1/charges/ch_1']);
  });

  it('Swagger 2.0 `$ref: Name` shorthand: parameters, responses and schemas follow it (the usage file type-checks against Charge)', async () => {
    const mod = modules.get('swagger')!;
    const answer = await mod.createClient().getCharge!({ path: { id: 'ch_1' } });
    assert.deepEqual(answer.body, { id: 'ch_1', lines: [] });
  });

  it("3.x: server variables take their defaults; path- and operation-level servers are each operation's default; a baseUrl moves the document's server, and on another origin every operation's", async () => {
    const mod = modules.get('servers')!;
    assert.equal(mod.DEFAULT_SERVER_URL, `${origin}/v2`);
    assert.deepEqual(mod.SERVERS, [{ url: `${origin}/v2`, description: 'local' }, { url: 'https://api.example.com/v2' }]);
    const calls: [string, unknown][] = [['listItems', {}], ['upload', {}], ['uploadStatus', {}]];
    // The operation-level `/status-host` is relative: resolved against the client's base URL.
    assert.deepEqual(await send(mod.createClient(), ...calls), ['GET /v2/items', 'POST /upload-host/uploads', 'GET /status-host/uploads']);
    received = [];
    // A baseUrl on the documented server's origin moves the document's path only: the absolute path-level server
    // stays, and the relative one goes after baseUrl (it does not end with /v2) instead of /v2.
    assert.deepEqual(await send(mod.createClient({ baseUrl: `${origin}/staging/` }), ...calls), ['GET /staging/items', 'POST /upload-host/uploads', 'GET /staging/status-host/uploads']);
    received = [];
    // On another origin (a mock), baseUrl moves the whole API: the absolute server's path goes under it too.
    assert.deepEqual(await send(mod.createClient({ baseUrl: `${uploadsOrigin}/staging/` }), ...calls), [
      'uploads: GET /staging/items',
      'uploads: POST /staging/upload-host/uploads',
      'uploads: GET /staging/status-host/uploads',
    ]);
  });

  it("a relative server URL is added to the caller's baseUrl once, whether baseUrl names the origin or already ends with the path", async () => {
    const mod = modules.get('relative')!;
    assert.equal(mod.DEFAULT_SERVER_URL, '/v1');
    assert.deepEqual(await send(mod.createClient({ baseUrl: origin }), ['listItems', {}]), ['GET /v1/items']);
    received = [];
    assert.deepEqual(await send(mod.createClient({ baseUrl: `${origin}/v1` }), ['listItems', {}]), ['GET /v1/items']);
    assert.throws(() => mod.createClient({}), /gives only the path "\/v1".*pass baseUrl/);
  });

  it("a document whose server is only a path: an operation's relative server replaces that path after baseUrl, an absolute one is used as is", async () => {
    const mod = modules.get('own')!;
    const calls: [string, unknown][] = [['listOrders', {}], ['createFile', {}], ['uploadFile', {}]];
    const expected = ['GET /v1/orders', 'POST /v2/files', 'uploads: PUT /blobs/files'];
    // Whether baseUrl names the origin or already ends with the document's path /v1.
    for (const baseUrl of [origin, `${origin}/v1/`]) {
      received = [];
      assert.deepEqual(await send(mod.createClient({ baseUrl }), ...calls), expected, baseUrl);
    }
    // Behind a gateway that mounts the API under /mount: both the document's path and /v2 go under it.
    received = [];
    assert.deepEqual(await send(mod.createClient({ baseUrl: `${origin}/mount` }), ...calls), ['GET /mount/v1/orders', 'POST /mount/v2/files', 'uploads: PUT /blobs/files']);
    // operationServers sends an operation elsewhere, used as is.
    received = [];
    const moved = mod.createClient({ baseUrl: origin, operationServers: { uploadFile: `${origin}/local-blobs/`, createFile: `${uploadsOrigin}/files-host` } });
    assert.deepEqual(await send(moved, ...calls), ['GET /v1/orders', 'uploads: POST /files-host/files', 'PUT /local-blobs/files']);
    assert.throws(() => mod.createClient({ baseUrl: origin, operationServers: { uploadFile: 'localhost:9' } }), (error: unknown) => error instanceof TypeError && /operationServers\.uploadFile "localhost:9" is not an http\(s\) URL/.test(error.message));
  });

  it("a server URL's query is sent with every request (a parameter the call sets replaces it); a baseUrl's query is split off and kept", async () => {
    const mod = modules.get('query')!;
    assert.equal(mod.DEFAULT_SERVER_URL, `${origin}/v1?api-version=2024-01-01`);
    const got = await send(mod.createClient(), ['listOrders', {}], ['listOrders', { query: { limit: 5 } }], ['listOrders', { query: { 'api-version': '2025-05-01' } }]);
    assert.deepEqual(got, ['GET /v1/orders?api-version=2024-01-01', 'GET /v1/orders?api-version=2024-01-01&limit=5', 'GET /v1/orders?api-version=2025-05-01']);
    received = [];
    const relativeWithKey = modules.get('relative')!.createClient({ baseUrl: `${origin}?code=KEY` });
    assert.deepEqual(await send(relativeWithKey, ['listItems', {}]), ['GET /v1/items?code=KEY']);
    received = [];
    assert.deepEqual(await send(mod.createClient({ baseUrl: `${origin}/v1?code=KEY` }), ['listOrders', {}]), ['GET /v1/orders?api-version=2024-01-01&code=KEY']);
  });

  it('a baseUrl ending with only the start of a two-segment document path is refused; the origin or the whole path work', async () => {
    const mod = modules.get('gateway')!;
    assert.throws(() => mod.createClient({ baseUrl: `${origin}/api` }), (error: unknown) => error instanceof TypeError && /ends with "\/api", only the start of the document's path "\/api\/v1"/.test(error.message));
    assert.deepEqual(await send(mod.createClient({ baseUrl: origin }), ['listOrders', {}]), ['GET /api/v1/orders']);
    received = [];
    assert.deepEqual(await send(mod.createClient({ baseUrl: `${origin}/api/v1` }), ['listOrders', {}]), ['GET /api/v1/orders']);
  });
});

describe('generate client: the servers a document names', () => {
  let dir: string;
  before(() => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'idemkit-client-server-list-'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  async function load(text: string) {
    const spec = path.join(dir, `spec-${Math.random().toString(36).slice(2)}.yaml`);
    writeFileSync(spec, text);
    return loadDocument(spec);
  }
  const PATHS = 'paths:\n  /a:\n    get:\n      responses: { "200": { description: ok } }\n';

  it('Swagger 2.0: https first when listed, https when no scheme is; a basePath without its `/` or without a host is a path', async () => {
    const both = await load(`swagger: "2.0"\ninfo: { title: t, version: "1" }\nhost: api.example.com\nbasePath: /v1/\nschemes: [http, https, wss]\n${PATHS}`);
    assert.deepEqual(documentServers(both), { servers: [{ url: 'https://api.example.com/v1' }, { url: 'http://api.example.com/v1' }], server: 'https://api.example.com/v1', absolute: true });
    const none = await load(`swagger: "2.0"\ninfo: { title: t, version: "1" }\nhost: API.example.com:8443\n${PATHS}`);
    assert.equal(documentServers(none).server, 'https://api.example.com:8443');
    const pathOnly = await load(`swagger: "2.0"\ninfo: { title: t, version: "1" }\nbasePath: open-banking/v2.1/\n${PATHS}`);
    assert.deepEqual(documentServers(pathOnly), { servers: [{ url: '/open-banking/v2.1' }], server: '/open-banking/v2.1', absolute: false });
  });

  it('3.x: the first absolute server is the default; unusable URLs (other schemes, a variable without a default) are left out; queries kept; no servers is `/`', async () => {
    const doc = await load(
      [
        'openapi: 3.0.3',
        'info: { title: t, version: "1" }',
        'servers:',
        '  - url: ./api/',
        '  - url: "javascript:alert(1)"',
        '  - url: "https://{tenant}.example.com"',
        '  - url: "//cdn.example.com/v3"',
        '  - url: "https://api.example.com/{v}"',
        '    variables: { v: { default: v9 } }',
        PATHS,
      ].join('\n'),
    );
    assert.deepEqual(documentServers(doc), {
      servers: [{ url: '/api' }, { url: 'https://cdn.example.com/v3' }, { url: 'https://api.example.com/v9' }],
      server: 'https://cdn.example.com/v3',
      absolute: true,
    });
    const queried = await load(`openapi: 3.0.3\ninfo: { title: t, version: "1" }\nservers:\n  - url: "./v1/?api-version=1#frag"\n  - url: "https://API.example.com/v1/?api-version=2024-01-01&x=a b"\n${PATHS}`);
    // A query is kept (clients send it with every request), a fragment dropped; the URL parser encodes what it must.
    assert.deepEqual(documentServers(queried).servers, [{ url: '/v1?api-version=1' }, { url: 'https://api.example.com/v1?api-version=2024-01-01&x=a%20b' }]);
    const bare = await load(`openapi: 3.1.0\ninfo: { title: t, version: "1" }\n${PATHS}`);
    assert.deepEqual(documentServers(bare), { servers: [{ url: '/' }], server: '/', absolute: false });
    assert.equal(operationServer(bare, bare.operations[0]!, '/'), null);
  });
});
