/**
 * The official Mollie Node client, which retries with its own idempotency keys, against a generated guard (Express,
 * SQLite store, `Idempotency-Key` header scoped on the API key) over HTTP on 127.0.0.1.
 *
 * @mollie/api-client 4.6.0 (retryingFetch in dist/mollie.cjs.js) adds `Idempotency-Key: <18 random bytes as base64,
 * 24 characters>` to every POST and DELETE unless the call's parameters carry `idempotencyKey`, and re-sends the
 * same request with the same key, up to 3 attempts, when the answer is a 5xx: after Retry-After seconds when the
 * answer has one, else after 2 s (a constant: it cannot be shortened, so the gateway scenarios wait it). It does not
 * retry a network error or a 4xx (409 included): those reject with an ApiError (from the HAL+JSON error body:
 * `detail` as message, `title`, `status` as statusCode, and the key it sent).
 * It talks to the app through the proxy of the SDK suites, which answers as a gateway would (a 502 once the handler
 * committed, a 504 while it still runs) or drops the connection after commit.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import https from 'node:https';
import { createMollieClient, MollieApiError, type MollieClient, type Payment } from '@mollie/api-client';
import { holdSqliteWriteLock } from './harness.js';
import { appBehindProxy, assertRetryAfterWaited, compileGuardedApps, headerOf, waitUntil, type AppProcess, type Exchange } from './sdk-harness.js';

/** The SDK's own keys: 18 random bytes as base64 (24 characters, `+` and `/` included). */
const SDK_KEY = /^[A-Za-z0-9+/]{24}$/;
/** The SDK waits this long before retrying a 5xx without Retry-After (retryDelay in retryingFetch). */
const SDK_DEFAULT_DELAY_MS = 2000;

const apiKey = (): string => `test_${randomBytes(24).toString('base64url').replace(/[-_]/g, 'x').slice(0, 30)}`;
/** The API keys the app knows (account=key), and the accounts' names. */
const KEYS = { alice: apiKey(), bob: apiKey() };
const API_KEYS = `alice=${KEYS.alice},bob=${KEYS.bob}`;

interface PaymentEffect {
  readonly kind: 'create' | 'cancel';
  readonly paymentId: string;
  readonly account: string;
  readonly idempotencyKey?: string;
  readonly body: Record<string, unknown>;
}

/**
 * A Mollie client on the proxy. The SDK sends every request through `new https.Agent({ ca: <its CA bundle> })`,
 * which node-fetch refuses for an http:// endpoint (`Protocol "http:" not supported`); while the client is built,
 * https.Agent makes a plain http.Agent instead. Nothing else of the SDK changes: its retryingFetch, keys and errors
 * are its own.
 */
function mollieOn(port: number, key: string): MollieClient {
  const holder = https as unknown as { Agent: unknown };
  const httpsAgent = holder.Agent;
  holder.Agent = function PlainAgent(): http.Agent {
    return new http.Agent();
  };
  try {
    return createMollieClient({ apiKey: key, apiEndpoint: `http://127.0.0.1:${port}/v2/` });
  } finally {
    holder.Agent = httpsAgent;
  }
}

let counter = 0;
/** A description no other test uses (effects are told apart by it); `hold-ms=N` keeps the handler running N ms. */
const newDescription = (what: string): string => `${what} #${process.pid}-${Date.now().toString(36)}-${(counter += 1)}`;

const order = (description: string, value = '10.00'): { amount: { currency: string; value: string }; description: string; redirectUrl: string } => ({
  amount: { currency: 'EUR', value },
  description,
  redirectUrl: 'https://webshop.example/order/12345/',
});

/** The error a promise rejects with (fails the test if it resolves). */
async function rejection(promise: Promise<unknown>, what: string): Promise<unknown> {
  return promise.then(
    () => assert.fail(`${what} must not succeed`),
    (error: unknown) => error,
  );
}

/** The ApiError fields a user checks (`title` is protected in the SDK's types: read structurally). */
function assertApiError(error: unknown, status: number | undefined, title?: string): MollieApiError & { readonly title?: string } {
  assert.ok(error instanceof MollieApiError, `an ApiError, got ${String(error)}`);
  const api = error as MollieApiError & { readonly title?: string };
  assert.equal(api.statusCode, status, String(error));
  if (title !== undefined) assert.equal(api.title, title, 'the title of the error body');
  return api;
}

const keyOf = (exchange: Exchange): string | undefined => headerOf(exchange, 'idempotency-key');

