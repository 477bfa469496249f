/**
 * A real Azure SDK that sets OASIS Repeatable Requests headers itself, against a generated guard (Express,
 * SQLite store, `key: { header: Repeatability-Request-ID }`) over HTTP on 127.0.0.1.
 *
 * @azure/communication-call-automation's CallAutomationClient.createCall sends `Repeatability-Request-ID` (a
 * fresh UUID per call) and `Repeatability-First-Sent` (the call's time, RFC 1123). The client signs each call
 * once with HMAC-SHA256 (its auth policy runs before the retry policy), and @azure/core-rest-pipeline's default
 * retry policy re-sends that same request, headers and signature included, on a reset connection, a 408, a
 * 5xx but 501/505, or a 429/503 with Retry-After (honoured); it does not retry a 409 or another 4xx.
 * It talks to the app through the proxy of the SDK suites, which drops the first answer after the handler
 * committed (the lost response) or closes the connection while the handler runs.
 */
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { CallAutomationClient, type CallAutomationClientOptions, type CreateCallResult } from '@azure/communication-call-automation';
import { holdSqliteWriteLock } from './harness.js';
import { appBehindProxy, assertRetryAfterWaited, compileGuardedApps, headerOf, waitUntil, type AppProcess, type Exchange } from './sdk-harness.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const IMF_FIXDATE = /^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d{2} [A-Z][a-z]{2} \d{4} \d{2}:\d{2}:\d{2} GMT$/;

interface CallEffect {
  readonly callConnectionId: string;
  readonly principal: string;
  readonly repeatabilityRequestId?: string;
  readonly body: Record<string, unknown>;
}

/** The access keys the app knows (base64, as in a connection string), and one it does not. */
const KEYS = { alice: randomBytes(32).toString('base64'), bob: randomBytes(32).toString('base64'), mallory: randomBytes(32).toString('base64') };
const ACCESS_KEYS = `alice:${KEYS.alice},bob:${KEYS.bob}`;

/** What a user reads off the final answer the SDK deserialised (after its retries). */
interface Answer {
  status?: number;
  repeatabilityResult?: string | undefined;
  replayed?: string | undefined;
}

/**
 * A CallAutomationClient on the proxy (a connection string, as the SDK's docs show it). `resend` re-sends a
 * request kept from an earlier call, as an app that persisted its repeatability headers does after a crash:
 * a per-call policy sets them (createCall itself always makes new ones).
 */
function callsFor(port: number, accessKey: string, resend?: { readonly id: string; readonly firstSent: string }): CallAutomationClient {
  const options: CallAutomationClientOptions = {
    // The SDK refuses http:// unless told: core-rest-pipeline's documented switch for local endpoints.
    allowInsecureConnection: true,
    // The default retry policy, with shorter waits than its 1 s base (the strategy and the 3 retries are unchanged).
    retryOptions: { retryDelayInMs: 100, maxRetryDelayInMs: 400 },
  };
  if (resend !== undefined) {
    options.additionalPolicies = [
      {
        position: 'perCall',
        policy: {
          name: 'resendRepeatableRequest',
          sendRequest: (request, next) => {
            request.headers.set('Repeatability-Request-ID', resend.id);
            request.headers.set('Repeatability-First-Sent', resend.firstSent);
            return next(request);
          },
        },
      },
    ];
  }
  return new CallAutomationClient(`endpoint=http://127.0.0.1:${port}/;accesskey=${accessKey}`, options);
}

let counter = 0;
/** A call to a new user (so each test's effects are told apart by the target). */
const newTarget = (who: string): string => `8:acs:${who}-${process.pid}-${Date.now().toString(36)}-${(counter += 1)}`;

/** createCall to `target`, reading the final raw answer's status and repeatability headers into `answer`. */
function createCall(client: CallAutomationClient, target: string, answer: Answer = {}, operationContext = 'outbound-survey'): Promise<CreateCallResult> {
  return client.createCall({ targetParticipant: { communicationUserId: target } }, 'https://contoso.example/callbacks', {
    operationContext,
    onResponse: (raw) => {
      answer.status = raw.status;
      answer.repeatabilityResult = raw.headers.get('repeatability-result');
      answer.replayed = raw.headers.get('idempotent-replayed');
    },
  });
}

/** The error a promise rejects with (fails the test if it resolves). */
async function rejection(promise: Promise<unknown>, what: string): Promise<unknown> {
  return promise.then(
    () => assert.fail(`${what} must not succeed`),
    (error: unknown) => error,
  );
}

/** The RestError fields a user checks (core-rest-pipeline's RestError, read structurally). */
interface RestErrorLike {
  readonly name: string;
  readonly statusCode?: number;
  readonly code?: string;
  readonly message: string;
  readonly response?: { readonly headers: { get(name: string): string | undefined } };
}

