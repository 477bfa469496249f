/**
 * File output that never leaves a partial file and never replaces what is not a regular file: a regular file
 * is written atomically (readers see the old file or the whole new one); a device, FIFO or descriptor
 * (`/dev/null`, a named pipe, `/dev/stdout`) is written into, as a shell's `>` would.
 */
import { chmodSync, closeSync, constants, lstatSync, mkdirSync, openSync, readlinkSync, realpathSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import type { Stats } from 'node:fs';
import path from 'node:path';
import { randomBytes } from 'node:crypto';

/** Symbolic links followed before giving up, as the kernel does (ELOOP). */
const MAX_LINKS = 40;

/** A path that names an open descriptor: writing there means writing to it, not replacing what it names. */
const DESCRIPTOR = /^\/(?:dev\/(?:stdout|stderr|fd\/\d+)|proc\/(?:self|thread-self|\d+)\/fd\/\d+)$/;

/**
 * Writes `text` to `file`. A regular file (or a new one) gets a temporary file beside it that is renamed
 * over it; an existing file keeps its permission bits, and a symbolic link is written through (the file it
 * names changes; the link stays a link). Anything else that exists — a device, a FIFO, a socket, a
 * descriptor path — is opened and written into, never replaced. Missing parent directories are created one
 * level at a time.
 *
 * Errors carry a `code`: the system's, or `EREADONLY` (a file its owner may not write: the rename would
 * replace it regardless), `EDANGLING` (a symbolic link on the way names nothing; `link` and `target` say
 * which) or `EMKDIR` (a directory could not be created; `path` says which).
 */
export function writeFileAtomic(file: string, text: string): void {
  const stats = statIfExists(file);
  if (stats?.isDirectory()) throw Object.assign(new Error(`${file} is a directory`), { code: 'EISDIR' });
  if (stats !== undefined && (!stats.isFile() || DESCRIPTOR.test(file))) {
    writeInto(file, text);
    return;
  }
  const target = stats === undefined ? danglingTarget(file) : realpathSync(file);
  const mode = stats === undefined ? undefined : stats.mode & 0o7777;
  if (mode !== undefined && (mode & 0o200) === 0) {
    throw Object.assign(new Error(`${file} is read-only`), { code: 'EREADONLY' });
  }
  const dir = path.dirname(target);
  if (target === file) ensureDirectory(dir);
  else if (statIfExists(dir)?.isDirectory() !== true) throw dangling(file, target);
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

/** `stat` (links followed), or `undefined` when nothing is there. */
function statIfExists(file: string): Stats | undefined {
  try {
    return statSync(file);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
}

/**
 * Opens what `file` names for writing, without creating or truncating it (a descriptor that names a regular
 * file is appended to, as the shell's own `>>` or fresh `>` left it), and writes `text` into it.
 */
function writeInto(file: string, text: string): void {
  const fd = openSync(file, constants.O_WRONLY | constants.O_APPEND);
  try {
    writeFileSync(fd, text, 'utf8');
  } finally {
    closeSync(fd);
  }
}

/**
 * Where a new file named `file` is created: `file` itself, or, when `file` is a symbolic link that names
 * nothing yet, the path the link (chain) names.
 */
function danglingTarget(file: string): string {
  let current = file;
  for (let hop = 0; hop < MAX_LINKS; hop++) {
    let link: string;
    try {
      link = readlinkSync(current);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'EINVAL' || code === 'ENOENT') return current; // not a link, or nothing there
      throw error;
    }
    current = path.resolve(path.dirname(current), link);
  }
  throw Object.assign(new Error(`${file}: too many symbolic links`), { code: 'ELOOP' });
}

/**
 * Creates `dir` and its missing ancestors one level at a time (Node's recursive mkdir loops forever where a
 * file system answers ENOENT for a name it will never hold, such as under `/proc`).
 */
function ensureDirectory(dir: string): void {
  const missing: string[] = [];
  for (let current = dir; statIfExists(current) === undefined; current = path.dirname(current)) {
    missing.push(current);
    if (path.dirname(current) === current) break;
  }
  for (let i = missing.length - 1; i >= 0; i--) {
    const level = missing[i]!;
    try {
      mkdirSync(level);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'EEXIST' && isSymbolicLink(level)) throw dangling(level, path.resolve(path.dirname(level), readlinkSync(level)));
      if (code === 'ENOENT') throw Object.assign(new Error(`cannot create ${level}`), { code: 'EMKDIR', path: level });
      throw error;
    }
  }
}

function isSymbolicLink(file: string): boolean {
  try {
    return lstatSync(file).isSymbolicLink();
  } catch {
    return false;
  }
}

function dangling(link: string, target: string): Error {
  return Object.assign(new Error(`${link} is a symbolic link to ${target}, which does not exist`), { code: 'EDANGLING', link, target });
}
