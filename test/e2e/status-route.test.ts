/**
 * The status route after an unknown outcome, over real HTTP: the bundled sample's generated client and Express guard
 * (SQLite) on 127.0.0.1. The article's readiness question 5 — what to do when the outcome is unknown — is answered
 * only if the route can be called with what the client still holds: the intent's key.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startDemoService, type DemoService, type GeneratedServer } from '../../src/demo/app.js';
import { generateWorkspace, importGenerated } from '../../src/demo/workspace.js';

/** What this test uses of the generated demo client (its types are checked by test/golden/client/usage/demo-requests.ts). */
interface Answer {
  readonly ok: boolean;
  readonly status: number;
  readonly body: { readonly id?: string; readonly type?: string };
  readonly headers: Headers;
}
interface DemoClient {
  intent(operation: 'createDemoRequest', key?: string): { readonly key: string };
  createDemoRequest(input: { body: unknown }, call?: { intent?: unknown }): Promise<
    | { kind: 'completed'; replayed: boolean; body: { id: string } }
    | { kind: 'unknown'; checkStatus(): Promise<Answer> }
    | { kind: 'rejected' }
  >;
  getDemoRequestOutcome(input: Record<string, never>, call: { headers: Record<string, string> }): Promise<Answer>;
}

const SAMPLE = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'samples', 'demo-requests', 'openapi.yaml');
const body = { topic: 'bundle review', contact: { email: 'ops@example.com' } };
const PROBLEM = 'https://idemkit.dev/problems/';

describe('status route: an unknown outcome resolved by the intent\'s key (generated client → generated Express guard, SQLite)', function () {
  this.timeout(60_000);
  let dir: string;
  let server: GeneratedServer;
  let client: { createClient(options: unknown): DemoClient };
  let service: DemoService | undefined;
  let run = 0;

  before(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'idemkit-status-e2e-'));
    const ws = await generateWorkspace(SAMPLE, dir);
    server = await importGenerated<GeneratedServer>(ws.serverEntry);
    client = await importGenerated<{ createClient(options: unknown): DemoClient }>(ws.clientEntry);
  });

  after(() => rmSync(dir, { recursive: true, force: true }));

  afterEach(async () => {
    await service?.close();
    service = undefined;
  });

  async function setup() {
    service = await startDemoService(server, path.join(dir, `db-${++run}.sqlite`));
    let n = 0;
    const api = client.createClient({ baseUrl: service.baseUrl, runtime: { newRequestId: () => `req-${++n}`, sleep: () => Promise.resolve() } });
    return { svc: service, api };
  }

  it('every answer lost → unknown; checkStatus() with nothing but the intent gets the first answer replayed, the same id; one effect', async () => {
    const { svc, api } = await setup();
    for (let i = 1; i <= 4; i++) svc.faults.set(`req-${i}`, { kind: 'lose-response' });
    const result = await api.createDemoRequest({ body });
    assert.ok(result.kind === 'unknown', JSON.stringify(result));
    assert.equal(svc.effects(), 1);
    const check = await result.checkStatus();
    assert.equal(check.status, 201);
    assert.ok(check.ok);
    assert.equal(check.body.id, 'demo-request-42');
    assert.equal(check.headers.get('idempotent-replayed'), 'true');
    assert.equal(svc.effects(), 1, 'reading the outcome ran nothing');
    // The guard found the record of the key the intent carried.
    const recordIds = new Set(svc.log.filter((e) => e.keyId !== undefined).map((e) => e.keyId));
    assert.equal(recordIds.size, 1);
  });

  it('a key no request reached the service with → 404 idempotency-key-unknown; the same intent sent again runs once', async () => {
    const { svc, api } = await setup();
    const intent = api.intent('createDemoRequest');
    const outcome = await api.getDemoRequestOutcome({}, { headers: { 'Idempotency-Key': intent.key } });
    assert.equal(outcome.status, 404);
    assert.ok(!outcome.ok);
    assert.equal(outcome.body.type, `${PROBLEM}idempotency-key-unknown`);
    const sent = await api.createDemoRequest({ body }, { intent });
    assert.ok(sent.kind === 'completed' && !sent.replayed);
    const again = await api.getDemoRequestOutcome({}, { headers: { 'Idempotency-Key': intent.key } });
    assert.ok(again.ok && again.body.id === sent.body.id);
    assert.equal(svc.effects(), 1);
  });

  it('while the request runs → 409 in progress with Retry-After; without a key the route\'s own handler answers', async () => {
    const { svc, api } = await setup();
    svc.handlerDelays.set('req-1', 800);
    const intent = api.intent('createDemoRequest');
    const running = api.createDemoRequest({ body }, { intent });
    await new Promise((resolve) => setTimeout(resolve, 200));
    const busy = await api.getDemoRequestOutcome({}, { headers: { 'Idempotency-Key': intent.key } });
    assert.equal(busy.status, 409);
    assert.ok(!busy.ok);
    assert.equal(busy.body.type, `${PROBLEM}idempotency-request-in-progress`);
    assert.ok(Number(busy.headers.get('retry-after')) >= 1);
    assert.ok((await running).kind === 'completed');
    const bare = await fetch(`${svc.baseUrl}/v1/demo-request-outcome`);
    assert.equal(bare.status, 400);
    assert.equal(((await bare.json()) as { title: string }).title, 'Send the Idempotency-Key header of the request to look up');
    assert.equal(svc.effects(), 1);
  });
});