function assertRestError(error: unknown, status: number, code: string): RestErrorLike {
  assert.ok(error instanceof Error, `an Error, got ${String(error)}`);
  const rest = error as unknown as RestErrorLike;
  assert.equal(rest.name, 'RestError', String(error));
  assert.equal(rest.statusCode, status);
  assert.equal(rest.code, code, 'the code of the error envelope');
  return rest;
}

const requestIdOf = (exchange: Exchange): string | undefined => headerOf(exchange, 'repeatability-request-id');

/** The compiled app tree, shared by the suites (one tsc run). */
let build: Promise<string> | undefined;
const buildApp = (): Promise<string> =>
  (build ??= compileGuardedApps([{ spec: 'call-automation.yaml', framework: 'express', gen: 'gen-call-automation', app: 'app-call-automation.ts' }]));

/** The app with its access keys (and `env`) behind the SDK proxy, for a suite. */
const serve = (env: Readonly<Record<string, string>>): ReturnType<typeof appBehindProxy> =>
  appBehindProxy(async (app) => app.start(await buildApp(), 'app-call-automation.js', { ACCESS_KEYS, ...env }));

const effectsTo = async (app: AppProcess, target: string): Promise<CallEffect[]> =>
  (await app.getJson<CallEffect[]>('/test/effects')).filter((effect) => JSON.stringify(effect.body['targets']).includes(`"${target}"`));

