// Lint speed benchmark (not a test): builds synthetic OpenAPI documents of N operations, contracts on a third,
// and measures — on the built `dist/` — load time, lint time, page faults (median) and peak RSS for JSON and YAML, the ratio to
// JSON.parse alone on the biggest JSON, and the cold start of `idemkit lint` on the demo sample.
// Usage: npm run build && npm run bench:lint [-- --ops 200,2000 --runs 3 --file real.json,other.json]
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const dist = path.join(root, 'dist');

/** Rounds of load + lint in one process for the warm-JIT figure. */
const WARM_ROUNDS = 5;

if (process.argv[2] === '--child') {
  await child(process.argv[3], process.argv[4]);
} else {
  await parent();
}

async function child(mode, file) {
  if (mode === 'json-parse') {
    // The baseline a linter cannot beat: read the file and JSON.parse it.
    const start = performance.now();
    const text = readFileSync(file, 'utf8');
    const read = performance.now();
    JSON.parse(text);
    const end = performance.now();
    process.stdout.write(JSON.stringify({ readParseMs: end - start, parseMs: end - read, rssMb: process.resourceUsage().maxRSS / 1024 }));
    return;
  }
  const { loadDocument } = await import(pathToFileURL(path.join(dist, 'src/parser/load.js')).href);
  const { lintDocument } = await import(pathToFileURL(path.join(dist, 'src/lint/engine.js')).href);
  const { catalogue } = await import(pathToFileURL(path.join(dist, 'src/lint/catalogue.js')).href);
  const rules = catalogue();
  if (mode === 'lint-warm') {
    // The same load + lint repeated in one process: by the last round the JIT has compiled the hot code,
    // so what is left is the work itself (a fresh document each round: nothing memoised carries over).
    let lastMs = 0;
    for (let round = 0; round < WARM_ROUNDS; round++) {
      const start = performance.now();
      lintDocument(await loadDocument(file), { rules });
      lastMs = performance.now() - start;
    }
    process.stdout.write(JSON.stringify({ totalMs: lastMs }));
    return;
  }
  // Minor page faults too: on a VM where touching a fresh page is expensive, they show what allocation costs
  // even when other work on the machine makes the times noisy.
  const faults = () => process.resourceUsage().minorPageFault;
  const f0 = faults();
  const t0 = performance.now();
  const doc = await loadDocument(file);
  const t1 = performance.now();
  const f1 = faults();
  const findings = lintDocument(doc, { rules });
  const t2 = performance.now();
  const f2 = faults();
  process.stdout.write(
    JSON.stringify({
      loadMs: t1 - t0,
      lintMs: t2 - t1,
      totalMs: t2 - t0,
      loadFaults: f1 - f0,
      lintFaults: f2 - f1,
      findings: findings.length,
      operations: doc.operations.length,
      rssMb: process.resourceUsage().maxRSS / 1024,
    }),
  );
}

