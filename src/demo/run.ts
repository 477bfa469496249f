/**
 * `npm run demo`: the second entry point that touches `process` (like `cli/bin.ts`): it prints the demo's
 * account and sets the exit code.
 */
import { DemoFailure, runDemo } from './demo.js';

try {
  await runDemo((line) => process.stdout.write(`${line}\n`));
} catch (error) {
  const message = error instanceof DemoFailure ? error.message : error instanceof Error ? (error.stack ?? error.message) : String(error);
  process.stderr.write(`\ndemo failed: ${message}\n`);
  process.exitCode = 1;
}
