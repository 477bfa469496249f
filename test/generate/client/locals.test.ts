/**
 * Operation method names never collide with what `client.ts` declares for itself: CLIENT_LOCALS is checked against
 * every identifier a generated `client.ts` declares or imports (read back with the TypeScript parser), and a
 * document whose operationIds are all of those names compiles.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import ts from 'typescript';
import { buildClientModel, CLIENT_EXPORTS, CLIENT_LOCALS, generateClient, SCHEMA_GLOBALS } from '../../../src/generate/client/index.js';
import { writeOutput } from '../../../src/generate/output.js';
import { loadDocument } from '../../../src/parser/index.js';
import { contractYaml } from '../../client/contracts.js';
import { REPO_ROOT, strictDiagnostics, tsFiles } from '../tsc.js';

/**
 * A document whose operationIds are every reserved name, covering each branch of the client template: contracted
 * operations with a status route (with and without required input, itself named like a local), operations without
 * a contract, and operations with servers of their own (absolute and a path).
 */
function collidingSpec(): string {
  // The names helper-70 found breaking a client (`contract` as a status route), whatever the lists hold.
  const reserved = [...new Set([...CLIENT_LOCALS, ...CLIENT_EXPORTS, 'contract', 'sent', 'statusInput'])];
  const ops = reserved.map((name, i) => {
    const own = name === 'base' ? "\n    servers: [{ url: 'https://uploads.example.com' }]" : name === 'call' ? "\n    servers: [{ url: '/v2' }]" : '';
    const param = name === 'contract' ? '/{id}' : '';
    const params = param === '' ? '' : '\n      parameters: [{ name: id, in: path, required: true, schema: { type: string } }]';
    return `  /ops/${i}${param}:${own}\n    get:\n      operationId: ${JSON.stringify(name)}${params}\n      responses: { '200': { description: ok, content: { application/json: { schema: { type: object } } } } }`;
  });
  const contracted = (id: string, status: string) => `  /commands/${id}:
    post:
      operationId: ${id}
      requestBody: { required: true, content: { application/json: { schema: { type: object } } } }
      responses: { '201': { description: created } }
      x-idempotency:
${contractYaml('        ')}
        effect: { owner: o, external: false, statusRoute: ${JSON.stringify(status)} }`;
  return `openapi: 3.0.3
info: { title: operationIds named like the client's own identifiers, version: '1' }
servers: [{ url: 'https://api.example.com' }]
paths:
${ops.join('\n')}
${contracted('createOrder', 'contract')}
${contracted('createOther', 'statusInput')}
`;
}

/** The globals `schema.ts` uses, whatever the list holds (the client did not compile for Service Catalog's `PropertyKey`). */
const GLOBAL_NAMES = [...new Set([...SCHEMA_GLOBALS, 'PropertyKey', 'Record', 'Blob'])];

/**
 * A document whose schemas are named like every global `schema.ts` uses (AWS Service Catalog has a `PropertyKey`),
 * with a body key (the key-optional helper) and a binary body (`Blob`, `ArrayBuffer`, `ArrayBufferView`).
 */
function globalNamedSchemasSpec(): string {
  const schemas = GLOBAL_NAMES.map((name) => `    ${name}: { type: string, enum: [A, B] }`).join('\n');
  const fields = GLOBAL_NAMES.map((name) => `        ${name.toLowerCase()}: { $ref: '#/components/schemas/${name}' }`).join('\n');
  return `openapi: 3.0.3
info: { title: schemas named like globals, version: '1' }
servers: [{ url: 'https://api.example.com' }]
paths:
  /things:
    post:
      operationId: createThing
      requestBody: { required: true, content: { application/json: { schema: { $ref: '#/components/schemas/CreateThing' } } } }
      responses: { '201': { description: created, content: { application/json: { schema: { $ref: '#/components/schemas/CreateThing' } } } } }
      x-idempotency:
        key: { body: /token, required: true, maxLength: 64 }
        scope: [global]
        fingerprint: { include: all }
        ttl: P1D
        lease: PT30S
  /uploads:
    post:
      operationId: upload
      requestBody: { required: true, content: { application/octet-stream: { schema: { type: string, format: binary } } } }
      responses: { '204': { description: stored } }
components:
  schemas:
${schemas}
    CreateThing:
      type: object
      required: [token]
      properties:
        token: { type: string, maxLength: 64 }
${fields}
`;
}

/** Names of the types a module refers to without declaring them (type parameters and its own types left out): the globals it uses. */
function undeclaredTypeReferences(file: string): Set<string> {
  const source = ts.createSourceFile(file, ts.sys.readFile(file)!, ts.ScriptTarget.ES2022, true);
  const declared = new Set<string>();
  const referenced = new Set<string>();
  const visit = (node: ts.Node): void => {
    if ((ts.isTypeAliasDeclaration(node) || ts.isInterfaceDeclaration(node) || ts.isTypeParameterDeclaration(node)) && node.name !== undefined) declared.add(node.name.text);
    else if (ts.isInferTypeNode(node)) declared.add(node.typeParameter.name.text);
    else if (ts.isMappedTypeNode(node)) declared.add(node.typeParameter.name.text);
    else if (ts.isImportSpecifier(node)) declared.add(node.name.text);
    if (ts.isTypeReferenceNode(node) && ts.isIdentifier(node.typeName)) referenced.add(node.typeName.text);
    ts.forEachChild(node, visit);
  };
  visit(source);
  return new Set([...referenced].filter((name) => !declared.has(name)));
}