describe('a real Azure SDK (communication-call-automation createCall) with OASIS Repeatability-Request-ID, against the generated guard: Express, SQLite', function () {
  this.timeout(60_000);
  const { app, proxy } = serve({});

  let lostTarget = '';
  let lostId = '';
  let lostFirstSent = '';
  let lostCallId = '';

  it('lost response after commit: the SDK re-sends the same Repeatability-Request-ID and resolves with the replay; the handler ran once', async () => {
    const answer: Answer = {};
    const target = newTarget('lost');
    const from = proxy().exchanges.length;
    proxy().dropAnswers = 1;
    const result = await createCall(callsFor(proxy().port, KEYS.alice), target, answer);

    const attempts = proxy().since(from);
    assert.equal(attempts.length, 2, 'one lost attempt and one retry');
    assert.equal(attempts[0]!.dropped, true);
    assert.equal(attempts[0]!.status, 201, 'the first attempt committed and answered 201 (then the answer was lost)');
    assert.equal(attempts[1]!.status, 201);
    assert.equal(attempts[0]!.method, 'POST');
    assert.equal(attempts[0]!.path, '/calling/callConnections?api-version=2026-03-12');
    assert.ok(attempts[0]!.headers.some(([name]) => name === 'Repeatability-Request-ID'), 'the SDK sends the header as Repeatability-Request-ID');
    const id = requestIdOf(attempts[0]!)!;
    assert.match(id, UUID, 'the SDK made a UUID');
    assert.equal(requestIdOf(attempts[1]!), id, 'the retry carries the same Repeatability-Request-ID');
    const firstSent = headerOf(attempts[0]!, 'repeatability-first-sent')!;
    assert.match(firstSent, IMF_FIXDATE, 'Repeatability-First-Sent is an IMF-fixdate');
    assert.equal(headerOf(attempts[1]!, 'repeatability-first-sent'), firstSent, 'the retry keeps the first-sent time');
    // The SDK signs once per call (its HMAC policy runs before the retry policy): the retry is the same request.
    assert.match(headerOf(attempts[0]!, 'authorization')!, /^HMAC-SHA256 SignedHeaders=x-ms-date;host;x-ms-content-sha256&Signature=/);
    for (const name of ['authorization', 'x-ms-date', 'x-ms-content-sha256', 'x-ms-client-request-id']) {
      assert.equal(headerOf(attempts[1]!, name), headerOf(attempts[0]!, name), `the retry re-sends ${name}`);
    }
    assert.equal(attempts[1]!.body, attempts[0]!.body, 'the retry sends the same body bytes');

    const effects = await effectsTo(app, target);
    assert.equal(effects.length, 1, 'the handler ran once');
    assert.equal(effects[0]!.principal, 'alice', 'the principal is the access key whose signature verified');
    assert.equal(effects[0]!.repeatabilityRequestId, id);
    assert.deepEqual(effects[0]!.body, JSON.parse(attempts[0]!.body), 'the handler got the signed body as sent');
    const properties = result.callConnectionProperties;
    assert.equal(properties.callConnectionId, effects[0]!.callConnectionId, 'the SDK resolved with the first execution’s call connection');
    assert.equal(properties.callConnectionState, 'connecting');
    assert.deepEqual(properties.targetParticipants, [{ communicationUserId: target }], 'the SDK read the echoed targets');
    assert.deepEqual(answer, { status: 201, repeatabilityResult: 'accepted', replayed: 'true' });

    const log = JSON.stringify(await app.getJson<unknown[]>('/test/log'));
    assert.ok(log.length > 2, 'the guard logged its decisions');
    assert.ok(!log.includes(id), 'the raw Repeatability-Request-ID is not in the guard log');
    lostTarget = target;
    lostId = id;
    lostFirstSent = firstSent;
    lostCallId = effects[0]!.callConnectionId;
  });

  it('the request re-sent later with its Repeatability-Request-ID and First-Sent is the replay (accepted, same call connection)', async () => {
    assert.notEqual(lostId, '', 'needs the lost-response test');
    const answer: Answer = {};
    const from = proxy().exchanges.length;
    const result = await createCall(callsFor(proxy().port, KEYS.alice, { id: lostId, firstSent: lostFirstSent }), lostTarget, answer);
    assert.equal(requestIdOf(proxy().since(from)[0]!), lostId);
    assert.deepEqual(answer, { status: 201, repeatabilityResult: 'accepted', replayed: 'true' });
    assert.equal(result.callConnectionProperties.callConnectionId, lostCallId);
    assert.equal((await effectsTo(app, lostTarget)).length, 1, 'the handler did not run again');
  });

  it('the same Repeatability-Request-ID with another body is a 422 RestError (rejected), sent once, not run', async () => {
    assert.notEqual(lostId, '', 'needs the lost-response test');
    const from = proxy().exchanges.length;
    const client = callsFor(proxy().port, KEYS.alice, { id: lostId, firstSent: lostFirstSent });
    const error = assertRestError(await rejection(createCall(client, lostTarget, {}, 'another-context'), 'a reused id with another body'), 422, 'idempotency-key-reused');
    assert.match(error.message, /already used for a different request/);
    assert.equal(error.response?.headers.get('repeatability-result'), 'rejected');
    const attempts = proxy().since(from);
    assert.equal(attempts.length, 1, 'the SDK does not retry a 422');
    assert.equal(attempts[0]!.status, 422);
    assert.equal((await effectsTo(app, lostTarget)).length, 1, 'the handler did not run for the mismatch');
  });

  it('another access key (principal) with the same Repeatability-Request-ID is another record: another effect', async () => {
    assert.notEqual(lostId, '', 'needs the lost-response test');
    const answer: Answer = {};
    const result = await createCall(callsFor(proxy().port, KEYS.bob, { id: lostId, firstSent: lostFirstSent }), lostTarget, answer);
    assert.deepEqual(answer, { status: 201, repeatabilityResult: 'accepted', replayed: 'false' });
    const effects = await effectsTo(app, lostTarget);
    assert.deepEqual(effects.map((e) => e.principal), ['alice', 'bob']);
    assert.equal(result.callConnectionProperties.callConnectionId, effects[1]!.callConnectionId);
    assert.notEqual(effects[1]!.callConnectionId, lostCallId);
  });

  it('a new createCall is a new intent: the SDK makes a new Repeatability-Request-ID and the handler runs again', async () => {
    assert.notEqual(lostId, '', 'needs the lost-response test');
    const answer: Answer = {};
    const from = proxy().exchanges.length;
    await createCall(callsFor(proxy().port, KEYS.alice), lostTarget, answer);
    const id = requestIdOf(proxy().since(from)[0]!)!;
    assert.match(id, UUID);
    assert.notEqual(id, lostId);
    assert.deepEqual(answer, { status: 201, repeatabilityResult: 'accepted', replayed: 'false' });
    assert.deepEqual((await effectsTo(app, lostTarget)).map((e) => e.principal), ['alice', 'bob', 'alice']);
  });

  it('a Repeatability-First-Sent older than the records kept (1 h) is a 412 RestError (rejected), sent once, not run', async () => {
    const target = newTarget('expired');
    const from = proxy().exchanges.length;
    const firstSent = new Date(Date.now() - 2 * 3600_000).toUTCString();
    const client = callsFor(proxy().port, KEYS.alice, { id: randomUUID(), firstSent });
    const error = assertRestError(await rejection(createCall(client, target), 'a request first sent two hours ago'), 412, 'idempotency-request-expired');
    assert.equal(error.response?.headers.get('repeatability-result'), 'rejected');
    assert.equal(proxy().since(from).length, 1, 'the SDK does not retry a 412');
    assert.equal((await effectsTo(app, target)).length, 0);
  });

  it('a signature under an unknown access key is the app’s 401, before the guard: the guard never saw it, no effect', async () => {
    const target = newTarget('unknown-key');
    const from = proxy().exchanges.length;
    const logged = (await app.getJson<unknown[]>('/test/log')).length;
    assertRestError(await rejection(createCall(callsFor(proxy().port, KEYS.mallory), target), 'an unknown key'), 401, 'Denied');
    const attempts = proxy().since(from);
    assert.equal(attempts.length, 1, 'the SDK does not retry a 401');
    assert.match(requestIdOf(attempts[0]!)!, UUID);
    assert.equal((await app.getJson<unknown[]>('/test/log')).length, logged, 'no guard decision for an unauthenticated request');
    assert.equal((await effectsTo(app, target)).length, 0);
  });

  it('connection closed while the handler runs: the SDK retry meets the in-progress 409 and raises it (core-rest-pipeline does not retry 409); one effect', async () => {
    const target = newTarget('cut');
    const from = proxy().exchanges.length;
    proxy().cutRequests = 1;
    const error = assertRestError(
      await rejection(createCall(callsFor(proxy().port, KEYS.alice), target, {}, 'hold-ms=1500'), 'a duplicate of a running request'),
      409,
      'idempotency-request-in-progress',
    );
    assert.equal(error.response?.headers.get('repeatability-result'), 'accepted', 'OASIS: the request was accepted, it is running');
    assert.match(error.response?.headers.get('retry-after') ?? '', /^[1-9][0-9]*$/, '409 carries Retry-After in seconds');
    const attempts = proxy().since(from);
    assert.equal(attempts.length, 2, 'the cut attempt and one retry, which the SDK does not retry again');
    assert.equal(attempts[0]!.cut, true);
    assert.equal(attempts[1]!.status, 409);
    assert.equal(requestIdOf(attempts[1]!), requestIdOf(attempts[0]!), 'the retry carries the same Repeatability-Request-ID');
    await waitUntil(async () => attempts[0]!.status !== undefined, 10_000, 'the first execution to answer');
    assert.equal(attempts[0]!.status, 201, 'the first execution completed (its answer went nowhere)');
    assert.equal((await effectsTo(app, target)).length, 1, 'the handler ran once');
  });

  it('store outage: 503 + Retry-After before the handler; the SDK waits and retries with the same id once the store is back; one effect', async () => {
    const target = newTarget('outage');
    // Another connection holds the database's write lock: every reservation fails (SQLITE_BUSY) until released.
    const lock = holdSqliteWriteLock(app.databaseFile);
    const from = proxy().exchanges.length;
    try {
      const answer: Answer = {};
      const pending = createCall(callsFor(proxy().port, KEYS.alice), target, answer);
      await waitUntil(async () => proxy().since(from).some((e) => e.status === 503), 15_000, 'a 503 from the guard');
      assert.equal((await effectsTo(app, target)).length, 0, 'the handler never ran without a reservation');
      lock.release();
      const result = await pending;
      const attempts = proxy().since(from);
      assertRetryAfterWaited(attempts);
      assert.equal(new Set(attempts.map(requestIdOf)).size, 1, 'every attempt carries the one Repeatability-Request-ID');
      assert.equal(attempts.at(-1)!.status, 201);
      assert.deepEqual(answer, { status: 201, repeatabilityResult: 'accepted', replayed: 'false' });
      const effects = await effectsTo(app, target);
      assert.equal(effects.length, 1);
      assert.equal(result.callConnectionProperties.callConnectionId, effects[0]!.callConnectionId);
    } finally {
      lock.release();
    }
  });
});

