import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import path from 'node:path';
import { generateServer, type Framework, type StoreKind } from '../../src/generate/server.js';
import { loadDocument } from '../../src/parser/index.js';
import { assertGolden, diagnosticsWithoutExpectErrors, goldenTree, REPO_ROOT, strictDiagnostics, tsFiles } from './tsc.js';

const GOLDEN = path.join(REPO_ROOT, 'test', 'golden', 'server');

/** Each golden target: framework, store and the document it is generated from. Together they cover every adapter and store. */
const CASES: Record<string, { framework: Framework; store: StoreKind; spec: string }> = {
  'express-sqlite': { framework: 'express', store: 'sqlite', spec: 'samples/demo-requests/openapi.yaml' },
  'fastify-postgres': { framework: 'fastify', store: 'postgres', spec: 'samples/demo-requests/openapi.yaml' },
  'fetch-redis': { framework: 'fetch', store: 'redis', spec: 'samples/demo-requests/openapi.yaml' },
  'express-memory': { framework: 'express', store: 'memory', spec: 'test/fixtures/server/demo.yaml' },
};

/**
 * The golden directories hold what the templates render (`contracts.ts`, `guards.ts`, `index.ts`); the
 * runtime files a target copies are verbatim `src/runtime/` sources with a header, reviewed and tested
 * where they stand, so they are not duplicated here. The type check compiles the full output.
 */
async function generate(name: string) {
  const { framework, store, spec } = CASES[name]!;
  const specFile = path.join(REPO_ROOT, spec);
  const out = path.join(GOLDEN, name);
  const source = path.relative(out, specFile).split(path.sep).join('/');
  const files = generateServer(await loadDocument(specFile), { framework, store, source });
  return { out, files, templated: files.filter((file) => !file.path.startsWith('runtime/')) };
}

describe('generate server: golden outputs', function () {
  this.timeout(120_000);

  let tree: string;
  before(async () => {
    tree = await goldenTree(Object.keys(CASES), async (name) => (await generate(name)).files, path.join(GOLDEN, 'usage'));
  });
  after(() => rmSync(tree, { recursive: true, force: true }));

  for (const name of Object.keys(CASES)) {
    it(`${name}: the generated guards match test/golden/server/${name} byte for byte`, async () => {
      const { out, templated } = await generate(name);
      await assertGolden(out, templated, 'test/generate/server-golden.test.ts');
    });
  }

  it('every golden output and the hand-written usage files compile under tsc --strict; each @ts-expect-error is a real error', () => {
    const files = [...Object.keys(CASES).flatMap((name) => tsFiles(path.join(tree, name))), ...tsFiles(path.join(tree, 'usage'))];
    assert.ok(files.length > 40, `${files.length} files`);
    // TS2578 ("unused @ts-expect-error") fails a usage line that stopped being an error.
    assert.deepEqual(strictDiagnostics(files, tree), []);
  });

  for (const usageName of ['express', 'fastify', 'fetch']) {
    it(`the type check is not vacuous: usage/${usageName}.ts without its @ts-expect-error lines fails`, () => {
      const usage = path.join(tree, 'usage', `${usageName}.ts`);
      const { found, expected } = diagnosticsWithoutExpectErrors(usage, tree);
      assert.ok(expected >= 3, 'each usage file proves at least three wrong calls');
      assert.ok(found.length >= expected, `expected at least ${expected} errors, got:\n${found.join('\n')}`);
      assert.ok(found.every((line) => line.startsWith(`usage/${usageName}.ts:`)), found.join('\n'));
    });
  }
});
