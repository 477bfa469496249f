// Per-rule lint benchmark (not a test): builds synthetic OpenAPI 3.1 documents of N operations (half POSTs
// with contracts that carry a rotating set of faults, half GETs), and measures on the built `dist/` the time
// each rule of the catalogue takes alone (on a freshly loaded document, so a rule pays for the views it
// needs) and the whole catalogue together. What the engine does once per document whatever the rules — the
// line/column index (built on the first finding) and the document's own warnings — is done before timing and
// shown on its own lines. Times are the
// minimum of the runs (the machine is shared; the minimum is the least disturbed). It then compares the
// biggest size with the smallest: a rule whose time grows more than ~2× faster than the operation count is
// flagged as superlinear.
// Usage: npm run build && node --expose-gc bench/rules.mjs [--ops 200,2000] [--runs 5]
import { statSync } from 'node:fs';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const dist = path.join(root, 'dist');
const args = process.argv.slice(2);
const option = (name, fallback) => {
  const index = args.indexOf(`--${name}`);
  return index === -1 ? fallback : args[index + 1];
};
const sizes = option('ops', '200,2000').split(',').map(Number).sort((a, b) => a - b);
const runs = Number(option('runs', '5'));

try {
  statSync(path.join(dist, 'src/lint/engine.js'));
} catch {
  console.error('dist/ is missing: run `npm run build` first');
  process.exit(2);
}
const { loadDocument } = await import(pathToFileURL(path.join(dist, 'src/parser/load.js')).href);
const { lintDocument } = await import(pathToFileURL(path.join(dist, 'src/lint/engine.js')).href);
const { catalogue } = await import(pathToFileURL(path.join(dist, 'src/lint/catalogue.js')).href);
const rules = catalogue();

