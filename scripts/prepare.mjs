// `npm prepare`: builds dist/ when idemkit is installed from a git checkout or packed (`npm pack`).
// With the devDependencies at hand (a clone after `npm ci`) it is the checked build, `npm run build`. Without them it
// still builds: `npm install -g git+<repo>`, which is how pre-commit installs a `language: node` hook, prepares the
// clone with `--global` carried into that install, so no devDependency (no `tsc`) is installed there. Then the pinned
// TypeScript is fetched and emits without type checking (tsconfig.emit.json: the same JavaScript, checked in CI).
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const localTsc = path.join(root, 'node_modules', 'typescript', 'bin', 'tsc');
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
const [command, args] = existsSync(localTsc)
  ? [process.execPath, [localTsc, '-p', 'tsconfig.build.json']]
  : // --global=false: the global install's `npm_config_global=true` reaches this child, and `npm exec` in global mode
    // fails with ENOENT on a cache that has never held this TypeScript (and leaves that cache entry broken).
    [npm, ['exec', '--global=false', '--yes', '--package=typescript@5.9.3', '--', 'tsc', '-p', 'tsconfig.emit.json']];
const result = spawnSync(command, args, { cwd: root, stdio: 'inherit', shell: process.platform === 'win32' });
if (result.error) {
  console.error(`idemkit prepare: could not run ${command}: ${result.error.message}`);
  process.exit(1);
}
if (result.status !== 0) process.exit(result.status ?? 1);
// Then the bundled CLI, when esbuild is at hand (bundle.mjs leaves the unbundled one in place otherwise).
const bundled = spawnSync(process.execPath, [path.join(root, 'scripts', 'bundle.mjs')], { cwd: root, stdio: 'inherit' });
process.exit(bundled.status ?? 1);
