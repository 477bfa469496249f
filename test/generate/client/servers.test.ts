/**
 * Where generated clients send requests: the document's servers (3.x `servers` with variables, path- and
 * operation-level overrides; 2.0 `schemes` / `host` / `basePath`), the caller's `baseUrl`, paths written
 * without a leading `/`, and the Swagger 2.0 `$ref: Name` shorthand. Each client is generated, compiled with
 * tsc --strict next to a usage file, and called against an HTTP server on 127.0.0.1 that records the URLs.
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
  createClient(options?: { baseUrl?: string }): Record<string, (input?: unknown) => Promise<{ ok: boolean; status: number; body: unknown }>>;
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

/** Compiled with the clients: what a user writes against them (each `@ts-expect-error` must be a real error). */
const USAGE = `
import * as charges from './swagger/index.js';
import * as items from './servers/index.js';
import * as relative from './relative/index.js';

// The document says where the API is: no options needed.
charges.createClient();
items.createClient({});
// @ts-expect-error the document gives only a path: baseUrl is required
relative.createClient();
relative.createClient({ baseUrl: 'https://api.example.com' });

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
  let port: number;
  let origin: string;
  let received: string[] = [];
  const modules = new Map<string, AnyClient>();

  before(async () => {
    server = createServer((req, res) => {
      received.push(`${req.method ?? ''} ${req.url ?? ''}`);
      req.resume();
      req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end('{"id":"ch_1","lines":[]}'));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
    origin = `http://127.0.0.1:${port}`;
    dir = mkdtempSync(path.join(os.tmpdir(), 'idemkit-client-servers-'));
    const specs = { swagger: swagger(port), servers: servers(port), relative };
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
    if (server !== undefined) await new Promise<void>((resolve) => server.close(() => resolve()));
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

  it("3.x: server variables take their defaults; path- and operation-level servers are each operation's default; a baseUrl applies to all", async () => {
    const mod = modules.get('servers')!;
    assert.equal(mod.DEFAULT_SERVER_URL, `${origin}/v2`);
    assert.deepEqual(mod.SERVERS, [{ url: `${origin}/v2`, description: 'local' }, { url: 'https://api.example.com/v2' }]);
    const calls: [string, unknown][] = [['listItems', {}], ['upload', {}], ['uploadStatus', {}]];
    // The operation-level `/status-host` is relative: resolved against the client's base URL.
    assert.deepEqual(await send(mod.createClient(), ...calls), ['GET /v2/items', 'POST /upload-host/uploads', 'GET /status-host/uploads']);
    received = [];
    assert.deepEqual(await send(mod.createClient({ baseUrl: `${origin}/staging/` }), ...calls), ['GET /staging/items', 'POST /staging/uploads', 'GET /staging/uploads']);
  });

  it("a relative server URL is added to the caller's baseUrl once, whether baseUrl names the origin or already ends with the path", async () => {
    const mod = modules.get('relative')!;
    assert.equal(mod.DEFAULT_SERVER_URL, '/v1');
    assert.deepEqual(await send(mod.createClient({ baseUrl: origin }), ['listItems', {}]), ['GET /v1/items']);
    received = [];
    assert.deepEqual(await send(mod.createClient({ baseUrl: `${origin}/v1` }), ['listItems', {}]), ['GET /v1/items']);
    assert.throws(() => mod.createClient({}), /gives only the path "\/v1".*pass baseUrl/);
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

  it('3.x: the first absolute server is the default; unusable URLs (other schemes, a variable without a default) are left out; no servers is `/`', async () => {
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
    const bare = await load(`openapi: 3.1.0\ninfo: { title: t, version: "1" }\n${PATHS}`);
    assert.deepEqual(documentServers(bare), { servers: [{ url: '/' }], server: '/', absolute: false });
    assert.equal(operationServer(bare, bare.operations[0]!, '/'), null);
  });
});
