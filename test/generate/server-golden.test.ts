import assert from 'node:assert/strict';
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import ts from 'typescript';
import { checkOutput, writeOutput } from '../../src/generate/output.js';
import { generateServer, type Framework, type StoreKind } from '../../src/generate/server.js';
import { loadDocument } from '../../src/parser/index.js';
import { REPO_ROOT } from './tsc.js';

const GOLDEN = path.join(REPO_ROOT, 'test', 'golden', 'server');

/** Each golden target: framework, store and the document it is generated from. Together they cover every adapter and store. */
const CASES: Record<string, { framework: Framework; store: StoreKind; spec: string }> = {
  'express-sqlite': { framework: 'express', store: 'sqlite', spec: 'samples/demo-requests/openapi.yaml' },
  'fastify-postgres': { framework: 'fastify', store: 'postgres', spec: 'samples/demo-requests/openapi.yaml' },
  'fetch-redis': { framework: 'fetch', store: 'redis', spec: 'samples/demo-requests/openapi.yaml' },
  'express-memory': { framework: 'express', store: 'memory', spec: 'test/fixtures/server/demo.yaml' },
};

/** `--strict` plus the stricter flags users turn on. */
const STRICT: ts.CompilerOptions = {
  target: ts.ScriptTarget.ES2022,
  module: ts.ModuleKind.NodeNext,
  moduleResolution: ts.ModuleResolutionKind.NodeNext,
  lib: ['lib.es2023.d.ts'],
  strict: true,
  noUncheckedIndexedAccess: true,
  noImplicitOverride: true,
  noImplicitReturns: true,
  skipLibCheck: true,
  types: ['node'],
  typeRoots: [path.join(REPO_ROOT, 'node_modules', '@types')],
  noEmit: true,
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

/** Writes every case's full output and the usage files into a temp tree shaped like test/golden/server. */
async function fullTree(): Promise<string> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'idemkit-server-golden-'));
  symlinkSync(path.join(REPO_ROOT, 'node_modules'), path.join(dir, 'node_modules'), 'dir');
  writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ type: 'module', private: true }));
  for (const name of Object.keys(CASES)) {
    const { files } = await generate(name);
    await writeOutput(path.join(dir, name), files);
  }
  mkdirSync(path.join(dir, 'usage'));
  for (const file of readdirSync(path.join(GOLDEN, 'usage'))) copyFileSync(path.join(GOLDEN, 'usage', file), path.join(dir, 'usage', file));
  return dir;
}

function tsFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((entry) => {
    const full = path.join(dir, entry);
    if (statSync(full).isDirectory()) return tsFiles(full);
    return entry.endsWith('.ts') ? [full] : [];
  });
}

function diagnostics(files: readonly string[], host?: ts.CompilerHost): string[] {
  const program = ts.createProgram(files, STRICT, host);
  return ts.getPreEmitDiagnostics(program).map((d) => {
    const where = d.file && d.start !== undefined ? d.file.getLineAndCharacterOfPosition(d.start) : undefined;
    const file = d.file ? path.basename(path.dirname(d.file.fileName)) + '/' + path.basename(d.file.fileName) : '';
    return `${file}${where ? `:${where.line + 1}:${where.character + 1}` : ''} TS${d.code}: ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`;
  });
}

describe('generate server: golden outputs', function () {
  this.timeout(120_000);

  let tree: string;
  before(async () => {
    tree = await fullTree();
  });
  after(() => rmSync(tree, { recursive: true, force: true }));

  for (const name of Object.keys(CASES)) {
    it(`${name}: the generated guards match test/golden/server/${name} byte for byte`, async () => {
      const { out, templated } = await generate(name);
      if (process.env['UPDATE_GOLDEN'] === '1') await writeOutput(out, templated);
      const drift = await checkOutput(out, templated);
      assert.deepEqual(drift, [], 'run UPDATE_GOLDEN=1 npx mocha test/generate/server-golden.test.ts after a deliberate change');
    });
  }

  it('every golden output and the hand-written usage files compile under tsc --strict; each @ts-expect-error is a real error', () => {
    const files = [...Object.keys(CASES).flatMap((name) => tsFiles(path.join(tree, name))), ...tsFiles(path.join(tree, 'usage'))];
    assert.ok(files.length > 40, `${files.length} files`);
    // TS2578 ("unused @ts-expect-error") fails a usage line that stopped being an error.
    assert.deepEqual(diagnostics(files), []);
  });

  for (const usageName of ['express', 'fastify', 'fetch']) {
    it(`the type check is not vacuous: usage/${usageName}.ts without its @ts-expect-error lines fails`, () => {
      const usage = path.join(tree, 'usage', `${usageName}.ts`);
      const host = ts.createCompilerHost(STRICT);
      const read = host.readFile.bind(host);
      host.readFile = (file) => {
        const text = read(file);
        return path.resolve(file) === usage && text !== undefined ? text.replace(/\/\/ @ts-expect-error[^\n]*/g, '') : text;
      };
      const original = host.getSourceFile.bind(host);
      host.getSourceFile = (file, lang) => (path.resolve(file) === usage ? ts.createSourceFile(file, host.readFile(file) ?? '', lang) : original(file, lang));
      const found = diagnostics([usage], host);
      const expected = (read(usage) ?? '').match(/\/\/ @ts-expect-error/g)?.length ?? 0;
      assert.ok(expected >= 3, 'each usage file proves at least three wrong calls');
      assert.ok(found.length >= expected, `expected at least ${expected} errors, got:\n${found.join('\n')}`);
      assert.ok(found.every((line) => line.startsWith(`usage/${usageName}.ts:`)), found.join('\n'));
    });
  }
});
