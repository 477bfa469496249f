import path from 'node:path';

/**
 * `file` (absolute) as idemkit shows it to a person: relative to `cwd`, `/`-separated — unless the relative path
 * would climb all the way up to the filesystem root (`/dev/stdin` from `/work/api` is `../../dev/stdin`) or there
 * is none (another drive): then the absolute path, which says more. Every command and format names files this way.
 */
export function displayPath(cwd: string, file: string): string {
  const relative = path.relative(cwd, file);
  return climbsToRoot(cwd, relative) ? slashed(file) : relativePath(cwd, file);
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
