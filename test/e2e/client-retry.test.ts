/**
 * The generated client against the generated Express guard with the embedded SQLite store, on 127.0.0.1,
 * with faults injected between them by request id.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startDemoService, type DemoService, type GeneratedServer } from '../../src/demo/app.js';
import { generateWorkspace, importGenerated } from '../../src/demo/workspace.js';
import type * as GeneratedClient from '../golden/client/e2e/index.js';

const SPEC = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', 'fixtures', 'client', 'e2e.yaml');
const KEY = 'demo-key-retry-2020-06-a7f1';
const body = { topic: 'bundle review', contact: { email: 'ops@example.com' } };

describe('client end to end: generated client → generated Express guard (SQLite) on 127.0.0.1', function () {
  this.timeout(60_000);
  let dir: string;
  let server: GeneratedServer;
  let client: typeof GeneratedClient;
  let service: DemoService | undefined;
  let run = 0;

  before(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'idemkit-client-e2e-'));
    const ws = await generateWorkspace(SPEC, dir);
    server = await importGenerated<GeneratedServer>(ws.serverEntry);
    client = await importGenerated<typeof GeneratedClient>(ws.clientEntry);
  });

  after(() => rmSync(dir, { recursive: true, force: true }));

  afterEach(async () => {
    await service?.close();
    service = undefined;
  });

  /** A fresh service (its own database) and a client whose attempts are named `<prefix>-1`, `<prefix>-2`, … */
  async function setup(prefix = 'req') {
    service = await startDemoService(server, path.join(dir, `db-${++run}.sqlite`));
    let n = 0;
    const api = client.createClient({ baseUrl: service.baseUrl, runtime: { newRequestId: () => `${prefix}-${++n}` } });
    return { svc: service, api };
  }

  it('first response lost after commit → completed, replayed: true, the same result id, one effect', async () => {
    const { svc, api } = await setup();
    svc.faults.set('req-1', { kind: 'lose-response' });
    const intent = api.intent('createDemoRequest', KEY);
    const result = await api.createDemoRequest({ body }, { intent });
    assert.equal(result.kind, 'completed');
    assert.ok(result.kind === 'completed');
    assert.equal(result.replayed, true);
    assert.equal(result.status, 201);
    assert.equal(result.body.id, 'demo-request-42');
    assert.deepEqual(result.intent.requestIds, ['req-1', 'req-2']);
    assert.equal(svc.effects(), 1);
    // The guard saved the first delivery's result and replayed it to the second.
    const decisions = svc.log.map((e) => `${e.requestId} ${e.decision} ${e.resultId ?? ''}`.trim());
    assert.deepEqual(decisions, ['req-1 reserved', 'req-1 completed demo-request-42', 'req-2 replay demo-request-42']);
    // Both deliveries carried the same key (the guard found one record).
    assert.equal(new Set(svc.log.map((e) => e.keyId)).size, 1);
  });

  it('409 in progress with Retry-After → the client waits and then completes with the same key', async () => {
    const { svc, api } = await setup();
    // The first delivery's connection breaks after 100 ms while its handler still runs for 600 ms.
    svc.faults.set('req-1', { kind: 'drop', afterMs: 100 });
    svc.handlerDelays.set('req-1', 600);
    const started = Date.now();
    const result = await api.createDemoRequest({ body });
    assert.ok(result.kind === 'completed', JSON.stringify(result));
    assert.equal(result.replayed, true);
    const inProgress = svc.log.filter((e) => e.decision === 'in-progress');
    assert.equal(inProgress.length, 1, 'the retry found the first delivery in progress');
    const retried = svc.arrivals.filter((a) => a.path === '/v1/demo-requests');
    assert.equal(retried.length, 3);
    // The first had run ~0.1 s of its 2 s lease: the guard said Retry-After: 1, and the client waited it out.
    assert.ok(retried[2]!.at - retried[1]!.at >= 1_000, `waited ${retried[2]!.at - retried[1]!.at} ms`);
    assert.ok(Date.now() - started < 10_000);
    assert.equal(svc.effects(), 1);
  });

  it('deadline spent while the server stalls → unknown with the key and every request id; no attempt after the deadline', async () => {
    const { svc, api } = await setup();
    svc.faults.set('req-1', { kind: 'drop-before' });
    svc.faults.set('req-2', { kind: 'stall' });
    const intent = client.Intent.create({ operationId: 'createDemoRequest', deadlineMs: 800, now: Date.now(), key: KEY });
    const result = await api.createDemoRequest({ body }, { intent });
    assert.ok(result.kind === 'unknown', JSON.stringify(result));
    assert.equal(result.reason, 'deadline');
    assert.equal(result.key, KEY);
    assert.deepEqual(result.requestIds, ['req-1', 'req-2']);
    assert.ok(Date.now() >= intent.deadlineAt!);
    // Give a stray attempt time to show up, then check none started after the deadline.
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.deepEqual(svc.arrivals.map((a) => a.requestId), ['req-1', 'req-2']);
    assert.ok(svc.arrivals.every((a) => a.at < intent.deadlineAt!));
    assert.equal(svc.effects(), 0);
    // The typed status call is there for the UI's next step.
    const status = await result.checkStatus({ path: { id: 'demo-request-42' } });
    assert.equal(status.status, 404);
  });

  it('the same key with a changed body → rejected (422 mismatch) with no retry and no second effect', async () => {
    const { svc, api } = await setup();
    const intent = api.intent('createDemoRequest', KEY);
    const first = await api.createDemoRequest({ body }, { intent });
    assert.ok(first.kind === 'completed' && !first.replayed);
    const changed = await api.createDemoRequest({ body: { ...body, topic: 'other command' } }, { intent });
    assert.ok(changed.kind === 'rejected', JSON.stringify(changed));
    assert.equal(changed.reason, 'mismatch');
    assert.equal(changed.status, 422);
    assert.match(changed.body.type, /idempotency-key-reused$/);
    assert.equal(svc.arrivals.length, 2, 'one delivery for the changed body, never retried');
    assert.equal(svc.effects(), 1);
    // An excluded field (clientSentAt) is not part of the intent: same key, same result.
    const again = await api.createDemoRequest({ body: { ...body, clientSentAt: '2020-06-01T10:00:00Z' } }, { intent });
    assert.ok(again.kind === 'completed' && again.replayed && again.body.id === first.body.id);
  });

  it('an external effect without a provider key is not retried automatically: unknown, then the status route', async () => {
    const { svc, api } = await setup();
    svc.faults.set('req-1', { kind: 'lose-response' });
    const result = await api.sendEmail({ body: { to: 'ops@example.com' } });
    assert.ok(result.kind === 'unknown', JSON.stringify(result));
    assert.equal(result.reason, 'unsafe-to-retry');
    assert.deepEqual(result.requestIds, ['req-1']);
    assert.equal(svc.arrivals.length, 1, 'no automatic retry');
    assert.equal(svc.effects(), 1, 'the e-mail went out once');
    const status = await result.checkStatus({ path: { id: 'email-1' } });
    assert.ok(status.ok);
    assert.equal(status.body.state, 'sent');
    assert.equal(status.headers.get('content-type')?.startsWith('application/json'), true);
  });

  it('x-idempotency: false → sent once, a 503 comes back as it is (never retried)', async () => {
    const { svc, api } = await setup();
    const answer = await api.ping();
    assert.equal(answer.ok, false);
    assert.equal(answer.status, 503);
    assert.equal(svc.pings(), 1);
    assert.equal(svc.arrivals.length, 1);
  });

  it('an intent kept across a "reload" (JSON) resumes with the same key and gets the saved result', async () => {
    const { svc, api } = await setup();
    svc.faults.set('req-1', { kind: 'lose-response' });
    const intent = api.intent('createDemoRequest');
    const saved = JSON.stringify(intent);
    // The first response is lost and every later delivery of this page's life too: the attempts run out.
    for (const id of ['req-2', 'req-3', 'req-4', 'req-5']) svc.faults.set(id, { kind: 'drop-before' });
    const before = await api.createDemoRequest({ body }, { intent });
    assert.ok(before.kind === 'unknown' && before.reason === 'attempts', JSON.stringify(before));
    assert.equal(before.requestIds.length, 5);
    const restored = client.Intent.fromJSON(saved);
    const result = await api.createDemoRequest({ body }, { intent: restored });
    assert.ok(result.kind === 'completed', JSON.stringify(result));
    assert.equal(result.replayed, true);
    assert.equal(restored.key, intent.key);
    assert.equal(result.requestId, 'req-6');
    assert.equal(svc.effects(), 1);
  });
});