/** Every name a module declares or imports, in any scope (imports, functions, variables, parameters, types). */
function declaredNames(file: string): Set<string> {
  const source = ts.createSourceFile(file, ts.sys.readFile(file)!, ts.ScriptTarget.ES2022, true);
  const names = new Set<string>();
  const bind = (name: ts.BindingName | undefined): void => {
    if (name === undefined) return;
    if (ts.isIdentifier(name)) names.add(name.text);
    else for (const element of name.elements) if (!ts.isOmittedExpression(element)) bind(element.name);
  };
  const visit = (node: ts.Node): void => {
    if (ts.isImportSpecifier(node) || ts.isNamespaceImport(node)) names.add(node.name.text);
    else if (ts.isImportClause(node) && node.name !== undefined) names.add(node.name.text);
    else if (ts.isVariableDeclaration(node) || ts.isParameter(node) || ts.isBindingElement(node)) bind(node.name);
    else if ((ts.isFunctionDeclaration(node) || ts.isClassDeclaration(node) || ts.isInterfaceDeclaration(node) || ts.isTypeAliasDeclaration(node)) && node.name !== undefined) names.add(node.name.text);
    ts.forEachChild(node, visit);
  };
  visit(source);
  return names;
}

describe('generate client: operation names never collide with the client\'s own identifiers', function () {
  this.timeout(120_000);
  let dir: string;
  before(() => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'idemkit-client-locals-'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('CLIENT_LOCALS and CLIENT_EXPORTS hold every identifier a generated client.ts declares or imports besides its operations', async () => {
    const spec = path.join(dir, 'colliding.yaml');
    writeFileSync(spec, collidingSpec());
    const cases = [spec, ...['kitchen-sink-3.0', 'swagger-2.0', 'no-contracts', 'e2e', 'wire-2.0'].map((name) => path.join(REPO_ROOT, 'test', 'fixtures', 'client', `${name}.yaml`))];
    const reserved = new Set([...CLIENT_LOCALS, ...CLIENT_EXPORTS]);
    for (const [i, file] of cases.entries()) {
      const doc = await loadDocument(file);
      const out = path.join(dir, String(i));
      await writeOutput(out, generateClient(doc, { source: 'spec.yaml' }));
      const { model } = buildClientModel(doc);
      const own = new Set(model.operations.flatMap((op) => [op.name, op.resultType, op.statusCallType]));
      const missing = [...declaredNames(path.join(out, 'client.ts'))].filter((name) => !own.has(name) && !reserved.has(name));
      assert.deepEqual(missing, [], `${path.basename(file)}: add these to CLIENT_LOCALS`);
    }
  });

  it('a document whose operationIds are all of those names (one a status route) gives a client that compiles, methods renamed', async () => {
    const spec = path.join(dir, 'colliding.yaml');
    writeFileSync(spec, collidingSpec());
    const doc = await loadDocument(spec);
    const out = path.join(dir, 'compiled');
    await writeOutput(out, generateClient(doc, { source: 'colliding.yaml' }));
    assert.deepEqual(strictDiagnostics(tsFiles(out), out), []);
    const methods = buildClientModel(doc).model.operations.map((op) => op.name);
    for (const name of ['contract2', 'sent2', 'statusInput2', 'intent2']) assert.ok(methods.includes(name), `${name} in ${methods.join(', ')}`);
  });

  it('operations named then, toJSON, toString or valueOf are numbered: the client is no thenable, and JSON.stringify or a template sends nothing', async () => {
    const names = ['then', 'toJSON', 'toString', 'valueOf', 'constructor', 'hasOwnProperty'];
    const ops = names.map(
      (name) => `  /commands/${name}:
    post:
      operationId: ${name}
      requestBody: { required: true, content: { application/json: { schema: { type: object } } } }
      responses: { '201': { description: created } }
      x-idempotency:
${contractYaml('        ')}`,
    );
    const spec = path.join(dir, 'protocol.yaml');
    writeFileSync(spec, `openapi: 3.0.3\ninfo: { title: t, version: '1' }\nservers: [{ url: 'https://api.example.com' }]\npaths:\n${ops.join('\n')}\n`);
    const doc = await loadDocument(spec);
    assert.deepEqual(buildClientModel(doc).model.operations.map((op) => op.name).sort(), names.map((name) => `${name}2`).sort());
    const out = path.join(dir, 'protocol');
    await writeOutput(out, generateClient(doc, { source: 'protocol.yaml' }));
    writeFileSync(path.join(out, 'package.json'), JSON.stringify({ type: 'module', private: true }));
    assert.deepEqual(strictDiagnostics(tsFiles(out), out), []);
    const sent: string[] = [];
    const module = (await import(pathToFileURL(path.join(out, 'index.ts')).href)) as { createClient(options: object): Record<string, unknown> };
    const client = module.createClient({ runtime: { fetch: async (url: string) => (sent.push(url), new Response('{}', { status: 201 })) } });
    assert.equal(await (async () => client)(), client, 'awaiting a function that returns the client gives the client');
    JSON.stringify({ client });
    void `${String(client)}`;
    assert.deepEqual(sent, []);
    assert.equal(typeof client['then2'], 'function');
  });

  it("a statusRoute that names no GET (the contracted operation itself, a POST) gives no status call, and the client compiles (it had two type errors)", async () => {
    const spec = path.join(dir, 'self-route.yaml');
    writeFileSync(
      spec,
      `openapi: 3.1.0
info: { title: t, version: '1' }
servers: [{ url: 'https://api.example.com' }]
paths:
  /payouts:
    post:
      operationId: createPayout
      requestBody: { required: true, content: { application/json: { schema: { type: object } } } }
      responses: { '201': { description: created } }
      x-idempotency:
${contractYaml('        ')}
        effect: { owner: o, external: false, statusRoute: createPayout }
`,
    );
    const doc = await loadDocument(spec);
    assert.equal(buildClientModel(doc).model.operations[0]!.status, null);
    const out = path.join(dir, 'self-route');
    await writeOutput(out, generateClient(doc, { source: 'self-route.yaml' }));
    assert.deepEqual(strictDiagnostics(tsFiles(out), out), []);
  });

  it('SCHEMA_GLOBALS holds every global type a generated schema.ts refers to', async () => {
    const spec = path.join(dir, 'globals.yaml');
    writeFileSync(spec, globalNamedSchemasSpec());
    const cases = [spec, ...['kitchen-sink-3.0', 'swagger-2.0', 'e2e', 'wire-2.0', 'wire-3.0'].map((name) => path.join(REPO_ROOT, 'test', 'fixtures', 'client', `${name}.yaml`))];
    const seen = new Set<string>();
    for (const [i, file] of cases.entries()) {
      const out = path.join(dir, `globals-${i}`);
      await writeOutput(out, generateClient(await loadDocument(file), { source: 'spec.yaml' }));
      for (const name of undeclaredTypeReferences(path.join(out, 'schema.ts'))) seen.add(name);
    }
    assert.ok(seen.has('PropertyKey') && seen.has('Blob'), `the cases reach the key-optional helper and a binary body: ${[...seen].join(', ')}`);
    assert.deepEqual([...seen].filter((name) => !SCHEMA_GLOBALS.includes(name)), [], 'add these to SCHEMA_GLOBALS');
  });

  it('schemas named like those globals are renamed, and the client compiles (AWS Service Catalog\'s PropertyKey)', async () => {
    const spec = path.join(dir, 'globals.yaml');
    writeFileSync(spec, globalNamedSchemasSpec());
    const out = path.join(dir, 'globals-compiled');
    await writeOutput(out, generateClient(await loadDocument(spec), { source: 'globals.yaml' }));
    assert.deepEqual(strictDiagnostics(tsFiles(out), out), []);
    const schema = ts.sys.readFile(path.join(out, 'schema.ts'))!;
    for (const name of GLOBAL_NAMES) {
      assert.doesNotMatch(schema, new RegExp(`export type ${name}\\b`), `no schema type shadows ${name}`);
      assert.match(schema, new RegExp(`renamed: the generated code uses the name \`${name}\` itself`));
    }
  });
});

describe('generate client: error bodies a guard answers', () => {
  it('types an error the document shows without a body as unknown on a guarded operation (the guard sends one), undefined elsewhere', async () => {
    // The client review's: a 422 documented as `{ description: mismatch }` was typed `undefined`, and
    // `const b: undefined = result.body` compiled while the body was the guard's problem object.
    const dir = mkdtempSync(path.join(os.tmpdir(), 'idemkit-client-errors-'));
    try {
      const file = path.join(dir, 'api.yaml');
      writeFileSync(
        file,
        `openapi: 3.0.3
info: { title: errors, version: '1' }
paths:
  /orders:
    post:
      operationId: createOrder
      parameters: [{ name: Idempotency-Key, in: header, required: true, schema: { type: string, maxLength: 255 } }]
      requestBody: { required: true, content: { application/json: { schema: { type: object } } } }
      responses: { '201': { description: created }, '422': { description: mismatch } }
      x-idempotency:
${contractYaml('        ')}
        effect: { owner: o, external: false }
  /plain:
    post:
      operationId: plain
      responses: { '201': { description: created }, '422': { description: refused } }
`,
      );
      const schema = generateClient(await loadDocument(file), { source: 'api.yaml' }).find((f) => f.path === 'schema.ts')!.contents;
      assert.match(schema, /export type CreateOrderError = unknown;/);
      assert.match(schema, /export type PlainError = undefined;/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
