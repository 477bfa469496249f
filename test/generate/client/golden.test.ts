import assert from 'node:assert/strict';
import { readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';
import { CLIENT_EXPORTS, generateClient } from '../../../src/generate/client/index.js';
import { generatedHeader } from '../../../src/generate/output.js';
import { loadDocument } from '../../../src/parser/index.js';
import { assertGolden, diagnosticsWithoutExpectErrors, goldenTree, REPO_ROOT, STRICT_COMPILER_OPTIONS, strictDiagnostics, tsFiles } from '../tsc.js';

const GOLDEN = path.join(REPO_ROOT, 'test', 'golden', 'client');

/** Each golden client and the document it is generated from. */
const CASES: Record<string, string> = {
  'demo-requests': 'samples/demo-requests/openapi.yaml',
  'kitchen-sink-3.0': 'test/fixtures/client/kitchen-sink-3.0.yaml',
  'type-arrays-3.1': 'test/fixtures/client/type-arrays-3.1.yaml',
  'swagger-2.0': 'test/fixtures/client/swagger-2.0.yaml',
  // Definitions named like the client's own exports (ApiResponse, Client, …) and globals: renamed, with a note.
  'name-collisions-2.0': 'test/fixtures/client/name-collisions-2.0.yaml',
  // Parameter serialisation (2.0 collectionFormat, 3.0 style/explode); test/generate/client/wire.test.ts sends these.
  'wire-2.0': 'test/fixtures/client/wire-2.0.yaml',
  'wire-3.0': 'test/fixtures/client/wire-3.0.yaml',
  // No contracted operation at all, as in most real documents.
  'no-contracts': 'test/fixtures/client/no-contracts.yaml',
  // The client the end-to-end tests run against the generated guard. test/e2e imports its types from here;
  // tsconfig.json's rootDirs resolves its `./runtime/...` imports to src/runtime, which this golden leaves out.
  e2e: 'test/fixtures/client/e2e.yaml',
};

/**
 * The golden directories hold what the templates and emitters render (`client.ts`, `schema.ts`,
 * `contracts.ts`, `index.ts`); the `runtime/` files a client copies are verbatim `src/runtime/` sources
 * with a header, checked as such here and tested where they stand. The type check compiles the full output.
 */
async function generate(name: string) {
  const spec = path.join(REPO_ROOT, CASES[name]!);
  const out = path.join(GOLDEN, name);
  // The header names the spec relative to the output directory, as `idemkit generate` does.
  const source = path.relative(out, spec).split(path.sep).join('/');
  const files = generateClient(await loadDocument(spec), { source });
  return {
    out,
    source,
    files,
    templated: files.filter((file) => !file.path.startsWith('runtime/')),
    runtime: files.filter((file) => file.path.startsWith('runtime/')),
  };
}

describe('generate client: golden outputs', function () {
  this.timeout(120_000);

  let tree: string;
  before(async () => {
    tree = await goldenTree(Object.keys(CASES), async (name) => (await generate(name)).files, path.join(GOLDEN, 'usage'));
  });
  after(() => rmSync(tree, { recursive: true, force: true }));

  for (const name of Object.keys(CASES)) {
    it(`${name}: the generated client matches test/golden/client/${name} byte for byte`, async () => {
      const { out, templated } = await generate(name);
      await assertGolden(out, templated, 'test/generate/client/golden.test.ts');
    });

    it(`${name}: the runtime files are the src/runtime sources under the generated header`, async () => {
      const { runtime, source } = await generate(name);
      const names = runtime.map((file) => file.path);
      for (const entry of ['runtime/contract.ts', 'runtime/client/engine.ts', 'runtime/client/intent.ts', 'runtime/client/request.ts']) {
        assert.ok(names.includes(entry), `${entry} in ${names.join(', ')}`);
      }
      for (const file of runtime) {
        const original = readFileSync(path.join(REPO_ROOT, 'src', file.path), 'utf8');
        assert.equal(file.contents, generatedHeader(source) + original, file.path);
      }
    });
  }

  it('is deterministic: two runs give identical files', async () => {
    const a = await generate('kitchen-sink-3.0');
    const b = await generate('kitchen-sink-3.0');
    assert.deepEqual(a.files, b.files);
  });

  it('every golden client and the hand-written usage files compile under tsc --strict; each @ts-expect-error is a real error', () => {
    const files = [...Object.keys(CASES).flatMap((name) => tsFiles(path.join(tree, name))), ...tsFiles(path.join(tree, 'usage'))];
    assert.ok(files.some((f) => f.endsWith(path.join('usage', 'demo-requests.ts'))));
    assert.ok(files.some((f) => f.endsWith(path.join('e2e', 'runtime', 'client', 'engine.ts'))), 'the runtime copies are compiled too');
    // TS2578 ("unused @ts-expect-error") makes a usage line that stopped being an error fail here.
    assert.deepEqual(strictDiagnostics(files, tree), []);
  });

  it('every golden client also compiles for the browser: the DOM library and no Node types', () => {
    const files = Object.keys(CASES).flatMap((name) => tsFiles(path.join(tree, name)));
    const program = ts.createProgram(files, { ...STRICT_COMPILER_OPTIONS, lib: ['lib.es2023.d.ts', 'lib.dom.d.ts'], types: [] });
    const diagnostics = ts.getPreEmitDiagnostics(program).map((d) => `${d.file ? path.relative(tree, d.file.fileName) : ''} TS${d.code}: ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`);
    assert.deepEqual(diagnostics, []);
  });

  it('every golden client compiles under the pickiest common settings (Vite\'s noUnusedLocals and noUnusedParameters, verbatimModuleSyntax, erasableSyntaxOnly, lib ES2022)', () => {
    const files = Object.keys(CASES).flatMap((name) => tsFiles(path.join(tree, name)));
    const program = ts.createProgram(files, {
      ...STRICT_COMPILER_OPTIONS,
      lib: ['lib.es2022.d.ts', 'lib.dom.d.ts'],
      noUnusedLocals: true,
      noUnusedParameters: true,
      noPropertyAccessFromIndexSignature: true,
      noFallthroughCasesInSwitch: true,
      allowUnreachableCode: false,
      verbatimModuleSyntax: true,
      erasableSyntaxOnly: true,
      isolatedModules: true,
    });
    const diagnostics = ts.getPreEmitDiagnostics(program).map((d) => `${d.file ? path.relative(tree, d.file.fileName) : ''} TS${d.code}: ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`);
    assert.deepEqual(diagnostics, []);
  });

  it('schema types avoid every name the client module exports: CLIENT_EXPORTS is that list, read back from a generated index.ts', () => {
    // no-contracts declares no per-operation result types, so its index exports the fixed names and the schema types only.
    const dir = path.join(tree, 'no-contracts');
    const program = ts.createProgram([path.join(dir, 'index.ts')], STRICT_COMPILER_OPTIONS);
    const checker = program.getTypeChecker();
    const exportsOf = (file: string): string[] => {
      const module = checker.getSymbolAtLocation(program.getSourceFile(path.join(dir, file))!)!;
      return checker.getExportsOfModule(module).map((symbol) => symbol.name);
    };
    const schema = new Set(exportsOf('schema.ts'));
    assert.deepEqual(exportsOf('index.ts').filter((name) => !schema.has(name)).sort(), [...CLIENT_EXPORTS].sort());
  });

  it('the type check is not vacuous: the usage file without its @ts-expect-error lines fails to compile', () => {
    const usage = path.join(tree, 'usage', 'demo-requests.ts');
    const { found, expected } = diagnosticsWithoutExpectErrors(usage, tree);
    assert.ok(expected >= 5, 'the usage file proves at least five wrong calls');
    assert.ok(found.length >= expected, `expected at least ${expected} errors, got:\n${found.join('\n')}`);
    assert.ok(found.every((line) => line.startsWith('usage/demo-requests.ts:')), found.join('\n'));
  });
});
