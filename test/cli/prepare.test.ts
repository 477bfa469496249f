import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const root = path.resolve('.');
const tsc = path.join(root, 'node_modules', 'typescript', 'bin', 'tsc');

/** Every file under `dir`, relative, sorted. */
function files(dir: string, base = dir): string[] {
  return readdirSync(dir, { withFileTypes: true })
    .flatMap((entry) => (entry.isDirectory() ? files(path.join(dir, entry.name), base) : [path.relative(base, path.join(dir, entry.name))]))
    .sort();
}

// `npm install -g git+<repo>` (how pre-commit installs a node hook) prepares the clone without devDependencies, so
// scripts/prepare.mjs builds with tsconfig.emit.json there: no type check, no @types. That is only safe if it emits
// exactly what the checked build emits.
describe('prepare: the unchecked build a global install from git falls back to', function () {
  this.timeout(120_000);
  let out: string;
  before(() => {
    out = mkdtempSync(path.join(os.tmpdir(), 'idemkit-prepare-'));
  });
  after(() => rmSync(out, { recursive: true, force: true }));

  it('emits byte for byte the JavaScript of the checked build', () => {
    const checked = path.join(out, 'checked');
    const unchecked = path.join(out, 'unchecked');
    execFileSync(process.execPath, [tsc, '-p', 'tsconfig.build.json', '--outDir', checked], { cwd: root });
    execFileSync(process.execPath, [tsc, '-p', 'tsconfig.emit.json', '--outDir', unchecked], { cwd: root });
    const names = files(checked);
    assert.ok(names.includes(path.join('src', 'cli', 'bin.js')), 'the bin is built');
    assert.deepEqual(files(unchecked), names);
    for (const name of names) assert.ok(readFileSync(path.join(unchecked, name)).equals(readFileSync(path.join(checked, name))), name);
  });
});
