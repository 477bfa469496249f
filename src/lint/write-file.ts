/** Atomic file output: readers see the old file or the whole new one, never a partial write. */
import { chmodSync, mkdirSync, realpathSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { randomBytes } from 'node:crypto';

/**
 * Writes `text` to a temporary file beside `file`, then renames it over `file`. A symbolic link is written
 * through (the file it names changes; the link stays a link) and an existing file keeps its permission
 * bits. A file whose owner may not write it is left alone: the rename would replace it regardless, so the
 * error (code `EREADONLY`) says so instead.
 */
export function writeFileAtomic(file: string, text: string): void {
  let target = file;
  let mode: number | undefined;
  try {
    target = realpathSync(file);
    mode = statSync(target).mode & 0o7777;
  } catch (error) {
    if ((error as { code?: unknown }).code !== 'ENOENT') throw error;
  }
  if (mode !== undefined && (mode & 0o200) === 0) {
    throw Object.assign(new Error(`${file} is read-only`), { code: 'EREADONLY' });
  }
  const dir = path.dirname(target);
  mkdirSync(dir, { recursive: true });
  const temp = path.join(dir, `.${path.basename(target)}.${randomBytes(6).toString('hex')}.tmp`);
  try {
    writeFileSync(temp, text, 'utf8');
    if (mode !== undefined) chmodSync(temp, mode);
    renameSync(temp, target);
  } catch (error) {
    rmSync(temp, { force: true });
    throw error;
  }
}
