import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { assertBuilt, bin, root, runBin, runProcess } from './spawn.js';

const run = promisify(execFile);

// A module hook that names every file Node loads as ES module, on stderr.
const hook = `data:text/javascript,${encodeURIComponent(
  `import { register } from 'node:module';
register('data:text/javascript,' + encodeURIComponent('export async function load(url, context, next) { if (url.startsWith("file:")) process.stderr.write("LOADED " + url + "\\\\n"); return next(url, context); }'));`,
)}`;

/** The files of the package (relative to the root) that `node dist/src/cli/bin.js …argv` loads as ES modules. */
async function loadedBy(...argv: string[]): Promise<string[]> {
  const result = await run(process.execPath, ['--import', hook, bin, ...argv], { cwd: root });
  return result.stderr
    .split('\n')
    .filter((line) => line.startsWith('LOADED '))
    .map((line) => path.relative(root, fileURLToPath(line.slice('LOADED '.length))));
}

/** The same command run from the TypeScript sources, unbundled. */
function fromSource(argv: readonly string[]) {
  return runProcess(process.execPath, ['--import', 'tsx', path.join(root, 'src/cli/bin.ts'), ...argv], { cwd: root });
}

describe('the bundled CLI (scripts/bundle.mjs)', function () {
  this.timeout(60_000);
  before(assertBuilt);

  it('is what the package bin runs: a few bundle files, and no generator code for a lint', async () => {
    const loaded = await loadedBy('lint', 'samples/demo-requests/openapi.yaml');
    const ours = loaded.filter((file) => !file.startsWith('node_modules'));
    assert.equal(ours[0], path.join('dist', 'src', 'cli', 'bin.js'));
    const rest = ours.slice(1);
    assert.ok(rest.length > 0 && rest.every((file) => file.startsWith(path.join('dist', 'src', 'bundle') + path.sep)), ours.join('\n'));
    // yargs and the rest are inside the bundle; only CommonJS packages loaded with require stay in node_modules.
    assert.ok(!loaded.some((file) => file.includes(`node_modules${path.sep}yargs`)), loaded.join('\n'));
    assert.ok(rest.length < 30, `${rest.length} bundle files for a lint`);
    // esbuild names each bundled source in a comment: a lint loads none of the generators or handlebars.
    for (const file of rest) {
      const text = readFileSync(path.join(root, file), 'utf8');
      for (const unwanted of ['// node_modules/handlebars/', '// dist/src/generate/', '// dist/src/lint/scaffold.js', '// dist/src/lint/formatters/sarif.js']) {
        assert.ok(!text.includes(unwanted), `${file} holds ${unwanted}`);
      }
    }
  });

  it("a plain lint loads none of node:crypto's modules; --output and SARIF, which need it, still work", async () => {
    const report = `data:text/javascript,${encodeURIComponent("process.on('exit', () => process.stderr.write(process.moduleLoadList.filter((m) => /crypto/.test(m)).length + ' crypto modules\\n'));")}`;
    // As many as Node itself loads (none on Node 20) for a script that does nothing.
    const bare = await runProcess(process.execPath, ['--import', report, '-e', '0'], { cwd: root });
    const plain = await runProcess(process.execPath, ['--import', report, bin, 'lint', 'samples/demo-requests/openapi.yaml'], { cwd: root });
    assert.equal(plain.code, 0, plain.stderr);
    assert.equal(plain.stderr, bare.stderr);
    assert.match(bare.stderr, /^\d+ crypto modules\n$/);
    const dir = mkdtempSync(path.join(os.tmpdir(), 'idemkit-bundle-'));
    try {
      const out = path.join(dir, 'report.sarif');
      const sarif = await runProcess(process.execPath, ['--import', report, bin, 'lint', 'samples/broken/keys.yaml', '-f', 'sarif', '-o', out], { cwd: root });
      assert.equal(sarif.code, 1, sarif.stderr);
      assert.ok(Number.parseInt(sarif.stderr, 10) > Number.parseInt(bare.stderr, 10), `${sarif.stderr} after a SARIF lint, ${bare.stderr} bare`);
      const results = (JSON.parse(readFileSync(out, 'utf8')) as { runs: { results: { partialFingerprints: Record<string, string> }[] }[] }).runs[0]!.results;
      assert.ok(results.length > 0 && results.every((result) => /^[0-9a-f]{32}$/.test(Object.values(result.partialFingerprints)[0] ?? '')), 'SARIF fingerprints are hashes');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('prints the same help, lint report and rule list as the unbundled sources', async () => {
    // Help text is laid out by string-width, which the bundle loads on first use: help that came out unwrapped
    // or not at all would differ here.
    for (const argv of [['--help'], ['lint', '--help'], ['generate', '--help'], ['lint', 'samples/broken/keys.yaml', 'samples/broken/scope.yaml'], ['lint', '-f', 'sarif', 'samples/broken/responses.yaml'], ['rules'], ['nonsense']]) {
      const [bundled, source] = await Promise.all([runBin(argv), fromSource(argv)]);
      assert.equal(bundled.code, source.code, argv.join(' '));
      assert.equal(bundled.stdout, source.stdout, argv.join(' '));
      assert.equal(bundled.stderr, source.stderr, argv.join(' '));
    }
  });

  it("turns on Node's compile cache where Node has one (module.enableCompileCache, Node 22.1+), bundled or not", async () => {
    // Node 20 has no enableCompileCache: a preload gives node:module one that says it was called.
    const preload = `data:text/javascript,${encodeURIComponent("import module from 'node:module'; module.enableCompileCache = () => process.stderr.write('compile cache on\\n');")}`;
    const bundled = await runProcess(process.execPath, ['--import', preload, bin, 'lint', 'samples/demo-requests/openapi.yaml'], { cwd: root });
    assert.equal(bundled.code, 0, bundled.stderr);
    assert.equal(bundled.stderr, 'compile cache on\n');
    const source = await runProcess(process.execPath, ['--import', 'tsx', '--import', preload, path.join(root, 'src/cli/bin.ts'), 'lint', 'samples/demo-requests/openapi.yaml'], { cwd: root });
    assert.equal(source.code, 0, source.stderr);
    assert.equal(source.stderr, 'compile cache on\n');
    // And without one, nothing is said and the lint runs.
    const plain = await runBin(['lint', 'samples/demo-requests/openapi.yaml']);
    assert.deepEqual([plain.code, plain.stderr], [0, '']);
  });

  it('names the built files, not the chunks, in an internal error\'s --verbose stack trace (source maps)', async () => {
    // A copy of the package with a broken template: an internal error in the generator, not the user's fault.
    const dir = mkdtempSync(path.join(os.tmpdir(), 'idemkit-bundle-'));
    try {
      for (const part of ['dist', 'templates', 'schemas', 'package.json', path.join('src', 'runtime')]) {
        cpSync(path.join(root, part), path.join(dir, part), { recursive: true });
      }
      symlinkSync(path.join(root, 'node_modules'), path.join(dir, 'node_modules'));
      writeFileSync(path.join(dir, 'templates', 'server', 'guards.ts.hbs'), '{{#each}}\n');
      const argv = [path.join(dir, 'dist', 'src', 'cli', 'bin.js'), 'generate', 'server', path.join(root, 'samples/demo-requests/openapi.yaml'), '--out', path.join(dir, 'gen')];
      const quiet = await runProcess(process.execPath, argv, { cwd: dir });
      assert.equal(quiet.code, 2);
      assert.match(quiet.stderr, /^internal error: /);
      assert.doesNotMatch(quiet.stderr, /\n +at /, 'no stack trace without --verbose');
      // Handlebars' parse error spans lines (it draws the spot); without --verbose only its first is shown.
      assert.equal(quiet.stderr.trimEnd().split('\n').length, 1, quiet.stderr);
      assert.match(quiet.stderr, / … \(run with --verbose for details, and please report it\)\n$/);
      const verbose = await runProcess(process.execPath, [...argv, '--verbose'], { cwd: dir });
      assert.equal(verbose.code, 2);
      assert.match(verbose.stderr, /\n +at .*dist[\\/]src[\\/]generate[\\/]render\.js:\d+:\d+/, verbose.stderr);
      assert.doesNotMatch(verbose.stderr, /bundle[\\/](chunk|bin)[^\s]*\.js/, verbose.stderr);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('without esbuild (a git install prepared without devDependencies) leaves the unbundled bin in place', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'idemkit-bundle-'));
    try {
      mkdirSync(path.join(dir, 'scripts'));
      mkdirSync(path.join(dir, 'dist', 'src', 'cli'), { recursive: true });
      cpSync(path.join(root, 'scripts', 'bundle.mjs'), path.join(dir, 'scripts', 'bundle.mjs'));
      const unbundled = "#!/usr/bin/env node\nimport { run } from './run.js';\n\nawait run();\n";
      writeFileSync(path.join(dir, 'dist', 'src', 'cli', 'bin.js'), unbundled);
      const result = await runProcess(process.execPath, [path.join(dir, 'scripts', 'bundle.mjs')], { cwd: dir });
      assert.equal(result.code, 0, result.stderr);
      assert.match(result.stderr, /esbuild is not installed; the CLI runs unbundled/);
      assert.equal(readFileSync(path.join(dir, 'dist', 'src', 'cli', 'bin.js'), 'utf8'), unbundled);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
