import path from 'node:path';

/** `file` relative to `cwd` with `/` separators; a file on another root stays absolute. */
export function displayPath(cwd: string, file: string): string {
  const relative = path.relative(cwd, file);
  if (relative === '' || path.isAbsolute(relative)) return file.split(path.sep).join('/');
  return relative.split(path.sep).join('/');
}
