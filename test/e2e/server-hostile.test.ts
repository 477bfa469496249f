import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { main } from '../../src/cli/main.js';
import { bufferIo } from '../helpers/io.js';
import { prepareTsProject, runTsc } from '../generate/tsc.js';

const run = promisify(execFile);

/** Text that executes `globalThis.canary = …` wherever it is pasted raw into code or a comment. */
const PAYLOADS = [
  `x'); globalThis.canary = 'single'; ('`,
  `x"); globalThis.canary = "double"; ("`,
  '`; globalThis.canary = `backtick`; `',
  '${globalThis.canary = "template"}',
  '*/ globalThis.canary = "comment"; /*',
  'nl\nglobalThis.canary = "newline";\n//',
  'ls\u2028globalThis.canary = "u2028";//',
  'ps\u2029globalThis.canary = "u2029";//',
  '</script><script>globalThis.canary = "script"</script>',
  '{{canary}} {{{canary}}} {{> canary}}',
  'ünïcödé 名前 🧨 \u202e',
];

function hostileSpec(): Record<string, unknown> {
  const paths: Record<string, unknown> = {};
  PAYLOADS.forEach((payload, index) => {
    const param = `p${index}${payload}`;
    const pathTemplate = `/v1/${encodeURIComponent(payload).slice(0, 20)}${index}/{${param}}`;
    paths[pathTemplate] = {
      post: {
        operationId: payload,
        summary: payload,
        description: payload,
        parameters: [
          { name: 'Idempotency-Key', in: 'header', required: true, schema: { type: 'string', maxLength: 255 } },
          { name: param, in: 'path', required: true, description: payload, schema: { type: 'string' } },
          { name: `q${payload}`, in: 'query', description: payload, schema: { type: 'string' } },
        ],
        requestBody: { content: { 'application/json': { schema: { type: 'object', properties: { [payload]: { type: 'string', description: payload } } } } } },
        'x-idempotency': {
          // The schema wants a scope part on one line; everything else in it stays hostile.
          scope: ['principal', `path:${param.replace(/[\n\r\u2028\u2029]/g, ' ')}`, `header:X-${index}`],
          // Every third operation keys on its hostile body field, every third on its hostile query parameter.
          ...(index % 3 === 1 ? { key: { body: `/${payload.replace(/~/g, '~0').replace(/\//g, '~1')}` } } : index % 3 === 2 ? { key: { query: `q${payload}` } } : {}),
          fingerprint: { include: [`/${payload.replace(/~/g, '~0').replace(/\//g, '~1')}`] },
          effect: { owner: payload, external: true, providerKey: 'forward', statusRoute: payload },
        },
        responses: { '201': { description: payload } },
      },
    };
  });
  // Two operationIds that make the same identifier must not collide; Object.prototype's names are operationIds like any other.
  for (const [suffix, operationId] of [['a', 'create-order'], ['b', 'create order'], ['c', '__proto__'], ['d', 'constructor'], ['e', 'toString']] as const) {
    paths[`/orders-${suffix}`] = { post: { operationId, 'x-idempotency': true, responses: { '201': { description: 'ok' } } } };
  }
  return {
    openapi: '3.1.0',
    info: { title: PAYLOADS.join(' '), version: '1' },
    'x-idempotency': { key: { header: 'Idempotency-Key', required: true, maxLength: 255 }, scope: ['principal'], fingerprint: { include: 'all' }, ttl: 'P1D', lease: 'PT30S' },
    paths,
  };
}

describe('generated server guards from a hostile spec', function () {
  this.timeout(180_000);
  let root: string;
  before(() => {
    root = mkdtempSync(path.join(os.tmpdir(), 'idemkit-hostile-'));
  });
  after(() => rmSync(root, { recursive: true, force: true }));

  it('compile under tsc --strict for every framework, and importing them runs no payload', async () => {
    // The spec's file name is hostile too: it enters every generated header.
    // (`evil\n*` is a directory, so the relative path holds `*/` across the separator.)
    const specDir = path.join(root, 'spec', 'evil\n*');
    mkdirSync(specDir, { recursive: true });
    const spec = path.join(specDir, ' ${globalThis.canary="file"} \'".json');
    writeFileSync(spec, JSON.stringify(hostileSpec(), null, 2));
    const frameworks = ['express', 'fastify', 'fetch'] as const;
    for (const framework of frameworks) {
      const io = bufferIo();
      const code = await main(['generate', 'server', spec, '--framework', framework, '--store', 'memory', '--out', path.join(root, 'src', framework)], io);
      assert.equal(code, 0, io.err);
    }
    writeFileSync(path.join(root, 'package.json'), JSON.stringify({ type: 'module', private: true }));
    const diagnostics = await runTsc(prepareTsProject(root, { outDir: path.join(root, 'dist'), include: ['src/**/*.ts'] }));
    assert.equal(diagnostics, '', diagnostics);

    const guards = readFileSync(path.join(root, 'src', 'express', 'guards.ts'), 'utf8');
    assert.match(guards, /export function createOrderGuard\(/);
    assert.match(guards, /export function createOrder2Guard\(/);

    const probe = [
      `const out = {};`,
      `for (const fw of ${JSON.stringify(frameworks)}) {`,
      `  const contracts = await import('./dist/src/' + fw + '/contracts.js');`,
      `  const index = await import('./dist/src/' + fw + '/index.js');`,
      `  const { MemoryStore } = await import('./dist/src/' + fw + '/runtime/stores/memory.js');`,
      `  const guards = index.createGuards({ store: new MemoryStore() });`,
      `  out[fw] = { ids: Object.keys(contracts.contracts).sort(), paths: Object.values(contracts.contracts).map((c) => c.path).sort(), owners: Object.values(contracts.contracts).map((c) => c.effect.owner).sort(), keys: Object.values(contracts.contracts).map((c) => c.key.in + ' ' + c.key.name).sort(), guards: Object.keys(guards).length };`,
      `}`,
      `process.stdout.write(JSON.stringify({ canary: globalThis.canary ?? null, out }));`,
    ].join('\n');
    const { stdout } = await run(process.execPath, ['--input-type=module', '-e', probe], { cwd: root });
    const result = JSON.parse(stdout) as { canary: unknown; out: Record<string, { ids: string[]; paths: string[]; owners: string[]; keys: string[]; guards: number }> };
    assert.equal(result.canary, null, 'a payload ran');
    const spec2 = hostileSpec();
    const expectedIds = [...PAYLOADS, 'create-order', 'create order', '__proto__', 'constructor', 'toString'].sort();
    for (const framework of frameworks) {
      const got = result.out[framework]!;
      assert.deepEqual(got.ids, expectedIds, 'operationIds survive byte for byte');
      assert.deepEqual(got.paths, Object.keys(spec2['paths'] as object).sort());
      assert.ok(PAYLOADS.every((payload) => got.owners.includes(payload)));
      // The hostile body and query key names survive as data too.
      const expectedKeys = PAYLOADS.map((payload, index) =>
        index % 3 === 1 ? `body /${payload.replace(/~/g, '~0').replace(/\//g, '~1')}` : index % 3 === 2 ? `query q${payload}` : 'header Idempotency-Key',
      );
      assert.deepEqual(got.keys, [...expectedKeys, ...Array.from({ length: 5 }, () => 'header Idempotency-Key')].sort());
      assert.equal(got.guards, expectedIds.length);
    }
  });
});
