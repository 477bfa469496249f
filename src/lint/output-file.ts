/**
 * Files idemkit writes because the user named them (`--output`, `--write-baseline`, `init --write`): a file
 * system failure there is the user's path, not idemkit's bug, so it becomes a one-line {@link UsageError}.
 */
import { accessSync, constants, realpathSync, statSync } from 'node:fs';
import path from 'node:path';
import { UsageError } from '../errors.js';
import { writeFileAtomic } from './write-file.js';

/**
 * Writes `text` to `file` atomically (creating missing parent directories); a file system error becomes a
 * {@link UsageError} naming `option` (may be empty) and the path as the user wrote it (`shown`).
 */
export function writeUserFile(file: string, text: string, option: string, shown: string): void {
  try {
    writeFileAtomic(file, text);
  } catch (error) {
    throw describeWriteError(error, option, shown, file) ?? error;
  }
}

/**
 * Whether `file` could be written as {@link writeUserFile} writes it — its mode lets its owner write it, and its
 * directory takes a new file beside it (the rename) — else the same {@link UsageError}. For a run that writes several
 * files: all are checked before any is written, so one that cannot be does not leave the others half-applied.
 */
export function assertWritable(file: string, option: string, shown: string): void {
  try {
    const stats = statSync(file, { throwIfNoEntry: false });
    if (stats?.isFile() === true && (stats.mode & 0o200) === 0) throw Object.assign(new Error(`${file} is read-only`), { code: 'EREADONLY' });
    if (stats === undefined || stats.isFile()) accessSync(stats === undefined ? realpathSync(path.dirname(file)) : path.dirname(realpathSync(file)), constants.W_OK);
  } catch (error) {
    throw describeWriteError(error, option, shown, file) ?? error;
  }
}

/**
 * The usage error for a failed write of `shown`, or `undefined` when `error` is not a file system error.
 * `file` (absolute) lets it name the part of the path that is not a directory.
 */
export function describeWriteError(error: unknown, option: string, shown: string, file?: string): UsageError | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  if (!(error instanceof Error) || typeof code !== 'string' || !/^E[A-Z]+$/.test(code)) return undefined;
  const say = (why: string) => new UsageError(`cannot write ${option ? `${option} ` : ''}${shown}: ${why}`);
  switch (code) {
    case 'EISDIR':
      return say('it is a directory — name a file');
    case 'ENOTDIR':
    case 'EEXIST': {
      const blocker = file === undefined ? undefined : firstNonDirectory(file);
      if (blocker !== undefined) return say(`${displayBlocker(blocker, file!, shown)} is not a directory`);
      return code === 'EEXIST' ? say(error.message) : say('a part of the path is not a directory');
    }
    case 'EACCES':
    case 'EPERM':
      return say('permission denied — choose a location you can write to');
    case 'EROFS':
      return say('the file system is read-only');
    case 'EREADONLY':
      return say('the file is read-only — make it writable (chmod u+w) if it should change');
    case 'ENOSPC':
    case 'EDQUOT':
      return say('no space left on the device');
    case 'ENAMETOOLONG':
      return say('the path is too long');
    case 'ELOOP':
      return say('a symbolic link on the path leads in a loop — fix the link');
    case 'EDANGLING': {
      const { link, target } = error as unknown as { link: string; target: string };
      const named = file === undefined ? link : displayBlocker(link, file, shown);
      return say(`${named} is a symbolic link to ${target}, which does not exist — create it or fix the link`);
    }
    case 'EMKDIR': {
      const dir = (error as unknown as { path: string }).path;
      return say(`cannot create the directory ${file === undefined ? dir : displayBlocker(dir, file, shown)} — choose a location where files can be written`);
    }
    case 'ENOENT':
      return say('a directory on the path does not exist (removed while writing?)');
    case 'EREADONLYFD':
      return say(`descriptor ${(error as unknown as { fd: number }).fd} is not open for writing`);
    case 'EOWNFD':
      return say("it is one of Node's own descriptors (its event loop) — name a file, or a descriptor the shell opened (3>file)");
    case 'EBADF':
      return say('no such descriptor is open — name a file');
    case 'ENXIO':
      return say('it is a socket or a device with nothing behind it — name a file');
    case 'EPIPE':
      return say('the pipe was closed by the program reading it');
    default:
      return say(error.message);
  }
}

/** The nearest ancestor directory of `file` that exists but is not a directory. */
function firstNonDirectory(file: string): string | undefined {
  const chain: string[] = [];
  for (let dir = path.dirname(file); ; dir = path.dirname(dir)) {
    chain.unshift(dir);
    if (path.dirname(dir) === dir) break;
  }
  for (const dir of chain) {
    try {
      if (!statSync(dir).isDirectory()) return dir;
    } catch {
      return undefined;
    }
  }
  return undefined;
}

/** `blocker` as the user would recognise it: cut from `shown` when `shown` ends like `file`. */
function displayBlocker(blocker: string, file: string, shown: string): string {
  const rest = path.relative(blocker, file);
  if (rest === '') return shown;
  const normalised = shown.split(path.sep).join('/');
  const suffix = rest.split(path.sep).join('/');
  return normalised.endsWith(`/${suffix}`) ? normalised.slice(0, -suffix.length - 1) : blocker;
}