/** The compiled app tree, shared by the suites (one tsc run). */
let build: Promise<string> | undefined;
const buildApp = (): Promise<string> => (build ??= compileGuardedApps([{ spec: 'mollie.yaml', framework: 'express', gen: 'gen-mollie', app: 'app-mollie.ts' }]));

const serve = (env: Readonly<Record<string, string>>): ReturnType<typeof appBehindProxy> =>
  appBehindProxy(async (app) => app.start(await buildApp(), 'app-mollie.js', { API_KEYS, ...env }));

const effectsOf = async (app: AppProcess, description: string, kind: PaymentEffect['kind'] = 'create'): Promise<PaymentEffect[]> =>
  (await app.getJson<PaymentEffect[]>('/test/effects')).filter((e) => e.kind === kind && e.body['description'] === description);

const cancelsOf = async (app: AppProcess, paymentId: string): Promise<PaymentEffect[]> =>
  (await app.getJson<PaymentEffect[]>('/test/effects')).filter((e) => e.kind === 'cancel' && e.paymentId === paymentId);

describe('the official Mollie client (@mollie/api-client) with its own Idempotency-Key, against the generated guard: Express, SQLite', function () {
  this.timeout(60_000);
  const { app, proxy } = serve({});

  it('a gateway 502 after the handler committed: the SDK re-sends the same key after 2 s, the guard replays, the SDK resolves with the same payment; one effect', async () => {
    const description = newDescription('lost as 502');
    const from = proxy().exchanges.length;
    proxy().gatewayErrors = [{ status: 502 }];
    const payment: Payment = await mollieOn(proxy().port, KEYS.alice).payments.create(order(description));

    const attempts = proxy().since(from);
    assert.equal(attempts.length, 2, 'one attempt answered 502 by the gateway and one retry');
    assert.equal(attempts[0]!.status, 201, 'the app committed and answered 201');
    assert.equal(attempts[0]!.gateway, 502, 'the SDK got the gateway’s 502 instead');
    assert.equal(attempts[1]!.status, 201);
    assert.equal(attempts[1]!.gateway, undefined);
    assert.deepEqual([attempts[0]!.method, attempts[0]!.path], ['POST', '/v2/payments']);
    assert.ok(attempts[0]!.headers.some(([name]) => name === 'Idempotency-Key'), 'the SDK sends the header as Idempotency-Key');
    const key = keyOf(attempts[0]!)!;
    assert.match(key, SDK_KEY, 'the SDK made a 24-character base64 key');
    assert.equal(keyOf(attempts[1]!), key, 'the retry carries the same Idempotency-Key');
    assert.ok(attempts[0]!.body.includes(description), 'the proxy saw the JSON body');
    assert.equal(attempts[1]!.body, attempts[0]!.body, 'the retry sends the same body bytes');
    assert.equal(headerOf(attempts[0]!, 'authorization'), `Bearer ${KEYS.alice}`);
    const waited = attempts[1]!.sentAt - attempts[0]!.answeredAt!;
    assert.ok(waited >= SDK_DEFAULT_DELAY_MS - 50, `the SDK waited its 2 s default before retrying (waited ${waited} ms)`);

    const effects = await effectsOf(app, description);
    assert.equal(effects.length, 1, 'the handler ran once');
    assert.equal(effects[0]!.account, 'alice');
    assert.equal(effects[0]!.idempotencyKey, key);
    assert.equal(payment.id, effects[0]!.paymentId, 'the SDK resolved with the first execution’s payment');
    assert.match(payment.id, /^tr_[A-Za-z0-9]+$/);
    assert.equal(payment.status, 'open');
    assert.deepEqual(payment.amount, { currency: 'EUR', value: '10.00' });
    assert.equal((await mollieOn(proxy().port, KEYS.alice).payments.get(payment.id)).id, payment.id, 'the payment is there to get');

    const events = await app.getJson<{ decision: string; resultId?: string }[]>('/test/log');
    assert.ok(events.some((e) => e.decision === 'replay' && e.resultId === payment.id), 'the guard logged the replay of the payment');
    const log = JSON.stringify(events);
    assert.ok(!log.includes(key), 'the raw Idempotency-Key is not in the guard log');
    assert.ok(!log.includes(KEYS.alice), 'the API key (the principal) is not in the guard log');
  });

  it('store outage: 503 + Retry-After before the handler; the SDK waits the Retry-After and retries with the same key once the store is back; one effect', async () => {
    const description = newDescription('outage');
    // Another connection holds the database's write lock: every reservation fails (SQLITE_BUSY) until released.
    const lock = holdSqliteWriteLock(app.databaseFile);
    const from = proxy().exchanges.length;
    try {
      const pending = mollieOn(proxy().port, KEYS.alice).payments.create(order(description));
      await waitUntil(async () => proxy().since(from).some((e) => e.status === 503), 15_000, 'a 503 from the guard');
      assert.equal((await effectsOf(app, description)).length, 0, 'the handler never ran without a reservation');
      lock.release();
      const payment = await pending;
      const attempts = proxy().since(from);
      assertRetryAfterWaited(attempts);
      assert.match(keyOf(attempts[0]!)!, SDK_KEY);
      assert.equal(new Set(attempts.map(keyOf)).size, 1, 'every attempt carries the one Idempotency-Key');
      assert.equal(attempts.at(-1)!.status, 201);
      const effects = await effectsOf(app, description);
      assert.equal(effects.length, 1);
      assert.equal(payment.id, effects[0]!.paymentId);
    } finally {
      lock.release();
    }
  });

  it('a gateway 504 while the handler still runs: the SDK retry meets the in-progress 409 and rejects with an ApiError (it does not retry a 4xx); one effect', async () => {
    const description = newDescription('hold-ms=5000');
    const from = proxy().exchanges.length;
    proxy().gatewayErrors = [{ status: 504, afterMs: 300 }];
    const error = assertApiError(
      await rejection(mollieOn(proxy().port, KEYS.alice).payments.create(order(description)), 'a retry of a running request'),
      409,
      'Request with this idempotency key in progress',
    );
    const attempts = proxy().since(from);
    assert.equal(attempts.length, 2, 'the attempt the gateway timed out and one retry, which the SDK does not retry again');
    assert.equal(attempts[0]!.gateway, 504);
    assert.equal(attempts[1]!.status, 409);
    assert.match(attempts[1]!.retryAfter ?? '', /^[1-9][0-9]*$/, '409 carries Retry-After in seconds (the SDK ignores it on a 4xx)');
    const key = keyOf(attempts[0]!)!;
    assert.equal(keyOf(attempts[1]!), key, 'the retry carries the same Idempotency-Key');
    assert.equal(error.idempotencyKey, key, 'the ApiError names the key it was sent with');
    await waitUntil(async () => attempts[0]!.status !== undefined, 10_000, 'the first execution to answer');
    assert.equal(attempts[0]!.status, 201, 'the first execution completed (its answer went nowhere)');
    assert.equal((await effectsOf(app, description)).length, 1, 'the handler ran once');
  });

  let ownKey = '';
  let ownPaymentId = '';
  let ownDescription = '';

  it('the caller’s own idempotencyKey, sent again after a dropped connection the SDK does not retry: the replay, the same payment; one effect', async () => {
    ownKey = `order-12345-${randomBytes(6).toString('hex')}`;
    ownDescription = newDescription('own key');
    const from = proxy().exchanges.length;
    proxy().dropAnswers = 1;
    const lost = assertApiError(await rejection(mollieOn(proxy().port, KEYS.alice).payments.create({ ...order(ownDescription), idempotencyKey: ownKey }), 'a dropped connection'), undefined);
    assert.match(lost.message, /socket hang up|ECONNRESET/, 'the SDK raised the network error');
    const first = proxy().since(from);
    assert.equal(first.length, 1, 'the SDK does not retry a network error');
    assert.equal(first[0]!.dropped, true);
    assert.equal(first[0]!.status, 201, 'the handler committed before the connection dropped');
    assert.equal(keyOf(first[0]!), ownKey, 'the SDK sends the caller’s key as given');
    assert.equal((await effectsOf(app, ownDescription)).length, 1);

    const again = proxy().exchanges.length;
    const payment = await mollieOn(proxy().port, KEYS.alice).payments.create({ ...order(ownDescription), idempotencyKey: ownKey });
    const second = proxy().since(again);
    assert.equal(second.length, 1);
    assert.equal(keyOf(second[0]!), ownKey);
    assert.equal(second[0]!.status, 201);
    const effects = await effectsOf(app, ownDescription);
    assert.equal(effects.length, 1, 'the handler did not run again');
    assert.equal(payment.id, effects[0]!.paymentId, 'the caller got the payment the lost request made');
    ownPaymentId = payment.id;
  });

  it('the same idempotencyKey with another amount is a 422 ApiError with the guard’s title, sent once, not run', async () => {
    assert.notEqual(ownKey, '', 'needs the own-key test');
    const from = proxy().exchanges.length;
    const error = assertApiError(
      await rejection(mollieOn(proxy().port, KEYS.alice).payments.create({ ...order(ownDescription, '20.00'), idempotencyKey: ownKey }), 'a reused key with another amount'),
      422,
      'Idempotency key reused with another payload',
    );
    assert.equal(error.idempotencyKey, ownKey);
    const attempts = proxy().since(from);
    assert.equal(attempts.length, 1, 'the SDK does not retry a 422');
    assert.equal(attempts[0]!.status, 422);
    const effects = await effectsOf(app, ownDescription);
    assert.equal(effects.length, 1, 'the handler did not run for the mismatch');
    assert.equal(effects[0]!.paymentId, ownPaymentId);
  });

  it('another API key with the same idempotencyKey is another record: another payment, another effect', async () => {
    assert.notEqual(ownKey, '', 'needs the own-key test');
    const payment = await mollieOn(proxy().port, KEYS.bob).payments.create({ ...order(ownDescription), idempotencyKey: ownKey });
    const effects = await effectsOf(app, ownDescription);
    assert.deepEqual(effects.map((e) => e.account), ['alice', 'bob']);
    assert.equal(payment.id, effects[1]!.paymentId);
    assert.notEqual(payment.id, ownPaymentId);
    const notBobs = assertApiError(await rejection(mollieOn(proxy().port, KEYS.bob).payments.get(ownPaymentId), 'another account’s payment'), 404, 'Not Found');
    assert.match(notBobs.message, /No payment exists/);
  });

  it('cancel (DELETE) with the SDK’s own key, its answer lost as a 502: the SDK re-sends the same key, the guard replays the canceled payment; one cancel', async () => {
    const client = mollieOn(proxy().port, KEYS.alice);
    const created = await client.payments.create(order(newDescription('to cancel')));
    const from = proxy().exchanges.length;
    proxy().gatewayErrors = [{ status: 502 }];
    const canceled = await client.payments.cancel(created.id);
    const attempts = proxy().since(from);
    assert.equal(attempts.length, 2);
    assert.deepEqual([attempts[0]!.method, attempts[0]!.path], ['DELETE', `/v2/payments/${created.id}`]);
    assert.equal(attempts[0]!.status, 200, 'the app canceled the payment and answered 200');
    assert.equal(attempts[0]!.gateway, 502);
    assert.equal(attempts[1]!.status, 200);
    const key = keyOf(attempts[0]!)!;
    assert.match(key, SDK_KEY, 'the SDK made its own key for the DELETE');
    assert.equal(keyOf(attempts[1]!), key, 'the retry carries the same Idempotency-Key');
    assert.equal(canceled.id, created.id);
    assert.equal(canceled.status, 'canceled');
    const cancels = await cancelsOf(app, created.id);
    assert.equal(cancels.length, 1, 'the handler canceled once (a second run would answer 422: not cancelable)');
    assert.equal(cancels[0]!.idempotencyKey, key);
  });
});

