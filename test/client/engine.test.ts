import assert from 'node:assert/strict';
import { sendIntent, sendOnce, type IntentResult } from '../../src/runtime/client/engine.js';
import { Intent } from '../../src/runtime/client/intent.js';
import type { CompiledContract } from '../../src/runtime/contract.js';
import { externalDerived, externalForward, externalNoKey, localContract } from './contracts.js';
import { fakeRuntime, json, type FakeRuntime, type Step } from './fake-runtime.js';

const request = { url: 'http://api.test/v1/demo-requests', method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"topic":"bundle review"}' };
const created = { requestId: 'demo-request-42', state: 'accepted' };
const problem = (type: string) => ({ type: `https://idemkit.dev/problems/${type}`, title: type });

async function send(steps: Step[], contract: CompiledContract = localContract, opts: { deadlineMs?: number; random?: number } = {}) {
  const rt = fakeRuntime(steps, { random: opts.random });
  const intent = Intent.create({ operationId: contract.operationId, deadlineMs: opts.deadlineMs ?? contract.retry.deadlineMs, now: rt.clock, key: 'demo-key-retry-2020-06-a7f1' });
  const result: IntentResult<typeof created, unknown, string> = await sendIntent({ contract, intent, request, runtime: rt, checkStatus: 'status-call' });
  return { rt, intent, result };
}

function keysOf(rt: FakeRuntime): string[] {
  return rt.seen.map((r) => r.headers['idempotency-key'] ?? '<none>');
}

