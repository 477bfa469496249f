import type { CliIo, ExitCode } from '../../src/cli/io.js';
import { main } from '../../src/cli/main.js';

/** A CLI io that records what was printed. */
export function bufferIo(cwd = process.cwd()): CliIo & { out: string; err: string } {
  const io = {
    cwd,
    env: {},
    out: '',
    err: '',
    stdout(text: string) {
      io.out += text;
    },
    stderr(text: string) {
      io.err += text;
    },
  };
  return io;
}

/** Runs the CLI in process (`idemkit …argv` in `cwd`) and resolves with its exit code and what it printed. */
export async function runCli(argv: readonly string[], cwd: string): Promise<{ code: ExitCode; out: string; err: string }> {
  const io = bufferIo(cwd);
  const code = await main(argv, io);
  return { code, out: io.out, err: io.err };
}