async function parent() {
  const args = process.argv.slice(2);
  const option = (name, fallback) => {
    const index = args.indexOf(`--${name}`);
    return index === -1 ? fallback : args[index + 1];
  };
  const sizes = option('ops', '200,2000').split(',').map(Number);
  const runs = Number(option('runs', '3'));
  try {
    statSync(path.join(dist, 'src/cli/bin.js'));
  } catch {
    console.error('dist/ is missing: run `npm run build` first');
    process.exit(2);
  }
  const { stringify } = await import('yaml');
  const dir = path.join(tmpdir(), `idemkit-bench-${process.pid}`);
  mkdirSync(dir, { recursive: true });
  // The specs are ~20 MB per run: remove them however the run ends.
  process.on('exit', () => rmSync(dir, { recursive: true, force: true }));

  console.log(`node ${process.version}, ${runs} fresh processes each; times are min / median ms; figures from dist/\n`);
  console.log('| operations | format | size | load | lint | load + lint | page faults load / lint | peak RSS MB | findings |');
  console.log('|---:|---|---:|---:|---:|---:|---:|---:|---:|');
  let biggestJson;
  for (const operations of sizes) {
    const spec = buildSpec(operations);
    const jsonFile = path.join(dir, `spec-${operations}.json`);
    const yamlFile = path.join(dir, `spec-${operations}.yaml`);
    writeFileSync(jsonFile, JSON.stringify(spec, null, 2));
    writeFileSync(yamlFile, stringify(spec, { aliasDuplicateObjects: false, lineWidth: 0 }));
    for (const [format, file] of [['json', jsonFile], ['yaml', yamlFile]]) {
      const samples = Array.from({ length: runs }, () => runChild('lint', file));
      const m = (key) => median(samples.map((sample) => sample[key]));
      const both = (key) => `${Math.min(...samples.map((sample) => sample[key])).toFixed(0)} / ${m(key).toFixed(0)}`;
      console.log(
        `| ${operations} | ${format} | ${mb(statSync(file).size)} MB | ${both('loadMs')} | ${both('lintMs')} | ${both('totalMs')} | ${m('loadFaults').toFixed(0)} / ${m('lintFaults').toFixed(0)} | ${m('rssMb').toFixed(0)} | ${samples[0].findings} |`,
      );
      if (format === 'json') {
        biggestJson = { file, minMs: Math.min(...samples.map((sample) => sample.totalMs)), medianMs: m('totalMs'), size: statSync(file).size };
      }
    }
  }
  const baselines = Array.from({ length: runs }, () => runChild('json-parse', biggestJson.file));
  const readParse = Math.min(...baselines.map((sample) => sample.readParseMs));
  const parseOnly = Math.min(...baselines.map((sample) => sample.parseMs));
  console.log(
    `\n${mb(biggestJson.size)} MB JSON: readFileSync + JSON.parse ${readParse.toFixed(0)} ms (JSON.parse alone ${parseOnly.toFixed(0)} ms); ` +
      `load + lint ${biggestJson.minMs.toFixed(0)} ms = ${(biggestJson.minMs / readParse).toFixed(2)}× read + JSON.parse, ${(biggestJson.minMs / parseOnly).toFixed(2)}× JSON.parse alone (best runs; goal ≤ 3×)`,
  );
  const warm = Math.min(...Array.from({ length: runs }, () => runChild('lint-warm', biggestJson.file).totalMs));
  console.log(
    `the same with a warm JIT (round ${WARM_ROUNDS} of load + lint in one process, a fresh document each round): ${warm.toFixed(0)} ms = ${(warm / parseOnly).toFixed(2)}× JSON.parse alone`,
  );

  // Real documents given with --file (e.g. GitHub's REST description: `npm pack @octokit/openapi`, then
  // package/generated/api.github.com.json): the same measurement on text nobody generated for this bench.
  const files = option('file', '').split(',').filter(Boolean);
  if (files.length > 0) {
    console.log('\n| document | size | load | lint | load + lint | JSON.parse alone | read + JSON.parse | × JSON.parse | × read + parse | findings |');
    console.log('|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
    for (const file of files) {
      const samples = Array.from({ length: runs }, () => runChild('lint', path.resolve(file)));
      const parses = Array.from({ length: runs }, () => runChild('json-parse', path.resolve(file)));
      const min = (list, key) => Math.min(...list.map((sample) => sample[key]));
      const total = min(samples, 'totalMs');
      console.log(
        `| ${path.basename(file)} | ${mb(statSync(file).size)} MB | ${min(samples, 'loadMs').toFixed(0)} | ${min(samples, 'lintMs').toFixed(0)} | ${total.toFixed(0)} | ` +
          `${min(parses, 'parseMs').toFixed(0)} | ${min(parses, 'readParseMs').toFixed(0)} | ${(total / min(parses, 'parseMs')).toFixed(2)} | ${(total / min(parses, 'readParseMs')).toFixed(2)} | ${samples[0].findings} |`,
      );
    }
  }

  const bin = path.join(dist, 'src/cli/bin.js');
  const sample = path.join(root, 'samples/demo-requests/openapi.yaml');
  // NODE_EXTRA_CA_CERTS makes every Node process read and parse that CA bundle before it runs any code (+50 ms
  // on this sandbox, which sets it for every command). It is the environment's cost, not idemkit's: when it is
  // set, the cold start is measured both as the environment runs Node and without it, each beside bare node.
  const environments = [['', process.env]];
  if (process.env.NODE_EXTRA_CA_CERTS) {
    const { NODE_EXTRA_CA_CERTS: _extra, ...without } = process.env;
    environments.push([' without NODE_EXTRA_CA_CERTS', without]);
  }
  for (const [label, env] of environments) {
    const bare = [];
    const cold = [];
    for (let i = 0; i < 10; i++) {
      bare.push(time(() => spawnSync(process.execPath, ['-e', '0'], { env })));
      cold.push(
        time(() => {
          const result = spawnSync(process.execPath, [bin, 'lint', sample], { cwd: root, env });
          if (result.status !== 0) throw new Error(`idemkit lint exited ${result.status}: ${result.stdout}${result.stderr}`);
        }),
      );
    }
    console.log(
      `cold start of \`node dist/src/cli/bin.js lint samples/demo-requests/openapi.yaml\`${label}: median ${median(cold).toFixed(0)} ms of 10 (bare node: ${median(bare).toFixed(0)} ms; goal ≤ 200 ms)`,
    );
  }
}

function runChild(mode, file) {
  const out = execFileSync(process.execPath, [fileURLToPath(import.meta.url), '--child', mode, file], {
    maxBuffer: 64 * 1024 * 1024,
  });
  return JSON.parse(out.toString());
}

function time(fn) {
  const start = performance.now();
  fn();
  return performance.now() - start;
}

function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = sorted.length >> 1;
  return sorted.length % 2 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
}