describe('the same SDK against a guard that waits for an in-progress duplicate (waitInProgressMs): Express, SQLite', function () {
  this.timeout(60_000);
  const { app, proxy } = serve({ WAIT_IN_PROGRESS_MS: '5000' });

  it('connection closed while the handler runs: the SDK retry waits for the first execution and resolves with its replay; one effect', async () => {
    const target = newTarget('cut-wait');
    const answer: Answer = {};
    const from = proxy().exchanges.length;
    proxy().cutRequests = 1;
    const result = await createCall(callsFor(proxy().port, KEYS.alice), target, answer, 'hold-ms=1500');
    const attempts = proxy().since(from);
    assert.equal(attempts.length, 2, 'the cut attempt and one retry');
    assert.equal(attempts[0]!.cut, true);
    assert.equal(requestIdOf(attempts[1]!), requestIdOf(attempts[0]!), 'the retry carries the same Repeatability-Request-ID');
    assert.equal(attempts[1]!.status, 201);
    assert.deepEqual(answer, { status: 201, repeatabilityResult: 'accepted', replayed: 'true' });
    const effects = await effectsTo(app, target);
    assert.equal(effects.length, 1, 'the handler ran once');
    assert.equal(result.callConnectionProperties.callConnectionId, effects[0]!.callConnectionId);
  });
});
