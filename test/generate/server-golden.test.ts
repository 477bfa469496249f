import assert from 'node:assert/strict';
import { readdirSync, statSync } from 'node:fs';
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

async function generate(name: string) {
  const { framework, store, spec } = CASES[name]!;
  const specFile = path.join(REPO_ROOT, spec);
  const out = path.join(GOLDEN, name);
  const source = path.relative(out, specFile).split(path.sep).join('/');
  return { out, files: generateServer(await loadDocument(specFile), { framework, store, source }) };
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
    const file = d.file ? path.relative(REPO_ROOT, d.file.fileName) : '';
    return `${file}${where ? `:${where.line + 1}:${where.character + 1}` : ''} TS${d.code}: ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`;
  });
}

describe('generate server: golden outputs', function () {
  this.timeout(120_000);

  for (const name of Object.keys(CASES)) {
    it(`${name}: the generated guards match test/golden/server/${name} byte for byte`, async () => {
      const { out, files } = await generate(name);
      if (process.env['UPDATE_GOLDEN'] === '1') await writeOutput(out, files);
      const drift = await checkOutput(out, files);
      assert.deepEqual(drift, [], 'run UPDATE_GOLDEN=1 npx mocha test/generate/server-golden.test.ts after a deliberate change');
    });
  }

  it('every golden output and the hand-written usage files compile under tsc --strict; each @ts-expect-error is a real error', () => {
    const files = [...Object.keys(CASES).flatMap((name) => tsFiles(path.join(GOLDEN, name))), ...tsFiles(path.join(GOLDEN, 'usage'))];
    assert.ok(files.length > 40, `${files.length} files`);
    // TS2578 ("unused @ts-expect-error") fails a usage line that stopped being an error.
    assert.deepEqual(diagnostics(files), []);
  });

  for (const usageName of ['express', 'fastify', 'fetch']) {
    it(`the type check is not vacuous: usage/${usageName}.ts without its @ts-expect-error lines fails`, () => {
      const usage = path.join(GOLDEN, 'usage', `${usageName}.ts`);
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
      assert.ok(found.every((line) => line.startsWith(path.relative(REPO_ROOT, usage))), found.join('\n'));
    });
  }
});