describe('client sendIntent', () => {
  it('completes on the first 2xx, sending the key and a request id', async () => {
    const { rt, result } = await send([json(201, created, { 'Idempotent-Replayed': 'false' })]);
    assert.equal(result.kind, 'completed');
    assert.ok(result.kind === 'completed');
    assert.equal(result.replayed, false);
    assert.equal(result.status, 201);
    assert.deepEqual(result.body, created);
    assert.equal(result.requestId, 'req-1');
    assert.deepEqual(keysOf(rt), ['demo-key-retry-2020-06-a7f1']);
    assert.equal(rt.seen[0]?.headers['x-request-id'], 'req-1');
    assert.equal(rt.seen[0]?.body, request.body);
  });

  it('a lost response is retried with the same key and a fresh request id, and the replay is marked', async () => {
    const { rt, result } = await send([new TypeError('fetch failed'), json(201, created, { 'Idempotent-Replayed': 'true' })]);
    assert.ok(result.kind === 'completed');
    assert.equal(result.replayed, true);
    assert.deepEqual(result.body, created);
    assert.deepEqual(keysOf(rt), ['demo-key-retry-2020-06-a7f1', 'demo-key-retry-2020-06-a7f1']);
    assert.deepEqual(rt.seen.map((r) => r.headers['x-request-id']), ['req-1', 'req-2']);
    assert.deepEqual(result.intent.requestIds, ['req-1', 'req-2']);
    // full jitter with random 0.5 over a 200 ms cap
    assert.deepEqual(rt.sleeps, [100]);
  });

  it('409 in progress waits Retry-After (seconds) and then completes', async () => {
    const { rt, result } = await send([
      json(409, problem('idempotency-request-in-progress'), { 'Retry-After': '2' }),
      json(201, created, { 'Idempotent-Replayed': 'true' }),
    ]);
    assert.ok(result.kind === 'completed');
    assert.deepEqual(rt.sleeps, [2_000]);
    assert.equal(rt.seen[1]!.at - rt.seen[0]!.at, 2_000);
  });

  it('honours Retry-After as an HTTP-date', async () => {
    const rt0 = fakeRuntime([]);
    const at = new Date(rt0.clock + 3_000).toUTCString();
    const { rt, result } = await send([json(409, problem('idempotency-request-in-progress'), { 'Retry-After': at }), json(201, created)]);
    assert.ok(result.kind === 'completed');
    assert.equal(rt.sleeps.length, 1);
    assert.ok(rt.sleeps[0]! >= 2_000 && rt.sleeps[0]! <= 3_000, `slept ${rt.sleeps[0]}`);
  });

  it('never waits past the deadline for a Retry-After: it answers unknown at once', async () => {
    const { rt, result } = await send([json(409, problem('idempotency-request-in-progress'), { 'Retry-After': '60' })], localContract, { deadlineMs: 5_000 });
    assert.ok(result.kind === 'unknown');
    assert.equal(result.reason, 'deadline');
    assert.deepEqual(rt.sleeps, []);
    assert.equal(result.lastStatus, 409);
    // The wait the budget had no room for is shown, so a page can offer the same intent again after it.
    assert.equal(result.retryAfterMs, 60_000);
  });

  it('an unknown result shows the last answer\'s Retry-After only: none after a network error or an answer without one', async () => {
    const lost = await send([json(503, problem('idempotency-store-unavailable'), { 'Retry-After': '1' }), new TypeError('fetch failed')], localContract, { deadlineMs: 5_000 });
    assert.ok(lost.result.kind === 'unknown' && lost.result.reason === 'attempts', `${lost.result.kind} ${(lost.result as { reason?: string }).reason}`);
    assert.equal(lost.result.retryAfterMs, undefined);
    const abandoned = await send([json(409, problem('idempotency-request-abandoned'))]);
    assert.ok(abandoned.result.kind === 'unknown' && abandoned.result.reason === 'abandoned');
    assert.equal(abandoned.result.retryAfterMs, undefined);
  });

  it('each attempt gets only what is left of the deadline; a stalled server ends unknown with every request id', async () => {
    const { rt, result, intent } = await send([new TypeError('fetch failed'), 'stall'], localContract, { deadlineMs: 1_000 });
    assert.ok(result.kind === 'unknown');
    assert.equal(result.reason, 'deadline');
    assert.equal(result.key, 'demo-key-retry-2020-06-a7f1');
    assert.deepEqual(result.requestIds, ['req-1', 'req-2']);
    assert.equal(result.checkStatus, 'status-call');
    // the second attempt was cut exactly at the deadline, and no attempt started after it
    assert.equal(rt.clock, intent.deadlineAt!);
    assert.ok(rt.seen.every((r) => r.at < intent.deadlineAt!));
  });

  it('stops after maxAttempts with the same key throughout', async () => {
    const err = () => new TypeError('fetch failed');
    const { rt, result } = await send([err(), err(), err(), err()], localContract, { random: 0 });
    assert.ok(result.kind === 'unknown');
    assert.equal(result.reason, 'attempts');
    assert.equal(rt.seen.length, 4);
    assert.equal(new Set(keysOf(rt)).size, 1);
    assert.equal(result.lastError, 'fetch failed');
    assert.deepEqual(result.requestIds, ['req-1', 'req-2', 'req-3', 'req-4']);
  });

  it('retries 5xx for a local effect', async () => {
    const { rt, result } = await send([json(502, { title: 'bad gateway' }), json(201, created)]);
    assert.ok(result.kind === 'completed');
    assert.equal(rt.seen.length, 2);
  });

  for (const [name, step] of [
    ['mismatch 422', json(422, problem('idempotency-key-reused'))],
    ['missing key 400', json(400, problem('idempotency-key-missing'))],
    ['invalid key 400', json(400, problem('idempotency-key-invalid'))],
    ['a plain 400', json(400, { title: 'bad topic' })],
    ['a 404', json(404, { title: 'not found' })],
  ] as const) {
    it(`${name} is rejected and never retried`, async () => {
      const { rt, result } = await send([step]);
      assert.ok(result.kind === 'rejected');
      assert.equal(rt.seen.length, 1);
      assert.deepEqual(result.requestIds, ['req-1']);
    });
  }

  it('a refusal whose body breaks off is still a refusal, not retried; a success whose body breaks off is a lost answer', async () => {
    // Headers, then the connection ends before the Content-Length is reached (the body stream errors).
    const cut = (status: number, headers: Record<string, string>) =>
      new Response(
        new ReadableStream({
          start(controller) {
            controller.enqueue(new TextEncoder().encode('{"type":"https://idemkit.dev/prob'));
            controller.error(new TypeError('terminated'));
          },
        }),
        { status, headers: { 'content-type': 'application/problem+json', ...headers } },
      );
    const mismatch = await send([cut(422, { 'Idempotency-Problem': 'idempotency-key-reused' })]);
    assert.ok(mismatch.result.kind === 'rejected' && mismatch.result.reason === 'mismatch', JSON.stringify(mismatch.result));
    assert.equal(mismatch.rt.seen.length, 1, 'a mismatch is never repeated');
    const notFound = await send([cut(404, {})]);
    assert.ok(notFound.result.kind === 'rejected' && notFound.result.reason === 'client-error' && notFound.result.status === 404);
    assert.equal(notFound.rt.seen.length, 1);
    const abandoned = await send([cut(409, { 'Idempotency-Problem': 'idempotency-request-abandoned' })]);
    assert.ok(abandoned.result.kind === 'unknown' && abandoned.result.reason === 'abandoned');
    const success = await send([cut(201, {}), json(201, created, { 'Idempotent-Replayed': 'true' })]);
    assert.ok(success.result.kind === 'completed' && success.result.replayed, 'retried with the same key into the replay');
    assert.deepEqual(keysOf(success.rt), ['demo-key-retry-2020-06-a7f1', 'demo-key-retry-2020-06-a7f1']);
  });

  it('a 2xx that carries the guard\'s problem header is that state (a contract answering in progress with 202), not a success', async () => {
    const inProgress = { ...localContract, responses: { ...localContract.responses, inProgress: 202 } };
    const { rt, result } = await send(
      [json(202, problem('idempotency-request-in-progress'), { 'Idempotency-Problem': 'idempotency-request-in-progress', 'Retry-After': '1' }), json(201, created, { 'Idempotent-Replayed': 'true' })],
      inProgress,
    );
    assert.ok(result.kind === 'completed' && result.replayed, JSON.stringify(result));
    assert.equal(rt.seen.length, 2, 'waited, then got the replay');
    // A 2xx with another value in that header (not one of the guard's problems) is the operation's answer.
    const other = await send([json(201, created, { 'Idempotency-Problem': 'something-else' })]);
    assert.equal(other.result.kind, 'completed');
  });

  it('a 408 from a proxy that gave up waiting is retried with the same key; the handler\'s own 408 is its recorded answer', async () => {
    const proxy = await send([json(408, { title: 'Request Timeout' }), json(201, created, { 'Idempotent-Replayed': 'false' })]);
    assert.ok(proxy.result.kind === 'completed');
    assert.deepEqual(keysOf(proxy.rt), ['demo-key-retry-2020-06-a7f1', 'demo-key-retry-2020-06-a7f1']);
    const own = await send([json(408, { title: 'slow upstream' }, { 'Idempotent-Replayed': 'false' })]);
    assert.ok(own.result.kind === 'rejected' && own.result.reason === 'client-error');
    assert.equal(own.rt.seen.length, 1);
    const unsafe = await send([json(408, { title: 'Request Timeout' })], externalNoKey);
    assert.ok(unsafe.result.kind === 'unknown' && unsafe.result.reason === 'unsafe-to-retry', 'as a 5xx: the request may have run');
  });

  it('names the reject reason from the problem type', async () => {
    const a = await send([json(422, problem('idempotency-key-reused'))]);
    assert.ok(a.result.kind === 'rejected' && a.result.reason === 'mismatch');
    const b = await send([json(400, problem('idempotency-key-missing'))]);
    assert.ok(b.result.kind === 'rejected' && b.result.reason === 'missing-key');
    const c = await send([json(422, { title: 'no type' })]);
    assert.ok(c.result.kind === 'rejected' && c.result.reason === 'mismatch');
  });

  it('an external effect without a provider key is not retried after a network error: unknown, go to the status route', async () => {
    const { rt, result } = await send([new TypeError('fetch failed')], externalNoKey);
    assert.ok(result.kind === 'unknown');
    assert.equal(result.reason, 'unsafe-to-retry');
    assert.equal(result.checkStatus, 'status-call');
    assert.equal(rt.seen.length, 1);
  });

  it('an external effect without a provider key is not retried after a 5xx either', async () => {
    const { rt, result } = await send([json(500, { title: 'boom' })], externalNoKey);
    assert.ok(result.kind === 'unknown' && result.reason === 'unsafe-to-retry' && result.lastStatus === 500);
    assert.equal(rt.seen.length, 1);
  });

  it('an external effect still waits out in-progress, and retries when the guard says the store was unavailable (handler never ran)', async () => {
    const { rt, result } = await send(
      [
        json(409, problem('idempotency-request-in-progress'), { 'Retry-After': '1' }),
        json(503, problem('idempotency-store-unavailable'), { 'Retry-After': '1' }),
        json(201, created),
      ],
      externalNoKey,
    );
    assert.ok(result.kind === 'completed');
    assert.equal(rt.seen.length, 3);
  });

  it('outcome unknown after the handler ran (a failed commit) is retried only when a repeat is safe', async () => {
    const unknownOutcome = json(503, problem('idempotency-outcome-unknown'), { 'Retry-After': '1' });
    const unsafe = await send([unknownOutcome, json(201, created)], externalNoKey);
    assert.ok(unsafe.result.kind === 'unknown' && unsafe.result.reason === 'unsafe-to-retry' && unsafe.result.lastStatus === 503);
    assert.equal(unsafe.result.checkStatus, 'status-call');
    assert.equal(unsafe.rt.seen.length, 1, 'an external effect with no provider key may have happened: no second attempt');
    for (const contract of [localContract, externalForward, externalDerived]) {
      const safe = await send([unknownOutcome, json(201, created, { 'Idempotent-Replayed': 'true' })], contract);
      assert.ok(safe.result.kind === 'completed', contract.effect.providerKey);
      assert.equal(safe.rt.seen.length, 2);
    }
  });

  it('a replayed non-2xx answer is the stored result: terminal, never waited on or retried', async () => {
    const { rt, result } = await send([json(409, { error: 'seat already taken' }, { 'Idempotent-Replayed': 'true' }), json(201, created)]);
    assert.ok(result.kind === 'rejected');
    assert.equal(result.status, 409);
    assert.deepEqual(result.body, { error: 'seat already taken' });
    assert.equal(rt.seen.length, 1);
  });

  it('the handler\'s own first 4xx (Idempotent-Replayed: false) is terminal too; its 5xx still follows the retry rules', async () => {
    const first = await send([json(409, { error: 'email already registered' }, { 'Idempotent-Replayed': 'false' }), json(409, { error: 'again' }, { 'Idempotent-Replayed': 'true' })]);
    assert.ok(first.result.kind === 'rejected' && first.result.status === 409);
    assert.equal(first.rt.seen.length, 1);
    const failed = await send([json(500, { error: 'boom' }, { 'Idempotent-Replayed': 'false' }), json(201, created, { 'Idempotent-Replayed': 'true' })]);
    assert.ok(failed.result.kind === 'completed' && failed.result.replayed);
    assert.equal(failed.rt.seen.length, 2);
  });

  it('with replayOnFirst: false, an answer with neither the flag nor the guard\'s problem header is the handler\'s own', async () => {
    const quiet: CompiledContract = { ...localContract, responses: { ...localContract.responses, replayOnFirst: false } };
    // A business 409 is terminal, not "in progress"; a business 422 is the client's error, not a reused key.
    const conflict = await send([json(409, { error: 'email already registered' }), json(201, created)], quiet);
    assert.ok(conflict.result.kind === 'rejected' && conflict.result.status === 409 && conflict.result.reason === 'client-error');
    assert.equal(conflict.rt.seen.length, 1);
    const invalid = await send([json(422, { error: 'bad amount' })], quiet);
    assert.ok(invalid.result.kind === 'rejected' && invalid.result.reason === 'client-error');
    // The guard's own 409 still carries its problem header: waited on, then the replay.
    const waiting = await send(
      [json(409, problem('idempotency-request-in-progress'), { 'Retry-After': '1', 'Idempotency-Problem': 'idempotency-request-in-progress' }), json(201, created, { 'Idempotent-Replayed': 'true' })],
      quiet,
    );
    assert.ok(waiting.result.kind === 'completed' && waiting.result.replayed);
    assert.equal(waiting.rt.seen.length, 2);
    // Without the header (not exposed to a browser, dropped by a proxy) the body's problem type still says it is the guard's.
    const unexposed = await send([json(409, problem('idempotency-request-in-progress'), { 'Retry-After': '1' }), json(201, created, { 'Idempotent-Replayed': 'true' })], quiet);
    assert.ok(unexposed.result.kind === 'completed' && unexposed.result.replayed);
    const abandoned = await send([json(409, problem('idempotency-request-abandoned'))], quiet);
    assert.equal(abandoned.result.kind, 'unknown');
    // Only those: the API's own type that merely looks alike is the handler's answer, and a guard
    // "store unavailable" passed on in a handler's body (a gateway, an upstream service) never makes a repeat look safe.
    const lookalike = await send([json(409, { type: 'https://api.example.com/problems/idempotency-conflict' }), json(201, created)], quiet);
    assert.ok(lookalike.result.kind === 'rejected' && lookalike.result.reason === 'client-error');
    assert.equal(lookalike.rt.seen.length, 1);
    const external: CompiledContract = { ...externalNoKey, responses: { ...externalNoKey.responses, replayOnFirst: false } };
    const upstream = await send([json(503, problem('idempotency-store-unavailable')), json(201, created)], external);
    assert.equal(upstream.result.kind, 'unknown');
    assert.equal(upstream.rt.seen.length, 1);
  });

  it('an external effect whose provider key is forwarded is retried with the same key', async () => {
    const { rt, result } = await send([new TypeError('fetch failed'), json(201, created)], externalForward);
    assert.ok(result.kind === 'completed');
    assert.deepEqual(keysOf(rt), ['demo-key-retry-2020-06-a7f1', 'demo-key-retry-2020-06-a7f1']);
  });

  it('an external effect with a derived provider key (a stable external id) is retried too', async () => {
    const { rt, result } = await send([json(503, { title: 'busy' }), json(201, created)], externalDerived);
    assert.ok(result.kind === 'completed');
    assert.equal(rt.seen.length, 2);
  });

  it('abandoned reservations go to reconciliation, not to a retry', async () => {
    const { rt, result } = await send([json(409, problem('idempotency-request-abandoned'))]);
    assert.ok(result.kind === 'unknown' && result.reason === 'abandoned');
    assert.equal(rt.seen.length, 1);
  });

  it('reads the guard\'s problem from its header when the API renders the body in its own format', async () => {
    const own = (name: string) => json(409, { error: { message: 'busy or stuck' } }, { 'Idempotency-Problem': name });
    const abandoned = await send([own('idempotency-request-abandoned')]);
    assert.ok(abandoned.result.kind === 'unknown' && abandoned.result.reason === 'abandoned', 'a rendered abandoned 409 is not waited on');
    assert.equal(abandoned.rt.seen.length, 1);
    const waited = await send([own('idempotency-request-in-progress'), json(201, created, { 'Idempotent-Replayed': 'true' })]);
    assert.ok(waited.result.kind === 'completed' && waited.result.replayed);
    const outage = await send([json(503, { error: {} }, { 'Idempotency-Problem': 'idempotency-store-unavailable' }), json(201, created)], externalNoKey);
    assert.ok(outage.result.kind === 'completed', 'the store was down before the handler: a repeat is safe even for an external effect');
    const unnamed = await send([json(503, { error: {} }), json(201, created)], externalNoKey);
    assert.ok(unnamed.result.kind === 'unknown' && unnamed.result.reason === 'unsafe-to-retry', 'without the header the same 503 may have acted');
  });

  it('an OASIS key (Repeatability-Request-ID) goes with Repeatability-First-Sent: the first attempt\'s time, the same on every attempt', async () => {
    const oasis: CompiledContract = { ...localContract, key: { ...localContract.key, name: 'Repeatability-Request-ID' } };
    const rt = fakeRuntime([new Error('socket hang up'), json(201, created, { 'Idempotent-Replayed': 'true' })]);
    const intent = Intent.create({ operationId: oasis.operationId, deadlineMs: 30_000, now: rt.clock });
    // The intent is made with the form, and sent a minute later.
    rt.clock += 60_000;
    const firstSend = new Date(rt.clock).toUTCString();
    const stale = { ...request, headers: { ...request.headers, 'repeatability-first-sent': 'Mon, 01 Jan 2024 00:00:00 GMT' } };
    const result = await sendIntent({ contract: oasis, intent, request: stale, runtime: rt, checkStatus: undefined });
    assert.ok(result.kind === 'completed');
    const sent = rt.seen.map((r) => r.headers['repeatability-first-sent']);
    assert.notEqual(firstSend, new Date(intent.createdAt).toUTCString());
    assert.deepEqual(sent, [firstSend, firstSend], 'the caller\'s copy is not sent beside it');
    assert.match(sent[0]!, /^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d{2} [A-Z][a-z]{2} \d{4} \d{2}:\d{2}:\d{2} GMT$/);
    assert.equal(rt.seen[0]!.headers['repeatability-request-id'], rt.seen[1]!.headers['repeatability-request-id']);
    // Other keys send no such header.
    const plain = await send([json(201, created)]);
    assert.equal(plain.rt.seen[0]!.headers['repeatability-first-sent'], undefined);
  });

  it('a 412 idempotency-request-expired (OASIS: first sent before the records kept) is an unknown outcome, not a rejection', async () => {
    const { rt, result } = await send([json(412, problem('idempotency-request-expired'), { 'Idempotency-Problem': 'idempotency-request-expired' })]);
    assert.ok(result.kind === 'unknown' && result.reason === 'expired', JSON.stringify(result));
    assert.equal(rt.seen.length, 1);
  });

  it("does not take a problem name from the handler's own answer (Idempotent-Replayed: false) for the guard's", async () => {
    // An upstream's header passed on by a gateway must not make a repeat of an external effect look safe.
    const { result } = await send(
      [json(503, { error: {} }, { 'Idempotency-Problem': 'idempotency-store-unavailable', 'Idempotent-Replayed': 'false' }), json(201, created)],
      externalNoKey,
    );
    assert.ok(result.kind === 'unknown' && result.reason === 'unsafe-to-retry', JSON.stringify(result));
  });

  it('does not start an attempt for an intent whose deadline has passed (e.g. restored after a reload)', async () => {
    const rt = fakeRuntime([json(201, created)]);
    const sent = Intent.create({ operationId: 'createDemoRequest', deadlineMs: 1_000, now: rt.clock - 2_000 });
    sent.recordAttempt('req-0', rt.clock - 2_000);
    const intent = Intent.fromJSON(JSON.stringify(sent));
    const result = await sendIntent({ contract: localContract, intent, request, runtime: rt, checkStatus: undefined });
    assert.ok(result.kind === 'unknown' && result.reason === 'deadline');
    assert.equal(rt.seen.length, 0);
  });

  it('the deadline runs from the first attempt: an intent made long before it is sent keeps its whole budget', async () => {
    const rt = fakeRuntime([new TypeError('fetch failed'), json(201, created, { 'Idempotent-Replayed': 'true' })]);
    const intent = Intent.create({ operationId: 'createDemoRequest', deadlineMs: 1_000, now: rt.clock });
    rt.clock += 5_000;
    const result = await sendIntent({ contract: localContract, intent, request, runtime: rt, checkStatus: undefined });
    assert.ok(result.kind === 'completed', JSON.stringify(result));
    assert.equal(rt.seen.length, 2);
    assert.equal(intent.firstSentAt, rt.seen[0]!.at);
    assert.equal(intent.deadlineAt, rt.seen[0]!.at + 1_000);
  });

  it('a restored intent keeps its key and its attempt count', async () => {
    const rt = fakeRuntime([json(201, created, { 'Idempotent-Replayed': 'true' })]);
    const first = Intent.create({ operationId: 'createDemoRequest', deadlineMs: 30_000, now: rt.clock });
    first.recordAttempt('req-51', rt.clock);
    const restored = Intent.fromJSON(JSON.stringify(first));
    const result = await sendIntent({ contract: localContract, intent: restored, request, runtime: rt, checkStatus: undefined });
    assert.ok(result.kind === 'completed' && result.replayed);
    assert.equal(rt.seen[0]?.headers['idempotency-key'], first.key);
    assert.deepEqual(restored.requestIds, ['req-51', 'req-1']);
  });

  it("the intent's key and request id win over a caller's own copies of those headers", async () => {
    const rt = fakeRuntime([json(201, created)]);
    const intent = Intent.create({ operationId: 'createDemoRequest', deadlineMs: 30_000, now: rt.clock, key: 'the-intent-key' });
    const headers = { ...request.headers, 'idempotency-key': 'other', 'X-REQUEST-ID': 'mine' };
    await sendIntent({ contract: localContract, intent, request: { ...request, headers }, runtime: rt, checkStatus: undefined });
    const seen = rt.seen[0]!;
    assert.equal(seen.headers['idempotency-key'], 'the-intent-key');
    assert.equal(seen.headers['x-request-id'], 'req-1');
    assert.deepEqual(seen.headerNames.filter((h) => /^(idempotency-key|x-request-id)$/i.test(h)).sort(), ['Idempotency-Key', 'X-Request-Id']);
  });

  it("a browser's opaque redirect (status 0, no Location) ends rejected as redirected", async () => {
    // What a browser's fetch gives under redirect: 'manual' (the Response constructor cannot make one).
    const opaque = Object.defineProperties(new Response(null), { type: { value: 'opaqueredirect' }, status: { value: 0 }, ok: { value: false } });
    const hidden = await send([opaque]);
    assert.ok(hidden.result.kind === 'rejected' && hidden.result.reason === 'redirected', JSON.stringify(hidden.result));
    assert.equal(hidden.result.status, 0);
    assert.equal(hidden.result.location, undefined);
    assert.equal(hidden.rt.seen.length, 1);
  });

  it('an answer a fetch reached by following a redirect anyway ends unknown with its status, whatever the status: the command may have run there', async () => {
    // A custom runtime.fetch that ignores redirect: 'manual'.
    for (const landed of [json(201, created), json(200, [{ id: 'list' }]), json(404, { title: 'gone' }), new Response(null, { status: 307, headers: { location: '/x' } })]) {
      const followed = Object.defineProperties(landed, { redirected: { value: true }, url: { value: 'http://api.test/v1/demo-requests/moved' } });
      const { rt, result } = await send([followed]);
      assert.ok(result.kind === 'unknown' && result.reason === 'redirect-followed', JSON.stringify(result));
      assert.equal(result.lastStatus, landed.status);
      assert.equal(result.key, 'demo-key-retry-2020-06-a7f1');
      assert.equal(result.checkStatus, 'status-call');
      assert.equal(rt.seen.length, 1, 'never retried');
    }
  });

  it('follows at most 5 same-origin redirects per intent, then ends rejected as redirected', async () => {
    const contract: CompiledContract = { ...localContract, retry: { ...localContract.retry, maxAttempts: 20 } };
    const hop = (n: number) => new Response(null, { status: 307, headers: { location: `/v1/hop-${n}` } });
    const { rt, result } = await send([1, 2, 3, 4, 5, 6, 7].map(hop), contract);
    assert.ok(result.kind === 'rejected' && result.reason === 'redirected', JSON.stringify(result));
    assert.equal(result.location, 'http://api.test/v1/hop-6');
    assert.equal(rt.seen.length, 6);
    assert.deepEqual(rt.seen.map((r) => r.headers['idempotency-key']), Array(6).fill('demo-key-retry-2020-06-a7f1'));
  });

  it('a redirect it will not follow after an attempt that got no terminal answer ends unknown, keeping the key: that attempt may have run', async () => {
    const contract: CompiledContract = { ...localContract, retry: { ...localContract.retry, maxAttempts: 20 } };
    const to = (status: number, location: string) => new Response(null, { status, headers: { location } });
    const cases: [string, Step[]][] = [
      // A->B, B's answer lost, B bounces back to A: a loop.
      ['loop after a lost answer', [to(307, '/v1/b'), new TypeError('fetch failed'), to(307, '/v1/demo-requests')]],
      ['self-loop after a 503', [json(503, { title: 'busy' }), to(307, '/v1/demo-requests')]],
      ['303 after a wait', [json(409, problem('idempotency-request-in-progress'), { 'Retry-After': '0' }), to(303, '/v1/done')]],
      ['cross-origin 307 after a lost answer', [new TypeError('fetch failed'), to(307, 'https://elsewhere.test/v1/x')]],
      ['hop cap after a lost answer', [new TypeError('fetch failed'), ...[1, 2, 3, 4, 5, 6].map((n) => to(307, `/v1/hop-${n}`))]],
    ];
    for (const [name, steps] of cases) {
      const { rt, result } = await send(steps, contract);
      assert.ok(result.kind === 'unknown' && result.reason === 'redirected', `${name}: ${JSON.stringify(result)}`);
      assert.equal(result.key, 'demo-key-retry-2020-06-a7f1', name);
      assert.equal(result.checkStatus, 'status-call', name);
      assert.ok(result.lastStatus !== undefined && result.lastStatus >= 300 && result.lastStatus < 400, name);
      assert.deepEqual(new Set(keysOf(rt)), new Set(['demo-key-retry-2020-06-a7f1']), name);
    }
    // With no such attempt before, the same endings stay rejected as redirected.
    for (const steps of [[to(303, '/v1/done')], [to(307, '/v1/b'), to(307, '/v1/demo-requests')]]) {
      const { result } = await send(steps, contract);
      assert.ok(result.kind === 'rejected' && result.reason === 'redirected', JSON.stringify(result));
    }
    // An intent sent before (a call aborted with its answer outstanding, the page reloaded) may have run already.
    const rt = fakeRuntime([to(303, '/v1/done')]);
    const earlier = Intent.create({ operationId: contract.operationId, deadlineMs: 30_000, now: rt.clock, key: 'demo-key-retry-2020-06-a7f1' });
    earlier.recordAttempt('req-51', rt.clock);
    const reloaded = await sendIntent({ contract, intent: Intent.fromJSON(JSON.stringify(earlier)), request, runtime: rt, checkStatus: 'status-call' });
    assert.ok(reloaded.kind === 'unknown' && reloaded.reason === 'redirected', JSON.stringify(reloaded));
  });

  it('refuses an intent of another operation (a changed command needs a new intent)', async () => {
    const rt = fakeRuntime([]);
    const intent = Intent.create({ operationId: 'other', deadlineMs: 1_000, now: rt.clock });
    await assert.rejects(sendIntent({ contract: localContract, intent, request, runtime: rt, checkStatus: undefined }), TypeError);
  });

  it('a caller abort ends the intent as unknown', async () => {
    const rt = fakeRuntime([new TypeError('fetch failed')]);
    const ctl = new AbortController();
    const intent = Intent.create({ operationId: 'createDemoRequest', deadlineMs: 30_000, now: rt.clock });
    const sleep = rt.sleep;
    const runtime = { ...rt, sleep: async (ms: number) => { ctl.abort(); await sleep(ms); } };
    const result = await sendIntent({ contract: localContract, intent, request, runtime, signal: ctl.signal, checkStatus: undefined });
    assert.ok(result.kind === 'unknown' && result.reason === 'aborted');
    assert.equal(rt.seen.length, 1);
  });

  it('a runtime sleep that rejects when the caller aborts (as ClientRuntime allows) ends the intent unknown/aborted', async () => {
    const rt = fakeRuntime([new TypeError('fetch failed')]);
    const ctl = new AbortController();
    const intent = Intent.create({ operationId: 'createDemoRequest', deadlineMs: 30_000, now: rt.clock });
    const runtime = {
      ...rt,
      sleep: async () => {
        ctl.abort();
        throw new DOMException('This operation was aborted', 'AbortError');
      },
    };
    const result = await sendIntent({ contract: localContract, intent, request, runtime, signal: ctl.signal, checkStatus: undefined });
    assert.ok(result.kind === 'unknown' && result.reason === 'aborted', JSON.stringify(result));
    assert.equal(rt.seen.length, 1);
  });

  describe('against odd servers and networks (a hostile-server review)', () => {
    const refused = () => Object.assign(new TypeError('fetch failed'), { cause: Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:9'), { code: 'ECONNREFUSED' }) });

    it("a refusal by something in front of the guard after a lost attempt ends unknown ('refused'), keeping the key: that attempt may have run", async () => {
      for (const status of [400, 401, 403, 404, 410, 413]) {
        const { rt, result } = await send([new TypeError('fetch failed'), json(status, { error: 'from the gateway' })]);
        assert.ok(result.kind === 'unknown', `${status}: ${result.kind}`);
        assert.equal(result.reason, 'refused');
        assert.equal(result.key, 'demo-key-retry-2020-06-a7f1');
        assert.equal(result.lastStatus, status);
        assert.equal(rt.seen.length, 2);
      }
      // The stored answer (a replay) or the handler's own first answer is still the terminal refusal it is.
      const replayed = await send([new TypeError('fetch failed'), json(403, { error: 'no' }, { 'Idempotent-Replayed': 'true' })]);
      assert.equal(replayed.result.kind, 'rejected');
      const own = await send([new TypeError('fetch failed'), json(403, { error: 'no' }, { 'Idempotent-Replayed': 'false' })]);
      assert.equal(own.result.kind, 'rejected');
      // After an in-progress wait too (the first attempt was known to be running).
      const waited = await send([json(409, problem('idempotency-request-in-progress'), { 'Retry-After': '1' }), json(401, { error: 'token expired' })]);
      assert.ok(waited.result.kind === 'unknown' && waited.result.reason === 'refused');
      // With nothing lost before, a gateway's refusal is terminal: the command did not run.
      const first = await send([json(403, { error: 'from the gateway' })]);
      assert.equal(first.result.kind, 'rejected');
    });

    it('a connection refused never left: retried even where a repeat is unsafe, and its cause is in lastError', async () => {
      const { rt, result } = await send([refused(), refused(), json(201, created, { 'Idempotent-Replayed': 'false' })], externalNoKey);
      assert.ok(result.kind === 'completed', JSON.stringify(result));
      assert.equal(rt.seen.length, 3);
      const down = await send([refused(), refused(), refused(), refused(), refused()], localContract);
      assert.ok(down.result.kind === 'unknown');
      assert.equal(down.result.lastError, 'fetch failed (ECONNREFUSED)');
      // A host unreachable may end a reused connection after the request went out: not retried where that is unsafe.
      const unreachable = Object.assign(new TypeError('fetch failed'), { cause: Object.assign(new Error('read EHOSTUNREACH'), { code: 'EHOSTUNREACH' }) });
      const lost = await send([unreachable, json(201, created)], externalNoKey);
      assert.ok(lost.result.kind === 'unknown' && lost.result.reason === 'unsafe-to-retry');
      // Nothing left, then a gateway refusal: terminal, the command did not run.
      const gated = await send([refused(), json(403, { error: 'from the gateway' })], externalNoKey);
      assert.equal(gated.result.kind, 'rejected');
      // A caller abort while waiting after refused connections rejects the promise with its reason, as fetch does.
      const rt2 = fakeRuntime([refused()]);
      const ctl = new AbortController();
      const intent = Intent.create({ operationId: 'createDemoRequest', deadlineMs: 30_000, now: rt2.clock });
      const runtime = { ...rt2, sleep: async () => { ctl.abort(new Error('user cancelled')); throw new DOMException('This operation was aborted', 'AbortError'); } };
      await assert.rejects(sendIntent({ contract: localContract, intent, request, runtime, signal: ctl.signal, checkStatus: undefined }), /user cancelled/);
    });

    it("a Retry-After HTTP-date is read against the answer's own Date (a server clock 5 s ahead means 1 s, not 6)", async () => {
      const rt0 = fakeRuntime([]);
      const server = rt0.clock + 5_000;
      const { rt, result } = await send([
        json(409, problem('idempotency-request-in-progress'), { 'Retry-After': new Date(server + 1_000).toUTCString(), Date: new Date(server).toUTCString() }),
        json(201, created, { 'Idempotent-Replayed': 'true' }),
      ]);
      assert.ok(result.kind === 'completed');
      assert.ok(rt.sleeps[0]! >= 0 && rt.sleeps[0]! <= 1_000, `slept ${rt.sleeps[0]}`);
    });

    it('a body read the abort does not reach (Node 20 fetch after a corrupt gzip answer) still ends at the deadline, and a call at its timeout', async () => {
      // What Node 20's fetch hands back after an "incorrect data check" on a reused connection: a body whose read never
      // settles, whatever the request's signal does.
      const deaf = () => new Response(new ReadableStream({ pull: () => new Promise<void>(() => undefined) }), { status: 201, headers: { 'content-type': 'application/json' } });
      const { defaultRuntime } = await import('../../src/runtime/client/engine.js');
      const runtime = defaultRuntime({ fetch: async () => deaf() });
      const intent = Intent.create({ operationId: 'createDemoRequest', deadlineMs: 300, now: Date.now() });
      const started = Date.now();
      const result = await sendIntent({ contract: localContract, intent, request, runtime, checkStatus: undefined });
      assert.ok(result.kind === 'unknown' && result.reason === 'deadline', JSON.stringify(result));
      assert.ok(Date.now() - started < 2_000, `ended after ${Date.now() - started} ms`);
      await assert.rejects(sendOnce({ request, runtime, timeoutMs: 300 }), { name: 'TimeoutError' });
    });
  });

  it('a real short deadline with the default timers aborts a stalled fetch', async () => {
    const { defaultRuntime } = await import('../../src/runtime/client/engine.js');
    const runtime = defaultRuntime({
      fetch: (_url, init) => new Promise<Response>((_resolve, reject) => {
        init.signal?.addEventListener('abort', () => reject(new Error('aborted')));
      }),
    });
    const intent = Intent.create({ operationId: 'createDemoRequest', deadlineMs: 30, now: Date.now() });
    const started = Date.now();
    const result = await sendIntent({ contract: localContract, intent, request, runtime, checkStatus: undefined });
    assert.ok(result.kind === 'unknown' && result.reason === 'deadline');
    assert.equal(result.requestIds.length, 1);
    assert.ok(Date.now() - started < 2_000);
  });
});

describe('client sendOnce', () => {
  it('sends exactly once and reports the status, even a 503 (no automatic retry)', async () => {
    const rt = fakeRuntime([json(503, { title: 'busy' }, { 'Retry-After': '1' })]);
    const res = await sendOnce({ request, runtime: rt });
    assert.equal(res.ok, false);
    assert.equal(res.status, 503);
    assert.equal(rt.seen.length, 1);
    assert.equal(rt.seen[0]?.headers['idempotency-key'], undefined);
    assert.equal(rt.seen[0]?.headers['x-request-id'], 'req-1');
  });

  it('with redirect: same-origin (an intent\'s status call, carrying its key) a GET follows no redirect to another origin', async () => {
    const status = { url: 'http://api.test/v1/demo-requests/r1', method: 'GET', headers: { 'Idempotency-Key': 'the-key' }, body: undefined };
    const moved = (location: string) => new Response(null, { status: 302, headers: { location } });
    const away = fakeRuntime([moved('https://elsewhere.test/r1')]);
    const answer = await sendOnce({ request: status, runtime: away, redirect: 'same-origin' });
    assert.equal(answer.ok, false);
    assert.equal(answer.status, 302);
    assert.equal(answer.headers.get('location'), 'https://elsewhere.test/r1');
    assert.deepEqual(away.seen.map((r) => [r.url, r.redirect]), [['http://api.test/v1/demo-requests/r1', 'manual']], 'the key never went to elsewhere.test');
    // To its own origin, any redirect of a GET is followed, the key with it.
    const home = fakeRuntime([moved('/v2/demo-requests/r1'), json(200, created)]);
    const followed = await sendOnce({ request: status, runtime: home, redirect: 'same-origin' });
    assert.equal(followed.status, 200);
    assert.deepEqual(home.seen.map((r) => [r.url, r.headers['idempotency-key']]), [['http://api.test/v1/demo-requests/r1', 'the-key'], ['http://api.test/v2/demo-requests/r1', 'the-key']]);
    // By default a GET is sent as fetch sends it, following redirects itself.
    const plain = fakeRuntime([json(200, created)]);
    await sendOnce({ request: status, runtime: plain });
    assert.equal(plain.seen[0]!.redirect, 'follow');
  });

  it('never waits forever: a server that does not answer ends the call at its timeout (default 30 s)', async () => {
    const rt = fakeRuntime(['stall', 'stall']);
    const started = rt.clock;
    await assert.rejects(sendOnce({ request, runtime: rt }), { name: 'TimeoutError', message: 'no answer within 30000 ms' });
    assert.equal(rt.clock - started, 30_000);
    await assert.rejects(sendOnce({ request, runtime: rt, timeoutMs: 500 }), { name: 'TimeoutError' });
    await assert.rejects(sendOnce({ request, runtime: rt, timeoutMs: 0 }), TypeError);
  });

  it('reads an answer without a content type (or text/plain) as JSON only when the document says the operation answers in JSON', async () => {
    const bare = () => new Response('{"id":"x"}', { status: 200, headers: {} });
    const plain = (text: string) => new Response(text, { status: 200, headers: { 'content-type': 'text/plain' } });
    const rt = fakeRuntime([bare(), bare(), plain('{"id":"x"}'), plain('not json')]);
    assert.equal((await sendOnce({ request, runtime: rt })).body, '{"id":"x"}');
    assert.deepEqual((await sendOnce({ request, runtime: rt, jsonAnswers: true })).body, { id: 'x' });
    assert.deepEqual((await sendOnce({ request, runtime: rt, jsonAnswers: true })).body, { id: 'x' });
    assert.equal((await sendOnce({ request, runtime: rt, jsonAnswers: true })).body, 'not json');
  });

  it('lets a network error surface to the caller', async () => {
    const rt = fakeRuntime([new TypeError('fetch failed')]);
    await assert.rejects(sendOnce({ request, runtime: rt }), /fetch failed/);
    assert.equal(rt.seen.length, 1);
  });
});
