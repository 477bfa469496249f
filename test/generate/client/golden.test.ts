import assert from 'node:assert/strict';
import { readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { generateClient } from '../../../src/generate/client/index.js';
import { checkOutput, writeOutput } from '../../../src/generate/output.js';
import { loadDocument } from '../../../src/parser/index.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const GOLDEN = path.join(ROOT, 'test', 'golden', 'client');

/** Each golden client and the document it is generated from. */
const CASES: Record<string, string> = {
  'demo-requests': 'samples/demo-requests/openapi.yaml',
  'kitchen-sink-3.0': 'test/fixtures/client/kitchen-sink-3.0.yaml',
  'type-arrays-3.1': 'test/fixtures/client/type-arrays-3.1.yaml',
  'swagger-2.0': 'test/fixtures/client/swagger-2.0.yaml',
  // The client the end-to-end tests run against the generated guard (they import its types from here).
  e2e: 'test/fixtures/client/e2e.yaml',
};

/** The options generated clients must compile under: `--strict` plus the stricter flags users turn on. */
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
  typeRoots: [path.join(ROOT, 'node_modules', '@types')],
  noEmit: true,
};

async function generate(name: string) {
  const spec = path.join(ROOT, CASES[name]!);
  const out = path.join(GOLDEN, name);
  // The header names the spec relative to the output directory, as `idemkit generate` does.
  return { out, files: generateClient(await loadDocument(spec), { source: path.relative(out, spec).split(path.sep).join('/') }) };
}

function tsFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((entry) => {
    const full = path.join(dir, entry);
    if (statSync(full).isDirectory()) return tsFiles(full);
    return entry.endsWith('.ts') ? [full] : [];
  });
}

/** Type-checks `files`; returns one line per diagnostic. */
function diagnostics(files: readonly string[], host?: ts.CompilerHost): string[] {
  const program = ts.createProgram(files, STRICT, host);
  return ts.getPreEmitDiagnostics(program).map((d) => {
    const where = d.file && d.start !== undefined ? d.file.getLineAndCharacterOfPosition(d.start) : undefined;
    const file = d.file ? path.relative(ROOT, d.file.fileName) : '';
    return `${file}${where ? `:${where.line + 1}:${where.character + 1}` : ''} TS${d.code}: ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`;
  });
}

describe('generate client: golden outputs', function () {
  this.timeout(120_000);

  for (const name of Object.keys(CASES)) {
    it(`${name}: the generated client matches test/golden/client/${name} byte for byte`, async () => {
      const { out, files } = await generate(name);
      if (process.env['UPDATE_GOLDEN'] === '1') await writeOutput(out, files);
      const drift = await checkOutput(out, files);
      assert.deepEqual(drift, [], 'run UPDATE_GOLDEN=1 npx mocha test/generate/client/golden.test.ts after a deliberate change');
    });
  }

  it('is deterministic: two runs give identical files', async () => {
    const a = await generate('kitchen-sink-3.0');
    const b = await generate('kitchen-sink-3.0');
    assert.deepEqual(a.files, b.files);
  });

  it('every golden client and the hand-written usage files compile under tsc --strict; each @ts-expect-error is a real error', () => {
    const files = [...Object.keys(CASES).flatMap((name) => tsFiles(path.join(GOLDEN, name))), ...tsFiles(path.join(GOLDEN, 'usage'))];
    assert.ok(files.some((f) => f.endsWith(path.join('usage', 'demo-requests.ts'))));
    // TS2578 ("unused @ts-expect-error") makes a usage line that stopped being an error fail here.
    assert.deepEqual(diagnostics(files), []);
  });

  it('the type check is not vacuous: the usage file without its @ts-expect-error lines fails to compile', () => {
    const usage = path.join(GOLDEN, 'usage', 'demo-requests.ts');
    const host = ts.createCompilerHost(STRICT);
    const read = host.readFile.bind(host);
    host.readFile = (file) => {
      const text = read(file);
      return path.resolve(file) === usage && text !== undefined ? text.replace(/\/\/ @ts-expect-error[^\n]*/g, '') : text;
    };
    const original = host.getSourceFile.bind(host);
    host.getSourceFile = (file, lang) => {
      if (path.resolve(file) !== usage) return original(file, lang);
      return ts.createSourceFile(file, host.readFile(file) ?? '', lang);
    };
    const found = diagnostics([usage], host);
    const expected = (read(usage) ?? '').match(/\/\/ @ts-expect-error/g)?.length ?? 0;
    assert.ok(expected >= 5, 'the usage file proves at least five wrong calls');
    assert.ok(found.length >= expected, `expected at least ${expected} errors, got:\n${found.join('\n')}`);
    assert.ok(found.every((line) => line.startsWith(path.relative(ROOT, usage))), found.join('\n'));
  });
});