const dir = mkdtempSync(path.join(tmpdir(), 'idemkit-bench-rules-'));
try {
  const results = new Map(); // size -> { perRule: Map(id -> { ms, findings }), allMs, allFindings, loadMs }
  for (const size of sizes) {
    const file = path.join(dir, `spec-${size}.json`);
    writeFileSync(file, JSON.stringify(buildSpec(size / 2)));
    // Warm up the JIT on this size once, so the first rule measured is not charged for it.
    lintDocument(await loadDocument(file), { rules });
    const fresh = async () => {
      const doc = await loadDocument(file);
      const t = performance.now();
      doc.position({ file: doc.file, pointer: '/components' });
      const t1 = performance.now();
      // The document's own warnings (document-invalid) are found once per document, whatever the rules:
      // a run with no rules finds them, so each rule below is timed alone.
      lintDocument(doc, { rules: [] });
      return { doc, positionMs: t1 - t, warningsMs: performance.now() - t1 };
    };
    const positions = [];
    const warningTimes = [];
    const perRule = new Map();
    for (const rule of rules) {
      const times = [];
      let findings = 0;
      for (let run = 0; run < runs; run++) {
        const { doc, positionMs, warningsMs } = await fresh();
        positions.push(positionMs);
        warningTimes.push(warningsMs);
        globalThis.gc?.();
        const start = performance.now();
        findings = lintDocument(doc, { rules: [rule] }).filter((f) => f.ruleId === rule.meta.id).length;
        times.push(performance.now() - start);
      }
      perRule.set(rule.meta.id, { ms: Math.min(...times), findings });
    }
    const all = [];
    const loads = [];
    let allFindings = 0;
    for (let run = 0; run < runs; run++) {
      const t0 = performance.now();
      const { doc } = await fresh();
      const t1 = performance.now();
      globalThis.gc?.();
      const t2 = performance.now();
      allFindings = lintDocument(doc, { rules }).length;
      all.push(performance.now() - t2);
      loads.push(t1 - t0);
    }
    results.set(size, { perRule, allMs: Math.min(...all), allFindings, loadMs: Math.min(...loads), positionMs: median(positions), warningsMs: median(warningTimes) });
  }

  const small = sizes[0];
  const big = sizes[sizes.length - 1];
  const growth = big / small;
  console.log(`node ${process.version}; ${rules.length} rules; minimum of ${runs} runs; each rule alone on a freshly loaded document (views included)\n`);
  console.log(`| rule | ${sizes.map((s) => `${s} ops ms`).join(' | ')} | findings @${big} | µs/op @${big} | ×${big}/${small} |`);
  console.log(`|---|${sizes.map(() => '---:').join('|')}|---:|---:|---:|`);
  const superlinear = [];
  for (const rule of rules) {
    const id = rule.meta.id;
    const cells = sizes.map((s) => results.get(s).perRule.get(id).ms.toFixed(2));
    const a = results.get(small).perRule.get(id).ms;
    const b = results.get(big).perRule.get(id).ms;
    // Sub-millisecond timings are noise-dominated; judge growth only where there is something to measure.
    const ratio = b / Math.max(a, 0.05);
    if (b > 2 && ratio > growth * 2) superlinear.push(`${id} (×${ratio.toFixed(1)})`);
    console.log(
      `| ${id} | ${cells.join(' | ')} | ${results.get(big).perRule.get(id).findings} | ${((b * 1000) / big).toFixed(1)} | ${ratio.toFixed(1)} |`,
    );
  }
  const allCells = sizes.map((s) => results.get(s).allMs.toFixed(1));
  const allRatio = results.get(big).allMs / results.get(small).allMs;
  console.log(`| **whole catalogue** | ${allCells.join(' | ')} | ${results.get(big).allFindings} | ${((results.get(big).allMs * 1000) / big).toFixed(1)} | ${allRatio.toFixed(1)} |`);
  console.log(`| (load, for scale) | ${sizes.map((s) => results.get(s).loadMs.toFixed(1)).join(' | ')} | | | |`);
  console.log(`| (line/column index, once per document, median) | ${sizes.map((s) => results.get(s).positionMs.toFixed(1)).join(' | ')} | | | |`);
  console.log(`| (document warnings, once per document, median) | ${sizes.map((s) => results.get(s).warningsMs.toFixed(1)).join(' | ')} | | | |`);
  console.log(
    `\nlinearity: operations grew ×${growth.toFixed(0)}, the whole catalogue's lint time ×${allRatio.toFixed(1)}; ` +
      (superlinear.length === 0 ? 'no rule grew faster than ~linearly.' : `SUPERLINEAR: ${superlinear.join(', ')}`),
  );
  if (superlinear.length > 0 || allRatio > growth * 2) process.exitCode = 1;
} finally {
  rmSync(dir, { recursive: true, force: true });
}

function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = sorted.length >> 1;
  return sorted.length % 2 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
}

/**
 * `count` resources, each a contracted POST and a GET. Every tenth contract carries one fault from a rotating
 * set, so every rule does real work (cross-references, "did you mean" searches) and reports something.
 */
