import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { lintDocument } from '../../src/lint/engine.js';
import { catalogue } from '../../src/lint/catalogue.js';
import { compileContract } from '../../src/parser/compile.js';
import { loadDocument } from '../../src/parser/load.js';
import { createRouteGuard } from '../../src/runtime/adapters/fetch.js';
import { MemoryStore } from '../../src/runtime/stores/memory.js';

// Binance's signed endpoints: every parameter in the query, signed afresh with a new timestamp on each send; the key is
// the caller's newClientOrderId. A re-sent order must be the replay, not a 422 for a "changed" timestamp and signature.
const spec = (exclude: string) => `openapi: 3.1.0
info: { title: spot, version: '1' }
paths:
  /api/v3/order:
    post:
      operationId: newOrder
      parameters:
        - { name: symbol, in: query, required: true, schema: { type: string } }
        - { name: quantity, in: query, required: true, schema: { type: string } }
        - { name: newClientOrderId, in: query, required: true, schema: { type: string, maxLength: 64 } }
        - { name: timestamp, in: query, required: true, schema: { type: integer } }
        - { name: signature, in: query, required: true, schema: { type: string } }
      responses: { '200': { description: ok }, '400': { description: bad }, '409': { description: busy }, '422': { description: reused }, '503': { description: down } }
      x-idempotency:
        key: { query: newClientOrderId, required: true, maxLength: 64 }
        scope: [global]
        fingerprint: { exclude: ${exclude} }
        ttl: P1D
        lease: PT30S
`;

describe('fingerprint.exclude: query:NAME leaves a per-request query parameter out', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'idemkit-query-exclusion-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  const load = async (exclude: string) => {
    const file = path.join(dir, 'spot.yaml');
    writeFileSync(file, spec(exclude));
    return loadDocument(file);
  };

  it('a re-signed re-send is the replay; another quantity under the same key is 422', async () => {
    const doc = await load('[query:timestamp, query:signature]');
    const contract = compileContract(doc.operations[0]!, doc);
    assert.deepEqual(contract.fingerprint.query, ['newClientOrderId', 'quantity', 'symbol']);
    assert.deepEqual(contract.fingerprint.exclude, []);
    let effects = 0;
    const guarded = createRouteGuard(contract, { store: new MemoryStore() }).wrap(async () => Response.json({ orderId: (effects += 1) }));
    const send = (quantity: string, timestamp: number) =>
      guarded(new Request(`http://x/api/v3/order?symbol=BTCUSDT&quantity=${quantity}&newClientOrderId=o-1&timestamp=${timestamp}&signature=${(timestamp * 7).toString(16)}`, { method: 'POST' }));
    assert.equal((await send('1', 1_700_000_000_000)).status, 200);
    const again = await send('1', 1_700_000_005_000);
    assert.equal(again.status, 200);
    assert.equal(again.headers.get('idempotent-replayed'), 'true');
    assert.deepEqual(await again.json(), { orderId: 1 });
    assert.equal((await send('2', 1_700_000_009_000)).status, 422);
    assert.equal(effects, 1);
  });

  it('without the exclusion the re-sent order is refused (what Binance clients met), and lint names an exclusion of no parameter', async () => {
    const doc = await load('[]');
    const contract = compileContract(doc.operations[0]!, doc);
    const guarded = createRouteGuard(contract, { store: new MemoryStore() }).wrap(async () => Response.json({ orderId: 1 }));
    const send = (timestamp: number) => guarded(new Request(`http://x/api/v3/order?symbol=S&quantity=1&newClientOrderId=o-1&timestamp=${timestamp}&signature=${timestamp}`, { method: 'POST' }));
    assert.equal((await send(1)).status, 200);
    assert.equal((await send(2)).status, 422);

    const typo = await load('[query:timestamp, query:sig]');
    const findings = lintDocument(typo, { rules: catalogue() }).filter((finding) => finding.ruleId === 'fingerprint-field-unknown' || finding.ruleId === 'contract-invalid');
    assert.equal(findings.length, 1, JSON.stringify(findings));
    assert.match(findings[0]!.message, /fingerprint exclude entry `query:sig` names no query parameter of POST \/api\/v3\/order \(newOrder\)/);
    assert.equal(findings[0]!.line, 17);
  });

  it('where every query parameter counts (a free-form object in the query), the excluded ones are still left out', async () => {
    const doc = await load('[query:timestamp, query:signature]');
    const free = doc.operations[0]!;
    const withFilter: typeof free = {
      ...free,
      node: { ...free.node, parameters: [...(free.node['parameters'] as unknown[]), { name: 'filter', in: 'query', schema: { type: 'object', additionalProperties: true } }] },
      parameters: undefined,
    };
    const contract = compileContract(withFilter, doc);
    assert.equal(contract.fingerprint.queryAll, true);
    assert.deepEqual(contract.fingerprint.queryExclude, ['signature', 'timestamp']);
    let effects = 0;
    const guarded = createRouteGuard(contract, { store: new MemoryStore() }).wrap(async () => Response.json({ orderId: (effects += 1) }));
    const send = (extra: string, timestamp: number) => guarded(new Request(`http://x/api/v3/order?newClientOrderId=o-2&${extra}&timestamp=${timestamp}&signature=s${timestamp}`, { method: 'POST' }));
    assert.equal((await send('colour=red', 1)).status, 200);
    assert.equal((await send('colour=red', 2)).headers.get('idempotent-replayed'), 'true');
    assert.equal((await send('colour=blue', 3)).status, 422);
    assert.equal(effects, 1);
  });
});
