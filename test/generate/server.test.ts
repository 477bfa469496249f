import assert from 'node:assert/strict';
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

  it('refuses an invalid contract with file:line:column instead of generating from defaults', async () => {
    for (const [contract, message] of [
      [{ ttl: 'one day' }, /^POST \/x \(bad\): .*ttl.*"one day".*ISO 8601 duration/],
      [{ lease: 30 }, /lease is 30/],
      [{ key: { pattern: '([' } }, /key\.pattern is not a valid regular expression/],
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
