import { writeSync } from 'node:fs';
import { main } from './main.js';

/**
 * Writes to a standard stream until it fails. A reader that went away (`idemkit lint … -f sarif | head -1`)
 * ends the output quietly — that is the reader's choice; any other failure (a full disk) is one line on
 * stderr and exit code 2. Without a listener Node printed either as an unhandled 'error' with a stack trace.
 */
function guarded(stream: NodeJS.WriteStream, name: 'stdout' | 'stderr'): (text: string) => void {
  let closed = false;
  stream.on('error', (error: NodeJS.ErrnoException) => {
    if (closed) return;
    closed = true;
    if (error.code === 'EPIPE' || error.code === 'ERR_STREAM_DESTROYED') return;
    process.exitCode = 2;
    if (name === 'stdout') {
      try {
        writeSync(2, `cannot write to ${name}: ${error.message}\n`);
      } catch {
        // stderr is gone too: the exit code says it
      }
    }
  });
  return (text) => {
    if (!closed) stream.write(text);
  };
}

/**
 * The `idemkit` command: {@link main} on this process's arguments and standard streams, then the exit code.
 * `bin.ts` calls it, and so does the bundled CLI that the build puts in its place (scripts/bundle.mjs).
 */
export async function run(): Promise<void> {
  const code = await main(process.argv.slice(2), {
    cwd: process.cwd(),
    env: process.env,
    stdout: guarded(process.stdout, 'stdout'),
    stderr: guarded(process.stderr, 'stderr'),
  });
  // A failed standard stream (exit code 2 set above) outranks the command's own code.
  process.exitCode = process.exitCode === 2 ? 2 : code;
}