describe('the Mollie client against a guard that waits for an in-progress duplicate (waitInProgressMs): Express, SQLite', function () {
  this.timeout(60_000);
  const { app, proxy } = serve({ WAIT_IN_PROGRESS_MS: '5000' });

  it('a gateway 504 while the handler still runs: the SDK retry waits for the first execution and resolves with its replay; one effect', async () => {
    const description = newDescription('hold-ms=5000');
    const from = proxy().exchanges.length;
    proxy().gatewayErrors = [{ status: 504, afterMs: 300 }];
    const payment = await mollieOn(proxy().port, KEYS.alice).payments.create(order(description));
    const attempts = proxy().since(from);
    assert.equal(attempts.length, 2, 'the attempt the gateway timed out and one retry');
    assert.equal(attempts[0]!.gateway, 504);
    assert.equal(keyOf(attempts[1]!), keyOf(attempts[0]!), 'the retry carries the same Idempotency-Key');
    assert.ok(attempts[1]!.sentAt < attempts[0]!.answeredAt!, 'the retry was sent while the first execution still ran');
    assert.equal(attempts[1]!.status, 201);
    const effects = await effectsOf(app, description);
    assert.equal(effects.length, 1, 'the handler ran once');
    assert.equal(payment.id, effects[0]!.paymentId);
  });
});
