import { existsSync } from 'node:fs';
import path from 'node:path';

/**
 * `file` (absolute) as idemkit shows it to a person: relative to `cwd`, `/`-separated — unless the relative path
 * would climb all the way up to the filesystem root (`/dev/stdin` from `/work/api` is `../../dev/stdin`) or there
 * is none (another drive): then the absolute path, which says more. Every command and format names files this way.
 */
export function displayPath(cwd: string, file: string): string {
  const relative = path.relative(cwd, file);
  return climbsToRoot(cwd, relative) ? slashed(file) : notACommand(relativePath(cwd, file));
}

/**
 * `shown` (a relative path) as it may start a printed line. GitHub Actions runs a log line that starts with `::`
 * (after blanks) as a workflow command: a file a `$ref` reached named `::add-mask::…` or `::stop-commands::…` would
 * hide values or silence every later annotation of the job. `./` in front names the same file and is no command.
 */
export function notACommand(shown: string): string {
  return /^\s*::/u.test(shown) ? `./${shown}` : shown;
}

/**
 * The git work tree `cwd` is in: the nearest directory at or above it holding a `.git` entry (a directory, or the
 * file of a worktree or submodule), found as the loader finds the tree `$ref`s may not leave — by walking up, since
 * `git` need not be installed. Walked from `cwd` as given, not its real path: file names in a report are resolved
 * from `cwd` as given, and a path relative to the tree must share their spelling. `undefined` outside any tree.
 *
 * Code scanning reads SARIF locations and annotation `file=` paths relative to the repository root, whatever
 * directory the workflow step ran in.
 */
export function repositoryRoot(cwd: string): string | undefined {
  for (let dir = path.resolve(cwd); ; dir = path.dirname(dir)) {
    if (existsSync(path.join(dir, '.git'))) return dir;
    if (path.dirname(dir) === dir) return undefined;
  }
}

/** Whether `file` is `root` or inside it. */
export function isInside(root: string, file: string): boolean {
  const relative = path.relative(root, file);
  return relative === '' || (relative !== '..' && !relative.startsWith(`..${path.sep}`) && !path.isAbsolute(relative));
}

/**
 * `file` relative to `cwd`, `/`-separated, however far up it climbs (an absolute path stays as it is when on
 * another root): a SARIF location relative to `%SRCROOT%`. For a person, {@link displayPath}.
 */
export function relativePath(cwd: string, file: string): string {
  const relative = path.relative(cwd, file);
  return relative === '' || path.isAbsolute(relative) ? slashed(file) : slashed(relative);
}

function slashed(file: string): string {
  return file.split(path.sep).join('/');
}

/** Whether the `..` steps that start `relative` lead from `cwd` up to its root (the paths share nothing but the root). */
function climbsToRoot(cwd: string, relative: string): boolean {
  const parts = relative.split(path.sep);
  let up = 0;
  while (up < parts.length && parts[up] === '..') up += 1;
  if (up === 0) return false;
  const root = path.parse(path.resolve(cwd)).root;
  return path.resolve(cwd, ...parts.slice(0, up)) === root;
}
