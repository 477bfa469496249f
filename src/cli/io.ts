/** What a command may touch of the outside world; `bin.ts` passes the real process, tests a buffer. */
export interface CliIo {
  readonly cwd: string;
  readonly env: Readonly<Record<string, string | undefined>>;
  stdout(text: string): void;
  stderr(text: string): void;
}

/** A command's result: the exit code `bin.ts` sets. */
export type ExitCode = 0 | 1 | 2;

/**
 * The standard stream an absolute path names (`/dev/stdout`, `/dev/fd/2`, `/proc/self/fd/1`…), or `undefined`.
 * Output asked for there goes through the process's own stream: opening the path again fails where the
 * stream is a socket, and would race the stream's own writes.
 */
export function standardStream(file: string): 'stdout' | 'stderr' | undefined {
  const match = /^\/(?:dev\/(stdout|stderr|fd\/([12]))|proc\/(?:self|thread-self)\/fd\/([12]))$/.exec(file);
  if (!match) return undefined;
  const fd = match[2] ?? match[3];
  return fd === undefined ? (match[1] as 'stdout' | 'stderr') : fd === '1' ? 'stdout' : 'stderr';
}
