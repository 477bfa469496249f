// Client generator and demo benchmark (not a test), on the built `dist/`: generateClient time (median of
// --runs) for the demo sample and for synthetic documents of N operations (half contracted, one schema per
// pair, each referring to the next), the emitted size, and the wall time of `npm run demo`.
// Usage: npm run build && npm run bench:client [-- --ops 100,600 --runs 5]
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const dist = (file) => pathToFileURL(path.join(root, 'dist', file)).href;
const arg = (name, fallback) => {
  const i = process.argv.indexOf(`--${name}`);
  return i === -1 ? fallback : process.argv[i + 1];
};
const sizes = arg('ops', '100,600').split(',').map(Number);
const runs = Number(arg('runs', '5'));

const { loadDocument } = await import(dist('src/parser/load.js'));
const { generateClient } = await import(dist('src/generate/client/index.js'));

function synthetic(ops) {
  const pairs = Math.max(1, Math.floor(ops / 2));
  const paths = {};
  const schemas = {};
  for (let i = 0; i < pairs; i++) {
    schemas[`Thing${i}`] = {
      type: 'object',
      required: ['id'],
      properties: {
        id: { type: 'string' },
        next: { $ref: `#/components/schemas/Thing${(i + 1) % pairs}` },
        kind: { type: 'string', enum: ['a', 'b'] },
        n: { type: ['integer', 'null'] },
        any: { oneOf: [{ type: 'string' }, { type: 'array', items: { type: 'number' } }] },
      },
    };
    paths[`/v1/things${i}`] = {
      post: {
        operationId: `createThing${i}`,
        parameters: [{ name: 'Idempotency-Key', in: 'header', required: true, schema: { type: 'string' } }],
        requestBody: { required: true, content: { 'application/json': { schema: { $ref: `#/components/schemas/Thing${i}` } } } },
        responses: { 201: { description: 'ok', content: { 'application/json': { schema: { $ref: `#/components/schemas/Thing${i}` } } } } },
        'x-idempotency': true,
      },
      get: {
        operationId: `listThings${i}`,
        parameters: [{ name: 'q', in: 'query', schema: { type: 'string' } }],
        responses: { 200: { description: 'ok', content: { 'application/json': { schema: { type: 'array', items: { $ref: `#/components/schemas/Thing${i}` } } } } } },
      },
    };
  }
  return {
    openapi: '3.1.0',
    info: { title: 'bench', version: '1' },
    'x-idempotency': {
      key: { header: 'Idempotency-Key', required: true, maxLength: 255 },
      scope: ['global'],
      fingerprint: { include: 'all' },
      ttl: 'P1D',
      lease: 'PT30S',
      retry: { deadline: 'PT30S', maxAttempts: 4 },
      effect: { owner: 'things', external: false },
    },
    paths,
    components: { schemas },
  };
}

async function measure(label, file) {
  const doc = await loadDocument(file);
  const times = [];
  let files = [];
  for (let i = 0; i < runs; i++) {
    const start = performance.now();
    files = generateClient(doc, { source: path.basename(file) });
    times.push(performance.now() - start);
  }
  times.sort((a, b) => a - b);
  const bytes = files.reduce((sum, f) => sum + Buffer.byteLength(f.contents), 0);
  console.log(`${label.padEnd(28)} ops ${String(doc.operations.length).padStart(5)}  generateClient median ${times[Math.floor(times.length / 2)].toFixed(1).padStart(7)} ms  output ${(bytes / 1024).toFixed(0).padStart(5)} KiB in ${files.length} files`);
}

const dir = mkdtempSync(path.join(tmpdir(), 'idemkit-bench-client-'));
try {
  await measure('samples/demo-requests', path.join(root, 'samples', 'demo-requests', 'openapi.yaml'));
  for (const ops of sizes) {
    const file = path.join(dir, `synthetic-${ops}.json`);
    writeFileSync(file, JSON.stringify(synthetic(ops)));
    await measure(`synthetic-${ops}`, file);
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}

const start = performance.now();
const demo = spawnSync(process.execPath, [path.join(root, 'dist', 'src', 'demo', 'run.js')], { cwd: root, encoding: 'utf8' });
const wall = performance.now() - start;
console.log(`npm run demo                 exit ${demo.status}  wall ${(wall / 1000).toFixed(2)} s  last line: ${demo.stdout.trimEnd().split('\n').at(-1)}`);
