import assert from 'node:assert/strict';
import { normaliseBasePath } from '../../src/runtime/adapters/fastify-routes.js';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { FRAMEWORKS, STORES, buildServerModel, generateServer, serverRuntimeFiles } from '../../src/generate/server.js';
import { loadDocument } from '../../src/parser/index.js';
import { DocumentError, UsageError } from '../../src/errors.js';

describe('generate/server', () => {
  let tmp: string;
  before(() => {
    tmp = mkdtempSync(path.join(os.tmpdir(), 'idemkit-server-model-'));
  });
  after(() => rmSync(tmp, { recursive: true, force: true }));

  async function load(paths: Record<string, unknown>) {
    const file = path.join(tmp, `spec-${Object.keys(paths).length}-${Math.random().toString(36).slice(2)}.json`);
    writeFileSync(file, JSON.stringify({ openapi: '3.1.0', info: { title: 't', version: '1' }, 'x-idempotency': { scope: ['global'] }, paths }));
    return loadDocument(file);
  }
  const op = (operationId: string | undefined, contract: unknown) => ({
    post: { ...(operationId !== undefined ? { operationId } : {}), 'x-idempotency': contract, responses: { '201': { description: 'ok' } } },
  });

  it('takes only enabled contracts, sorted by operationId, with unique identifiers', async () => {
    const doc = await load({
      '/z': op('zeta', true),
      '/a': op('create-order', true),
      '/b': op('create order', true),
      '/c': op('createOrderGuard', true),
      '/off': op('notIdempotent', false),
      '/none': { post: { operationId: 'plain', responses: { '200': { description: 'ok' } } } },
      '/anon': op(undefined, true),
    });
    const model = buildServerModel(doc, { framework: 'fetch', store: 'memory' });
    assert.deepEqual(
      model.operations.map((o) => [o.operationId, o.name, o.guardName, o.contractName]),
      [
        ['POST /anon', 'postAnon', 'postAnonGuard', 'postAnonContract'],
        ['create order', 'createOrder', 'createOrderGuard', 'createOrderContract'],
        ['create-order', 'createOrder2', 'createOrder2Guard', 'createOrder2Contract'],
        ['createOrderGuard', 'createOrderGuard2', 'createOrderGuard2Guard', 'createOrderGuard2Contract'],
        ['zeta', 'zeta', 'zetaGuard', 'zetaContract'],
      ],
    );
    assert.equal(model.adapterModule, './runtime/adapters/fetch.js');
    assert.equal(model.storeModule, './runtime/stores/memory.js');
  });

  it('never names a guard or contract after what the generated modules import or index.ts re-exports', async () => {
    const doc = await load({ '/r': op('createRoute', true), '/i': op('idempotencyOf', true), '/p': op('pathMatcher', true) });
    for (const framework of FRAMEWORKS) {
      const model = buildServerModel(doc, { framework, store: 'sqlite' });
      // `createRouteGuard` is the adapter's import, `idempotencyOf` and the fetch adapter's `pathMatcher` are re-exported by index.ts.
      assert.deepEqual(
        model.operations.map((o) => [o.name, o.guardName]),
        [
          ['createRoute2', 'createRoute2Guard'],
          ['idempotencyOf2', 'idempotencyOf2Guard'],
          framework === 'fetch' ? ['pathMatcher2', 'pathMatcher2Guard'] : ['pathMatcher', 'pathMatcherGuard'],
        ],
        framework,
      );
    }
  });

  it('numbers an operation named then, toJSON or valueOf: the Guards object is no thenable (awaiting it would not settle)', async () => {
    const doc = await load({ '/t': op('then', true), '/j': op('toJSON', true), '/v': op('valueOf', true) });
    const model = buildServerModel(doc, { framework: 'express', store: 'sqlite' });
    assert.deepEqual(
      model.operations.map((o) => o.name),
      ['then2', 'toJSON2', 'valueOf2'],
    );
  });

  it('refuses an invalid contract with file:line:column instead of generating from defaults', async () => {
    for (const [contract, message] of [
      [{ ttl: 'one day' }, /^POST \/x \(bad\): .*ttl.*"one day".*ISO 8601 duration/],
      [{ lease: 30 }, /lease is 30/],
      [{ key: { pattern: '([' } }, /key\.pattern is not a valid regular expression/],
      [{ key: { pattern: '([A-Za-z0-9]+-?)*' } }, /key\.pattern can take time exponential in the key's length.*"aaaa/],
      [{ transient: [429, 201] }, /transient lists 201, which is no failure: a transient answer frees the key/],
      // A 500 (a handler that failed half-way) or a 502/504 (a call elsewhere whose outcome is unknown) may follow an
      // effect: released, its retry ran the handler again (the article-review's three effects for one key).
      [{ transient: [429, 500, 503] }, /transient lists 500, an answer that may follow an effect/],
      [{ transient: [504] }, /transient lists 504, an answer that may follow an effect/],
      [{ effect: { owner: 'mail', external: true, providerKey: 'none', statusRoute: 'x' }, transient: [429, 503] }, /transient lists 503 for an external effect with `providerKey: none`/],
      [{ key: { pattern: '([A-Za-z0-9]*)+' } }, /key\.pattern can take time exponential/],
      [{ key: { pattern: '(?:a|a)*(b)\\1' } }, /key\.pattern cannot be checked for exponential backtracking \(it uses a back-reference/],
      // The security review's: a 121-character near-miss key held the loop 4.4 s.
      [{ key: { pattern: '[a-z0-9]*-?[a-z0-9]*-?[a-z0-9]*-?[a-z0-9]*-?[a-z0-9]*' } }, /key\.pattern can take time growing as the key's length to the power 5: .*255\^5 ways/],
      [{ key: { pattern: '\\w*\\d*\\w*', maxLength: 255 } }, /to the power 3/],
      // The second security review's: quadratic, but a 100,000-character bound held the loop 3.9 s; and bounded repeats
      // as wide as unbounded ones (12.4 s on a 6,000-character key, before the missing principal was even read).
      [{ key: { body: '/requestToken', pattern: '[a-z0-9]*-?[a-z0-9]*', maxLength: 100_000 } }, /to the power 2: .*100000\^2 ways/],
      [{ key: { pattern: '[a-z0-9]{0,2000}-?[a-z0-9]{0,2000}-?[a-z0-9]{0,2000}', maxLength: 6000 } }, /to the power 3: .*6000\^3 ways/],
      [{ tll: 'P1D' }, /unknown field 'tll'/],
    ] as const) {
      const doc = await load({ '/x': op('bad', contract) });
      assert.throws(
        () => generateServer(doc, { framework: 'express', store: 'memory', source: 'x.json' }),
        (error: unknown) => error instanceof DocumentError && message.test(error.message) && error.line !== undefined && error.line > 0 && error.file === doc.file,
        JSON.stringify(contract),
      );
    }
  });

  it('generates a key pattern whose backtracking grows only as a low power of its bound: quadratic, or cubic under a short bound', async () => {
    for (const key of [{ pattern: '\\d+\\d+' }, { pattern: '[a-z]*_?[a-z]*_?[a-z]*', maxLength: 64 }, { query: 'requestId', pattern: '\\w*\\d*\\w*', maxLength: 100 }]) {
      const doc = await load({ '/x': op('ok', { key }) });
      assert.doesNotThrow(() => generateServer(doc, { framework: 'express', store: 'memory', source: 'x.json' }), JSON.stringify(key));
    }
  });

  it('copies the runtime each target needs and nothing else', () => {
    const files = serverRuntimeFiles('fastify', 'postgres');
    assert.ok(files.includes('adapters/fastify.ts') && files.includes('stores/postgres.ts') && files.includes('guard.ts'));
    assert.ok(!files.some((f) => f.includes('express') || f.includes('sqlite') || f.startsWith('client/')), files.join(', '));
  });

  it('is self-contained: imports only Node built-ins, relative files, the framework and the store driver', async () => {
    const doc = await loadDocument(path.resolve('test/fixtures/server/demo.yaml'));
    const allowed: Record<string, string[]> = { express: ['express'], fastify: ['fastify'], fetch: [], sqlite: ['better-sqlite3'], postgres: ['pg'], redis: ['ioredis'], memory: [] };
    let checked = 0;
    for (const framework of FRAMEWORKS) {
      for (const store of STORES) {
        const files = generateServer(doc, { framework, store, source: 'demo.yaml' });
        const paths = new Set(files.map((f) => f.path));
        for (const file of files) {
          const statements = [...file.contents.matchAll(/^(?:import|export)\b[^;]*?\bfrom\s*['"]([^'"]+)['"]/gm), ...file.contents.matchAll(/\bimport\(\s*['"]([^'"]+)['"]/g)];
          checked += statements.length;
          for (const match of statements) {
            const specifier = match[1]!;
            if (specifier.startsWith('.')) {
              const target = path.posix.join(path.posix.dirname(file.path), specifier).replace(/\.js$/, '.ts');
              assert.ok(paths.has(target), `${framework}/${store}: ${file.path} imports ${specifier}, which is not in the output`);
            } else {
              assert.ok(specifier.startsWith('node:') || [...allowed[framework]!, ...allowed[store]!].includes(specifier), `${framework}/${store}: ${file.path} imports ${specifier}`);
            }
          }
        }
      }
    }
    assert.ok(checked > 12 * 10, `${checked} import statements checked`);
  });

  it("carries each operation's base paths into its contract (3.x servers paths, the operation's own servers, Swagger 2.0 basePath), after its path, as JSON", async () => {
    const write = (root: Record<string, unknown>) => {
      const file = path.join(tmp, `root-${Math.random().toString(36).slice(2)}.json`);
      writeFileSync(file, JSON.stringify(root));
      return loadDocument(file);
    };
    const created = { operationId: 'create', 'x-idempotency': true, responses: { '201': { description: 'ok' } } };
    const doc3 = await write({
      openapi: '3.1.0',
      info: { title: 't', version: '1' },
      servers: [
        { url: 'https://api.example.com/v1/' },
        { url: '/{stage}/api?version=2', variables: { stage: { default: 'prod' } } },
        { url: 'https://eu.example.com/v1' },
        { url: 'https://sandbox.example.com' },
        { url: 'https://x.example.com/a"b*/c' },
        // Kept encoded where decoding would give what no base path can hold: a space, a query, another segment.
        { url: 'https://y.example.com/my%20api' },
        { url: 'https://y.example.com/a%3Fb' },
        { url: 'https://y.example.com/a%2Fb' },
        { url: 'https://y.example.com/caf%C3%A9' },
      ],
      paths: {
        '/orders': { post: created },
        '/uploads': { servers: [{ url: 'https://files.example.com/files' }], post: { ...created, operationId: 'upload' } },
      },
    });
    const model = buildServerModel(doc3, { framework: 'fastify', store: 'memory' });
    assert.deepEqual(
      model.operations.map((o) => [o.operationId, o.contract.basePaths]),
      [
        // Decoded, as routers are written: a quote in the path is data in the generated file, and `*/` is escaped.
        ['create', ['/v1', '/prod/api', '/a"b*/c', '/my%20api', '/a%3Fb', '/a%2Fb', '/café']],
        ['upload', ['/files']],
      ],
    );
    assert.deepEqual(Object.keys(model.operations[0]!.contract).slice(0, 4), ['operationId', 'method', 'path', 'basePaths']);
    const contracts = generateServer(doc3, { framework: 'fastify', store: 'memory', source: 'x.json' }).find((f) => f.path === 'contracts.ts')!.contents;
    // Through the json helper: a literal, `*/` escaped.
    assert.ok(contracts.includes('"basePaths": [\n    "/v1",\n    "/prod/api",\n    "/a\\"b*\\/c",'), contracts);
    // Every base path the generator writes is one the Fastify plugin accepts.
    for (const base of model.operations.flatMap((o) => o.contract.basePaths ?? [])) assert.doesNotThrow(() => normaliseBasePath(base), base);

    const swagger = await write({ swagger: '2.0', info: { title: 't', version: '1' }, host: 'api.example.com', basePath: '/v2/', paths: { '/orders': { post: created } } });
    assert.deepEqual(buildServerModel(swagger, { framework: 'fastify', store: 'memory' }).operations[0]!.contract.basePaths, ['/v2']);
    // No base path (no servers, or only the root): no basePaths key at all.
    const plain = await load({ '/orders': op('create', true) });
    assert.ok(!('basePaths' in buildServerModel(plain, { framework: 'fastify', store: 'memory' }).operations[0]!.contract));
  });

  it('rejects a document without contracts and an unknown target', async () => {
    const doc = await load({ '/off': op('off', false) });
    assert.throws(() => generateServer(doc, { framework: 'express', store: 'memory', source: 'x.json' }), (e: unknown) => e instanceof UsageError && /no operation has an x-idempotency contract/.test(e.message));
    const ok = await load({ '/on': op('on', true) });
    assert.throws(() => generateServer(ok, { framework: 'koa' as 'express', store: 'memory', source: 'x.json' }), /unknown framework "koa"/);
    assert.throws(() => generateServer(ok, { framework: 'express', store: 'mongo' as 'memory', source: 'x.json' }), /unknown store "mongo"/);
    const files = generateServer(ok, { framework: 'express', store: 'memory', source: 'x.json' });
    assert.ok(files.every((f) => f.contents.startsWith('// generated by idemkit from "x.json"; do not edit\n')));
  });
});