function mb(bytes) {
  return (bytes / 1024 / 1024).toFixed(1);
}

/**
 * A document of `count` operations in triples: a POST with a contract, the GET that is its status route, and
 * a POST without a contract. Request schemas are inline and wordy (~6 KB per POST), so 2,000 operations are
 * ~10 MB of JSON — roughly the operation density of real large descriptions.
 */
function buildSpec(count) {
  const paths = {};
  const properties = (i) =>
    Object.fromEntries(
      Array.from({ length: 20 }, (_, p) => [
        `field${p}`,
        {
          type: p % 3 === 0 ? 'integer' : 'string',
          description: `Field ${p} of resource ${i}: a description long enough to look like real API documentation text.`,
          ...(p % 3 === 0 ? { minimum: 0, maximum: 1000 } : { maxLength: 200, example: `value-${i}-${p}` }),
        },
      ]),
    );
  const post = (i, contracted) => ({
    operationId: `createResource${i}`,
    summary: `Create resource ${i}`,
    tags: [`group${i % 20}`],
    parameters: contracted ? [{ $ref: '#/components/parameters/IdempotencyKey' }] : [],
    requestBody: {
      required: true,
      content: { 'application/json': { schema: { type: 'object', required: ['field1', 'field2'], properties: properties(i) } } },
    },
    responses: {
      201: {
        description: 'Created',
        headers: contracted ? { 'Idempotent-Replayed': { $ref: '#/components/headers/IdempotentReplayed' } } : {},
        content: { 'application/json': { schema: { $ref: '#/components/schemas/Resource' } } },
      },
      400: { $ref: '#/components/responses/Problem' },
      409: { $ref: '#/components/responses/Retry' },
      422: { $ref: '#/components/responses/Problem' },
      503: { $ref: '#/components/responses/Retry' },
    },
    ...(contracted ? { 'x-idempotency': contract(i) } : {}),
  });
  const contract = (i) => ({
    key: { header: 'Idempotency-Key', required: true, maxLength: 255 },
    scope: ['principal'],
    fingerprint: { include: ['/field1', '/field2'], exclude: [] },
    ttl: 'P1D',
    lease: 'PT30S',
    retry: { deadline: 'PT30S', maxAttempts: 4, backoff: { initial: 'PT0.2S', max: 'PT5S', jitter: 'full' } },
    effect: { owner: `service-${i % 7}`, external: false, statusRoute: `getResource${i}` },
    transient: [429, 503],
    responses: {
      replay: { header: 'Idempotent-Replayed' },
      missingKey: { status: 400 },
      invalidKey: { status: 400 },
      mismatch: { status: 422 },
      inProgress: { status: 409 },
      abandoned: { status: 409 },
      storeUnavailable: { status: 503 },
    },
    unknownOutcome: 'status-route',
  });
  for (let i = 0; i < count; i++) {
    if (i % 3 === 0) {
      paths[`/v1/resources-${i}`] = { post: post(i, true) };
    } else if (i % 3 === 1) {
      paths[`/v1/resources-${i - 1}/{id}`] = {
        get: {
          operationId: `getResource${i - 1}`,
          parameters: [{ name: 'id', in: 'path', required: true, schema: { type: 'string' } }],
          responses: { 200: { description: 'The resource', content: { 'application/json': { schema: { $ref: '#/components/schemas/Resource' } } } } },
        },
      };
    } else {
      paths[`/v1/other-resources-${i}`] = { post: post(i, false) };
    }
  }
  return {
    openapi: '3.1.0',
    info: { title: `synthetic ${count}`, version: '1.0.0' },
    security: [{ bearer: [] }],
    paths,
    components: {
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } },
      parameters: {
        IdempotencyKey: { name: 'Idempotency-Key', in: 'header', required: true, schema: { type: 'string', maxLength: 255 } },
      },
      headers: {
        IdempotentReplayed: { schema: { type: 'boolean' } },
        RetryAfter: { schema: { type: 'integer', minimum: 0 } },
      },
      responses: {
        Problem: { description: 'Problem', content: { 'application/problem+json': { schema: { $ref: '#/components/schemas/Problem' } } } },
        Retry: {
          description: 'Retry later',
          headers: { 'Retry-After': { $ref: '#/components/headers/RetryAfter' } },
          content: { 'application/problem+json': { schema: { $ref: '#/components/schemas/Problem' } } },
        },
      },
      schemas: {
        Resource: { type: 'object', required: ['id'], properties: { id: { type: 'string' }, state: { type: 'string' } } },
        Problem: { type: 'object', required: ['type', 'title', 'status'], properties: { type: { type: 'string' }, title: { type: 'string' }, status: { type: 'integer' } } },
      },
    },
  };
}
