/**
 * File output that never leaves a partial file and never replaces what is not a regular file: a regular file
 * is written atomically (readers see the old file or the whole new one); a device, FIFO or descriptor
 * (`/dev/null`, a named pipe, `/dev/stdout`, `/dev/fd/3` from `3>file` or a process substitution) is written
 * into, as a shell's `>` would. A descriptor not open for writing (`3<file`) is refused, and so are those of
 * idemkit's own descriptors that are Node's (its event loop's epoll, eventfd and wakeup pipes).
 */
import { chmodSync, closeSync, constants, lstatSync, mkdirSync, openSync, readdirSync, readFileSync, readlinkSync, realpathSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import type { Stats } from 'node:fs';
import path from 'node:path';
import type * as Crypto from 'node:crypto';
import { createRequire } from 'node:module';

// node:crypto (~15 of Node's internal modules) is loaded on first use: only a written file needs a temp name.
const require = createRequire(import.meta.url);
let crypto: typeof Crypto | undefined;

/** Symbolic links followed before giving up, as the kernel does (ELOOP). */
const MAX_LINKS = 40;

/** A process's descriptor directory as `realpath` gives it (`/dev/fd`, `/proc/self/fd` lead there). */
const FD_DIRECTORY = /^\/proc\/(\d+)(?:\/task\/\d+)?\/fd$/;

/**
 * A descriptor path written literally (`/dev/fd/N`, `/proc/self/fd/N`, `/proc/PID/task/TID/fd/N`…): one that
 * cannot be resolved (no `/proc` mounted) names no open descriptor, never a file to create.
 */
const LITERAL_FD_PATH = /^(?:\/dev\/fd|\/proc\/(?:self|thread-self|\d+)(?:\/task\/\d+)?\/fd)\/\d+$/;

/** The access-mode bits of a descriptor's `flags` in `/proc/…/fdinfo/N` (`O_ACCMODE`; not in Node's constants). */
const O_ACCMODE = 0o3;

/**
 * Writes `text` to `file`. A regular file (or a new one) gets a temporary file beside it that is renamed
 * over it; an existing file keeps its permission bits, and a symbolic link is written through (the file it
 * names changes; the link stays a link). Anything else that exists — a device, a FIFO, a socket, a
 * descriptor path (`/dev/fd/N`, `/proc/…/fd/N`, or a link to one) — is opened and written into, never
 * replaced. Missing parent directories are created one level at a time.
 *
 * Errors carry a `code`: the system's, or `EREADONLY` (a file its owner may not write: the rename would
 * replace it regardless), `EDANGLING` (a symbolic link on the way names nothing; `link` and `target` say
 * which), `EMKDIR` (a directory could not be created; `path` says which), `EREADONLYFD` (a descriptor open
 * only for reading, as `3<file` opens it: reopening it for writing would append to the file; `fd` says which),
 * `EOWNFD` (one of idemkit's own descriptors that Node opened for its event loop; `fd` says which) or `EBADF`
 * (a descriptor path that names no open descriptor).
 */
export function writeFileAtomic(file: string, text: string): void {
  const descriptor = descriptorNamed(file);
  if (descriptor !== undefined) {
    if (descriptor.fd === undefined) throw noDescriptor(file);
    if (descriptor.own && isNodesOwn(descriptor.fd)) {
      throw Object.assign(new Error(`${file} names descriptor ${descriptor.fd}, which is Node's own`), { code: 'EOWNFD', fd: descriptor.fd });
    }
    if (accessMode(`${descriptor.directory}info/${descriptor.fd}`) === constants.O_RDONLY) {
      throw Object.assign(new Error(`${file} names descriptor ${descriptor.fd}, which is open only for reading`), { code: 'EREADONLYFD', fd: descriptor.fd });
    }
    writeDescriptor(file, text);
    return;
  }
  const stats = statIfExists(file);
  if (stats?.isDirectory()) throw Object.assign(new Error(`${file} is a directory`), { code: 'EISDIR' });
  if (stats !== undefined && !stats.isFile()) {
    writeInto(file, text);
    return;
  }
  const target = landingPath(file);
  const mode = stats === undefined ? undefined : stats.mode & 0o7777;
  if (mode !== undefined && (mode & 0o200) === 0) {
    throw Object.assign(new Error(`${file} is read-only`), { code: 'EREADONLY' });
  }
  const dir = path.dirname(target);
  if (target === file) ensureDirectory(dir);
  else if (statIfExists(dir)?.isDirectory() !== true) throw dangling(file, target);
  crypto ??= require('node:crypto') as typeof Crypto;
  const temp = path.join(dir, `.${path.basename(target)}.${crypto.randomBytes(6).toString('hex')}.tmp`);
  try {
    writeFileSync(temp, text, 'utf8');
    if (mode !== undefined) chmodSync(temp, mode);
    renameSync(temp, target);
  } catch (error) {
    rmSync(temp, { force: true });
    throw error;
  }
}

/**
 * Where writing `file` lands: the file its links name, also when that file is not there yet (a link to a baseline
 * a first run writes). Throws ELOOP for a link loop.
 */
export function landingPath(file: string): string {
  return statIfExists(file) === undefined ? danglingTarget(file) : realpathSync(file);
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
 * The descriptor `file` names — `/dev/stdout`, `/dev/fd/N`, `/proc/self/fd/N`, `/proc/PID/fd/N`, or a
 * symbolic link (chain) to one — with the descriptor directory it is in (`/proc/PID/fd`, its `fdinfo`
 * beside it) and whether it is this process's own; `undefined` for any other path, and `fd: undefined` for a
 * descriptor path written literally whose directory cannot be resolved (no `/proc`).
 */
function descriptorNamed(file: string): { readonly fd?: number; readonly directory?: string; readonly own: boolean } | undefined {
  let current = file;
  for (let hop = 0; hop < MAX_LINKS; hop++) {
    const name = path.basename(current);
    if (/^\d+$/.test(name)) {
      const real = realDirectory(path.dirname(current));
      const match = FD_DIRECTORY.exec(real ?? '');
      if (match) return { fd: Number(name), directory: real!, own: Number(match[1]) === process.pid };
      if (real === undefined && LITERAL_FD_PATH.test(current)) return { own: false };
    }
    try {
      current = path.resolve(path.dirname(current), readlinkSync(current));
    } catch {
      return undefined; // not a link (EINVAL), nothing there (ENOENT), or unreadable: not a descriptor path
    }
  }
  return undefined;
}

/** `realpath` of a directory, or `undefined` when it cannot be resolved. */
function realDirectory(dir: string): string | undefined {
  try {
    return realpathSync(dir);
  } catch {
    return undefined;
  }
}

/**
 * Whether this process's descriptor `fd` is one Node opened for its event loop, as `/proc/self/fd` shows it:
 * an anonymous inode (epoll, eventfd, signalfd…), or a pipe whose read end and write end are both open here
 * (libuv's self-pipes). A regular file, a device, a socket, or a pipe with only one end here (`3>file`, a
 * process substitution, `3>&1` onto a pipe — however many copies of that end) was the caller's. Standard input,
 * output and error are always the caller's.
 */
function isNodesOwn(fd: number): boolean {
  if (fd <= 2) return false;
  const target = linkOf(`/proc/self/fd/${fd}`);
  if (target === undefined) return false; // not open: writing says so
  if (target.startsWith('anon_inode:')) return true;
  if (!target.startsWith('pipe:')) return false;
  const modes = new Set<number | undefined>();
  for (const other of readdirSync('/proc/self/fd')) {
    if (linkOf(`/proc/self/fd/${other}`) === target) modes.add(accessMode(`/proc/self/fdinfo/${other}`));
  }
  return modes.has(constants.O_RDONLY) && modes.has(constants.O_WRONLY);
}

/**
 * The access mode (`O_RDONLY`, `O_WRONLY` or `O_RDWR`) of the descriptor whose `/proc/…/fdinfo/N` file is
 * `fdinfo`, from its `flags:` line (octal); `undefined` when it cannot be read (gone, or another user's).
 */
function accessMode(fdinfo: string): number | undefined {
  let text: string;
  try {
    text = readFileSync(fdinfo, 'utf8');
  } catch {
    return undefined;
  }
  const flags = /^flags:\s*([0-7]+)$/m.exec(text);
  return flags ? Number.parseInt(flags[1]!, 8) & O_ACCMODE : undefined;
}

/** `readlink`, or `undefined` when `file` is not a link or is gone. */
function linkOf(file: string): string | undefined {
  try {
    return readlinkSync(file);
  } catch {
    return undefined;
  }
}

/** Writes into the descriptor `file` names; one that is not open is `EBADF` (the system says ENOENT). */
function writeDescriptor(file: string, text: string): void {
  try {
    writeInto(file, text);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    throw noDescriptor(file);
  }
}

function noDescriptor(file: string): Error {
  return Object.assign(new Error(`${file} names no open descriptor`), { code: 'EBADF' });
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
