/** How the CLI names files on the terminal. */
import path from 'node:path';
import type { DocumentError } from '../errors.js';
import { printable } from '../parser/printable.js';

/**
 * `file` (absolute) as the CLI prints it: relative to `cwd` and `/`-separated, absolute only when there is no
 * relative path (another drive). Every command names files this way, so a file reads the same in every message.
 */
export function displayFile(cwd: string, file: string): string {
  const relative = path.relative(cwd, file);
  return relative === '' || path.isAbsolute(relative) ? file : relative.split(path.sep).join('/');
}

/**
 * One line for an input that could not be read: `file:line:column: what is wrong — how to fix`, and for a
 * file a `$ref` reached (the loader's `via`), the `$ref` that led there.
 */
export function describeDocumentError(error: DocumentError, cwd: string): string {
  const where = [displayFile(cwd, error.file), error.line, error.column].filter((part) => part !== undefined).join(':');
  const via = (error as { via?: { ref: string; file: string; line: number; column: number } }).via;
  const reached = via ? ` (reached through $ref '${via.ref}' at ${displayFile(cwd, via.file)}:${via.line}:${via.column})` : '';
  return printable(`${where}: ${error.message}${reached}`);
}
