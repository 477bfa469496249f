import type { CliIo } from '../../src/cli/io.js';

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
