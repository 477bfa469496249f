import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository root, and the built CLI in it. */
export const root = fileURLToPath(new URL('../../', import.meta.url));
export const bin = path.join(root, 'dist/src/cli/bin.js');

/** Fails with the fix (`npm run build`) when the built CLI is missing. */
export function assertBuilt(): void {
  assert.ok(existsSync(bin), `${bin} is missing: run \`npm run build\` first (npm test does)`);
}

/** What a finished process left: its exit code (`null` when a signal ended it), stdout and stderr. */
export interface Ran {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * Runs `command` and resolves with its exit code instead of rejecting on a non-zero one. `killAfterMs` is a
 * guard against a hang (the process is killed, `code` is `null`), not a measurement.
 */
export function runProcess(command: string, args: readonly string[], options: { cwd: string; input?: string; killAfterMs?: number }): Promise<Ran> {
  return new Promise((resolve) => {
    const child = execFile(command, [...args], { cwd: options.cwd, timeout: options.killAfterMs ?? 60_000, maxBuffer: 64 << 20 }, (error, stdout, stderr) => {
      const failed = error as (Error & { code?: unknown; killed?: boolean }) | null;
      const code = failed === null ? 0 : failed.killed || typeof failed.code !== 'number' ? null : failed.code;
      resolve({ code, stdout: String(stdout), stderr: String(stderr) });
    });
    if (options.input !== undefined) child.stdin?.end(options.input);
    else child.stdin?.end();
  });
}

/** Runs the built CLI (`idemkit …argv`) in `cwd`. */
export function runBin(argv: readonly string[], options: { cwd?: string; input?: string; killAfterMs?: number } = {}): Promise<Ran> {
  return runProcess(process.execPath, [bin, ...argv], { cwd: options.cwd ?? root, input: options.input, killAfterMs: options.killAfterMs });
}
