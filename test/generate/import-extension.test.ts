// `generate --import-extension js|ts|none`: how the generated files import each other. `js` (the default) is what
// tsc with NodeNext, Node and Bun take; `none` is what bundlers take (Next.js with webpack or Turbopack resolves no
// `./x.js` to `x.ts`); `ts` is for Deno and Node's type stripping. Every variant compiles under tsc --strict with
// the matching resolution, and only the import specifiers differ.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { main } from '../../src/cli/main.js';
import { generateClient } from '../../src/generate/client/index.js';
import { generateServer } from '../../src/generate/server.js';
import { withImportExtension, writeOutput, type OutputFile } from '../../src/generate/output.js';
import { loadDocument } from '../../src/parser/load.js';
import { bufferIo } from '../helpers/io.js';
import { runtimeBinary } from '../e2e/harness.js';
import { prepareTsProject, REPO_ROOT, runTsc } from './tsc.js';

const run = promisify(execFile);
const DEMO = path.join(REPO_ROOT, 'test', 'fixtures', 'server', 'demo.yaml');
const CLIENT_SPEC = path.join(REPO_ROOT, 'test', 'fixtures', 'client', 'kitchen-sink-3.0.yaml');

/** Every relative module specifier of a TypeScript text (static imports and exports, `import(…)`, bare imports). */
function relativeSpecifiers(text: string): string[] {
  return [...text.matchAll(/(?:\bfrom\s*|\bimport\s*\(\s*|\bimport\s+)(['"])(\.{1,2}\/[^'"\n]+)\1/g)].map((match) => match[2]!);
}

async function outputs(): Promise<{ name: string; files: OutputFile[] }[]> {
  const demo = await loadDocument(DEMO);
  const client = await loadDocument(CLIENT_SPEC);
  return [
    ...(['express', 'fastify', 'fetch'] as const).flatMap((framework) =>
      (['sqlite', 'postgres', 'redis', 'memory'] as const).map((store) => ({ name: `${framework}-${store}`, files: generateServer(demo, { framework, store, source: 'demo.yaml' }) })),
    ),
    { name: 'client', files: generateClient(client, { source: 'kitchen-sink-3.0.yaml' }) },
  ];
}

describe('generate --import-extension', function () {
  this.timeout(300_000);
  let tmp: string;
  before(() => {
    tmp = mkdtempSync(path.join(os.tmpdir(), 'idemkit-import-extension-'));
  });
  after(() => rmSync(tmp, { recursive: true, force: true }));

  it('rewrites every relative import and nothing else: each specifier names a generated file with the chosen ending', async () => {
    for (const { name, files } of await outputs()) {
      const paths = new Set(files.map((file) => file.path));
      assert.deepEqual(withImportExtension(files, 'js'), files, name);
      for (const [extension, ending] of [['none', ''], ['ts', '.ts']] as const) {
        const rewritten = withImportExtension(files, extension);
        assert.deepEqual(rewritten.map((file) => file.path), files.map((file) => file.path));
        let imports = 0;
        for (let i = 0; i < files.length; i += 1) {
          const before = files[i]!.contents.split('\n');
          const after = rewritten[i]!.contents.split('\n');
          assert.equal(after.length, before.length, `${name} ${files[i]!.path}`);
          for (let line = 0; line < before.length; line += 1) {
            if (before[line] === after[line]) continue;
            // A changed line is an import line whose `.js` specifiers took the new ending, and nothing more.
            assert.equal(after[line], before[line]!.replace(/(['"])(\.{1,2}\/[^'"]+)\.js\1/g, `$1$2${ending}$1`), `${name} ${files[i]!.path}:${line + 1}`);
          }
          for (const specifier of relativeSpecifiers(rewritten[i]!.contents)) {
            imports += 1;
            assert.ok(!specifier.endsWith('.js'), `${name} ${files[i]!.path} still imports ${specifier}`);
            const target = path.posix.normalize(path.posix.join(path.posix.dirname(files[i]!.path), extension === 'ts' ? specifier : `${specifier}.ts`));
            assert.ok(paths.has(target), `${name} ${files[i]!.path} imports ${specifier}, which names no generated file`);
          }
        }
        assert.ok(imports > 10, `${name}: only ${imports} relative imports seen`);
      }
    }
  });

  it('compiles under tsc --strict: none with moduleResolution bundler, ts as Node type stripping takes it (erasable syntax only, no unused names)', async () => {
    const all = await outputs();
    for (const [extension, compilerOptions] of [
      ['none', { module: 'ESNext', moduleResolution: 'Bundler' }],
      // What `node --experimental-strip-types` (Node 22.6+) can run: no enums, namespaces or parameter properties; and
      // the flags of Vite's and many apps' tsconfigs, which generated code must not trip either.
      ['ts', { allowImportingTsExtensions: true, erasableSyntaxOnly: true, verbatimModuleSyntax: true, noUnusedLocals: true, noUnusedParameters: true, noFallthroughCasesInSwitch: true }],
    ] as const) {
      const root = path.join(tmp, `tsc-${extension}`);
      mkdirSync(root);
      writeFileSync(path.join(root, 'package.json'), JSON.stringify({ type: 'module' }));
      for (const { name, files } of all) await writeOutput(path.join(root, name), withImportExtension(files, extension));
      const diagnostics = await runTsc(prepareTsProject(root, { compilerOptions }));
      assert.equal(diagnostics, '', `--import-extension ${extension}`);
    }
    // And the choice matters: `none` in an ES module package does not compile under NodeNext.
    const nodeNext = path.join(tmp, 'none-under-nodenext');
    mkdirSync(nodeNext);
    writeFileSync(path.join(nodeNext, 'package.json'), JSON.stringify({ type: 'module' }));
    await writeOutput(path.join(nodeNext, 'fetch-memory'), withImportExtension(all.find((output) => output.name === 'fetch-memory')!.files, 'none'));
    assert.match(await runTsc(prepareTsProject(nodeNext)), /TS2835|Relative import paths need explicit file extensions/);
  });

  it("compiles in the tsconfigs teams start from: create-next-app's (target ES2017), a CommonJS project without esModuleInterop, a Cloudflare Worker's, strict without strictNullChecks", async () => {
    // A review's: the client's `/…/s` regex (an ES2018 flag, which tsc checks against target since 5.5) failed
    // create-next-app's tsconfig, so `next build`; the SQLite store's default type import needed esModuleInterop.
    const all = await outputs();
    for (const [name, extension, packageJson, compilerOptions] of [
      [
        'next',
        'none',
        { type: 'module' },
        { target: 'ES2017', lib: ['dom', 'dom.iterable', 'esnext'], module: 'esnext', moduleResolution: 'bundler', isolatedModules: true, allowJs: true, esModuleInterop: true, resolveJsonModule: true, jsx: 'preserve', incremental: true },
      ],
      ['commonjs', 'js', {}, { module: 'CommonJS', moduleResolution: 'Node10', lib: ['ES2022'] }],
      // Halfway through a strict migration: `strict` with strictNullChecks off (noImplicitAny still on), where a
      // callback returning undefined or an empty array literal is an implicit any.
      ['strict-migration', 'js', { type: 'module' }, { strictNullChecks: false, exactOptionalPropertyTypes: false }],
      // A Worker (nodejs_compat) with Cloudflare's types: they declare TextDecoder's options required and leave
      // 'opaqueredirect' out of ResponseType.
      ['workers', 'none', { type: 'module' }, { module: 'ES2022', moduleResolution: 'Bundler', lib: ['ES2022'], types: ['@cloudflare/workers-types/2023-07-01', 'node'], typeRoots: [path.join(REPO_ROOT, 'node_modules', '@types'), path.join(REPO_ROOT, 'node_modules')] }],
    ] as const) {
      const root = path.join(tmp, `tsc-${name}`);
      mkdirSync(root);
      writeFileSync(path.join(root, 'package.json'), JSON.stringify(packageJson));
      for (const output of all) {
        if (name === 'workers' && output.name !== 'fetch-memory' && output.name !== 'client') continue;
        await writeOutput(path.join(root, output.name), withImportExtension(output.files, extension));
      }
      const diagnostics = await runTsc(prepareTsProject(root, { compilerOptions: { ...compilerOptions, tsBuildInfoFile: path.join(root, '.tsbuildinfo') } }));
      assert.equal(diagnostics, '', name);
    }
  });

  it('ts: Deno type-checks and runs the generated TypeScript as it is, without tsc; a retry is the replay', async () => {
    const dir = path.join(tmp, 'deno');
    const io = bufferIo(tmp);
    assert.equal(await main(['generate', 'server', DEMO, '--framework', 'fetch', '--store', 'memory', '--import-extension', 'ts', '--out', path.join(dir, 'gen')], io), 0, io.err);
    writeFileSync(
      path.join(dir, 'main.ts'),
      `import { createGuards } from './gen/guards.ts';
import { MemoryStore } from './gen/runtime/stores/memory.ts';
let effects = 0;
const guards = createGuards({ store: new MemoryStore(), principal: (request) => request.headers.get('x-user') ?? undefined });
const handler = guards.createDemoRequest.wrap(async (request: Request) => {
  effects += 1;
  return Response.json({ id: 'r-' + effects, topic: ((await request.json()) as { topic: string }).topic }, { status: 201 });
});
const send = () => handler(new Request('http://127.0.0.1/v1/demo-requests', {
  method: 'POST',
  headers: { 'content-type': 'application/json', 'idempotency-key': 'k-1', 'x-user': 'alice' },
  body: JSON.stringify({ topic: 't', contact: { email: 'a@example.com' } }),
}));
const first = await send();
const second = await send();
console.log(JSON.stringify({ statuses: [first.status, second.status], replayed: second.headers.get('idempotent-replayed'), effects, body: await second.json() }));
`,
    );
    const deno = runtimeBinary('deno');
    // `deno check` fails on a type error or an import it cannot resolve (the default `.js` output would be one).
    await run(deno, ['check', '--quiet', 'main.ts'], { cwd: dir });
    const { stdout } = await run(deno, ['run', '--allow-all', '--quiet', 'main.ts'], { cwd: dir });
    assert.deepEqual(JSON.parse(stdout), { statuses: [201, 201], replayed: 'true', effects: 1, body: { id: 'r-1', topic: 't' } });
  });

  it('generate --check compares against the same choice: another extension is drift', async () => {
    const out = path.join(tmp, 'check');
    const generate = (...extra: string[]) => ['generate', 'server', DEMO, '--framework', 'fetch', '--store', 'memory', '--out', out, ...extra];
    const io = bufferIo(tmp);
    assert.equal(await main(generate('--import-extension', 'none'), io), 0, io.err);
    assert.match(readFileSync(path.join(out, 'guards.ts'), 'utf8'), /from '\.\/runtime\/adapters\/fetch';/);
    const same = bufferIo(tmp);
    assert.equal(await main(generate('--import-extension', 'none', '--check'), same), 0, same.err);
    const other = bufferIo(tmp);
    assert.equal(await main(generate('--check'), other), 1, other.out);
    assert.match(other.out, /^changed .*guards\.ts$/m);
    assert.match(other.err, /is stale/);
    const wrong = bufferIo(tmp);
    assert.equal(await main(generate('--import-extension', 'mjs'), wrong), 2);
    assert.match(wrong.err, /--import-extension "mjs" is not one of: js, ts, none/);
  });
});
