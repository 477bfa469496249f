import { execFile } from 'node:child_process';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const run = promisify(execFile);
const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, '../../..');

/** Reserve one id from `processes` OS processes × `perProcess` concurrent calls; returns every winner token and every owner seen. */
export async function reserveFromProcesses(kind: 'postgres' | 'redis' | 'sqlite', target: string, name: string, id: string, processes = 4, perProcess = 25): Promise<{ won: string[]; seen: string[] }> {
  // Start all children well before the shared instant so their reservations overlap.
  const startAt = Date.now() + 4000;
  const outputs = await Promise.all(
    Array.from({ length: processes }, () =>
      run(process.execPath, ['--import', 'tsx', join(here, 'reserve-child.ts'), JSON.stringify({ kind, target, name, id, count: perProcess, startAt })], {
        cwd: root,
        timeout: 60_000,
      }),
    ),
  );
  const parsed = outputs.map((o) => JSON.parse(o.stdout) as { won: string[]; seen: string[] });
  return { won: parsed.flatMap((p) => p.won), seen: [...new Set(parsed.flatMap((p) => p.seen))] };
}