function buildSpec(count) {
  const paths = {};
  for (let i = 0; i < count; i++) {
    const fault = i % 10 === 0 ? (i / 10) % 8 : -1;
    const contract = {
      key: { header: 'Idempotency-Key', required: fault !== 0, maxLength: 255 },
      scope: fault === 1 ? ['global'] : ['principal'],
      fingerprint: { include: ['/amount', '/currency', fault === 2 ? '/beneficiary/ibna' : '/beneficiary/iban', '/lines/0/sku'], exclude: ['/note'] },
      ttl: fault === 3 ? 'PT40S' : 'P1D',
      lease: 'PT30S',
      retry: { deadline: 'PT30S', maxAttempts: 4, backoff: { initial: 'PT0.2S', max: 'PT5S', jitter: 'full' } },
      effect: { owner: `service-${i % 7}`, external: fault === 4, providerKey: fault === 4 ? 'none' : 'forward', ...(fault === 4 ? {} : { statusRoute: fault === 5 ? `getResourse${i}` : `getResource${i}` }) },
      transient: [429, 503],
      responses: {
        replay: { header: 'Idempotent-Replayed' },
        missingKey: { status: 400 },
        invalidKey: { status: 400 },
        mismatch: { status: fault === 6 ? 409 : 422 },
        inProgress: { status: 409 },
        abandoned: { status: 409 },
        storeUnavailable: { status: 503 },
      },
      unknownOutcome: fault === 4 ? 'surface' : 'status-route',
    };
    if (fault === 7) delete contract.lease;
    paths[`/v1/tenants/{tenant}/resources-${i}`] = {
      parameters: [{ $ref: '#/components/parameters/Tenant' }],
      post: {
        operationId: `createResource${i}`,
        parameters: [{ $ref: '#/components/parameters/IdempotencyKey' }],
        requestBody: { required: true, content: { 'application/json': { schema: { $ref: `#/components/schemas/Input${i % 50}` } } } },
        responses: {
          201: { $ref: '#/components/responses/Created' },
          400: { $ref: '#/components/responses/Problem' },
          409: { $ref: '#/components/responses/Retry' },
          422: { $ref: '#/components/responses/Problem' },
          503: { $ref: '#/components/responses/Retry' },
        },
        'x-idempotency': contract,
      },
    };
    paths[`/v1/tenants/{tenant}/resources-${i}/{id}`] = {
      parameters: [{ $ref: '#/components/parameters/Tenant' }, { name: 'id', in: 'path', required: true, schema: { type: 'string' } }],
      get: {
        operationId: `getResource${i}`,
        responses: { 200: { $ref: '#/components/responses/Created' } },
      },
    };
  }
  const schemas = {
    Money: { type: 'object', required: ['amount', 'currency'], properties: { amount: { type: 'integer' }, currency: { type: 'string' } } },
    Beneficiary: { oneOf: [{ type: 'object', properties: { iban: { type: 'string' } } }, { type: 'object', properties: { card: { type: 'string' } } }] },
    Resource: { type: 'object', required: ['id'], properties: { id: { type: 'string' }, state: { type: 'string' } } },
    Problem: { type: 'object', properties: { type: { type: 'string' }, title: { type: 'string' }, status: { type: 'integer' } } },
  };
  for (let s = 0; s < 50; s++) {
    schemas[`Input${s}`] = {
      allOf: [
        { $ref: '#/components/schemas/Money' },
        {
          type: ['object', 'null'],
          required: ['beneficiary'],
          properties: {
            beneficiary: { $ref: '#/components/schemas/Beneficiary' },
            note: { type: ['string', 'null'] },
            lines: { type: 'array', items: { type: 'object', properties: { sku: { type: 'string' }, qty: { type: 'integer' } } } },
            ...Object.fromEntries(Array.from({ length: 8 }, (_, p) => [`extra${s}_${p}`, { type: 'string', maxLength: 100 }])),
          },
        },
      ],
    };
  }
  return {
    openapi: '3.1.0',
    info: { title: `synthetic ${count * 2} operations`, version: '1.0.0' },
    security: [{ bearer: [] }],
    paths,
    components: {
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } },
      parameters: {
        IdempotencyKey: { name: 'Idempotency-Key', in: 'header', required: true, schema: { type: 'string', maxLength: 255 } },
        Tenant: { name: 'tenant', in: 'path', required: true, schema: { type: 'string' } },
      },
      headers: { IdempotentReplayed: { schema: { type: 'boolean' } }, RetryAfter: { schema: { type: 'integer', minimum: 0 } } },
      responses: {
        Created: {
          description: 'The resource',
          headers: { 'Idempotent-Replayed': { $ref: '#/components/headers/IdempotentReplayed' } },
          content: { 'application/json': { schema: { $ref: '#/components/schemas/Resource' } } },
        },
        Problem: { description: 'Problem', content: { 'application/problem+json': { schema: { $ref: '#/components/schemas/Problem' } } } },
        Retry: {
          description: 'Retry later',
          headers: { 'Retry-After': { $ref: '#/components/headers/RetryAfter' } },
          content: { 'application/problem+json': { schema: { $ref: '#/components/schemas/Problem' } } },
        },
      },
      schemas,
    },
  };
}
