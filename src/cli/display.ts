/** How the CLI names files on the terminal. */
import type { DocumentError } from '../errors.js';
import { displayPath } from '../lint/formatters/paths.js';
import { printable } from '../parser/printable.js';

/** How a file is named (`displayPath`, the formats' own), so a file reads the same in every message and report. */
export { displayPath };

/**
 * One line for an input that could not be read: `file:line:column: what is wrong — how to fix`, and for a
 * file a `$ref` reached (the loader's `via`), the `$ref` that led there.
 */
export function describeDocumentError(error: DocumentError, cwd: string): string {
  const where = [displayPath(cwd, error.file), error.line, error.column].filter((part) => part !== undefined).join(':');
  const via = (error as { via?: { ref: string; file: string; line: number; column: number } }).via;
  const reached = via ? ` (reached through $ref '${via.ref}' at ${displayPath(cwd, via.file)}:${via.line}:${via.column})` : '';
  return printable(`${where}: ${error.message}${reached}`);
}
