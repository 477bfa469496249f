/** What a command may touch of the outside world; `bin.ts` passes the real process, tests a buffer. */
export interface CliIo {
  readonly cwd: string;
  readonly env: Readonly<Record<string, string | undefined>>;
  stdout(text: string): void;
  stderr(text: string): void;
}

/** A command's result: the exit code `bin.ts` sets. */
export type ExitCode = 0 | 1 | 2;
