/**
 * Real third-party SDKs against a generated guard over HTTP on 127.0.0.1: Express and a fetch handler on SQLite,
 * Fastify on a real redis-server, the fetch handler on a throw-away PostgreSQL cluster.
 *
 * stripe-node and orb-billing (a Stainless-generated client whose `idempotencyHeader` is `Idempotency-Key`)
 * make their own key before the first attempt (`stripe-node-retry-<uuid>`, 54 characters;
 * `stainless-node-retry-<uuid>`, 57) and retry network errors and 409 with it. They talk to the app through
 * a TCP proxy that can drop a response after the handler committed (the guard holds the answer until the
 * record is written, so the first byte of an answer means "committed"): the lost response of the article.
 */
import assert from 'node:assert/strict';
import { holdSqliteWriteLock } from './harness.js';
import Orb from 'orb-billing';
import Stripe from 'stripe';
import { formFields } from '../../src/runtime/adapters/common.js';
import { appBehindProxy, assertRetryAfterWaited, compileGuardedApps, headerOf, waitUntil, type AppProcess, type GuardedApp } from './sdk-harness.js';
import { PG_DIRS, requireBinary, startPostgres, startRedis, type PostgresServer, type RedisServer } from '../helpers/servers.js';

const PROBLEM = 'https://idemkit.dev/problems/';
const UUID = '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}';

interface AppEffect {
  readonly operation: string;
  readonly id: string;
  readonly principal?: string;
  readonly body: Record<string, unknown>;
}

async function effectsWith(app: AppProcess, email: string): Promise<AppEffect[]> {
  return (await app.getJson<AppEffect[]>('/test/effects')).filter((effect) => effect.body['email'] === email);
}

let counter = 0;
const uniqueEmail = (who: string): string => `${who}-${process.pid}-${Date.now().toString(36)}-${(counter += 1)}@example.com`;

/** The guards of the SDK fixture (Express and fetch on SQLite, Fastify on Redis, fetch on PostgreSQL), compiled with their apps (one tsc run). */
let build: Promise<string> | undefined;
const buildApps = (): Promise<string> =>
  (build ??= compileGuardedApps([
    ...(['express', 'fetch'] as const).map((framework): GuardedApp => ({ spec: 'sdk.yaml', framework, gen: `gen-${framework}`, app: `app-${framework}.ts` })),
    { spec: 'sdk.yaml', framework: 'fastify', store: 'redis', dir: 'redis', gen: 'gen-fastify', app: 'app-fastify.ts' },
    { spec: 'sdk.yaml', framework: 'fetch', store: 'postgres', dir: 'postgres', gen: 'gen-fetch', app: 'app-fetch.ts' },
  ]));

/** The store an app's guard runs on: its server (none for SQLite), and a real outage of it. */
interface StoreUnderTest {
  readonly title: string;
  /** Starts the store's server before the app (in a `before` hook); resolves to the app's environment for it. */
  start(ctx: Mocha.Context): Promise<Record<string, string>>;
  stop(): Promise<void>;
  /** What the outage is, for the test's title and comments. */
  readonly outageTitle: string;
  /** Takes the store away from the app until `end()` (which may be called again). */
  outage(app: AppProcess): Promise<{ end(): Promise<void> }>;
}


function sqliteStore(): StoreUnderTest {
  return {
    title: 'SQLite',
    start: async () => ({}),
    stop: async () => undefined,
    outageTitle: "another connection holds the database's write lock",
    // Every reservation fails (SQLITE_BUSY after the app's 300 ms busy timeout) until released.
    async outage(app) {
      const lock = holdSqliteWriteLock(app.databaseFile);
      return { end: async () => lock.release() };
    },
  };
}

function postgresStore(): StoreUnderTest {
  let pg: PostgresServer | undefined;
  return {
    title: 'PostgreSQL',
    async start(ctx) {
      requireBinary(ctx, 'initdb', PG_DIRS);
      requireBinary(ctx, 'pg_ctl', PG_DIRS);
      pg = await startPostgres();
      return { PG_URL: pg.connectionString };
    },
    stop: async () => pg?.stop(),
    outageTitle: 'the PostgreSQL server is killed (immediate shutdown), then restarted',
    // Every connection is refused until the server is back (crash recovery, same port and data).
    async outage() {
      await pg!.kill();
      return { end: () => pg!.restart() };
    },
  };
}

function redisStore(): StoreUnderTest {
  let redis: RedisServer | undefined;
  return {
    title: 'Redis',
    async start(ctx) {
      requireBinary(ctx, 'redis-server');
      redis = await startRedis();
      return { REDIS_URL: `redis://127.0.0.1:${redis.port}` };
    },
    stop: async () => redis?.stop(),
    outageTitle: 'redis-server is killed (SIGKILL), then started again on its port',
    // The app's ioredis client fails fast while the server is away (no offline queue) and reconnects after.
    async outage() {
      await redis!.kill();
      return { end: () => redis!.restart() };
    },
  };
}

/** The servers every SDK scenario runs against. */
const SERVERS = [
  { title: 'Express, express.urlencoded({ extended: true })', app: 'app-express', env: {}, store: sqliteStore() },
  { title: "Express, Express 5's default flat express.urlencoded()", app: 'app-express', env: { FORM_PARSER: 'flat' }, store: sqliteStore() },
  { title: 'fetch handler (node:http bridge)', app: 'app-fetch', env: {}, store: sqliteStore() },
  { title: 'Fastify, a flat form content-type parser (as @fastify/formbody)', app: 'redis/app-fastify', env: {}, store: redisStore() },
  { title: 'fetch handler (node:http bridge)', app: 'postgres/app-fetch', env: {}, store: postgresStore() },
] as const;

for (const target of SERVERS) describe(`real SDKs that retry with their own keys, against the generated guard: ${target.title}, ${target.store.title}`, function () {
  this.timeout(60_000);
  let storeEnv: Record<string, string> = {};
  // Before the app starts (hooks run in order), after it stopped.
  before(async function () {
    this.timeout(120_000);
    storeEnv = await target.store.start(this);
  });
  const { app, proxy } = appBehindProxy(async (app) => app.start(await buildApps(), `${target.app}.js`, { ...target.env, ...storeEnv }));
  after(async () => {
    await target.store.stop();
  });

  /** The guard's log must hold hashed key ids only: never an SDK's raw key. */
  async function assertKeyNotLogged(key: string): Promise<void> {
    const log = JSON.stringify(await app.getJson<unknown[]>('/test/log'));
    assert.ok(log.length > 2, 'the guard logged its decisions');
    assert.ok(!log.includes(key), 'the raw key is not in the guard log');
    assert.ok(!log.includes(key.slice(-36)), 'no part of the raw key is in the guard log');
  }

  describe('stripe-node (form-encoded bodies, stripe-node-retry-<uuid> keys)', () => {
    const stripeFor = (apiKey: string, maxNetworkRetries: number): Stripe =>
      new Stripe(apiKey, { host: '127.0.0.1', port: proxy().port, protocol: 'http', maxNetworkRetries, telemetry: false });
    const STRIPE_KEY = new RegExp(`^stripe-node-retry-${UUID}$`);
    let lostKey = '';
    let lostEmail = '';

    it('lost response after commit: the SDK retries with its own key and gets the replay; the handler ran once', async () => {
      const stripe = stripeFor('sk_test_alice', 2);
      const email = uniqueEmail('stripe-lost');
      const from = proxy().exchanges.length;
      proxy().dropAnswers = 1;
      const customer = await stripe.customers.create({ email, name: 'Ada Lovelace', metadata: { order_id: 'ord-1', note: 'first' } });

      const attempts = proxy().since(from);
      assert.equal(attempts.length, 2, 'one lost attempt and one retry');
      assert.equal(attempts[0]!.dropped, true);
      assert.equal(attempts[0]!.status, 200, 'the first attempt committed and answered 200 (then the answer was lost)');
      assert.equal(attempts[1]!.status, 200);
      const keys = attempts.map((a) => headerOf(a, 'idempotency-key'));
      assert.match(keys[0]!, STRIPE_KEY);
      assert.equal(keys[0]!.length, 54);
      assert.equal(keys[1], keys[0], 'the retry carries the same SDK-made key');
      assert.ok(attempts[0]!.headers.some(([name]) => name === 'Idempotency-Key'), 'stripe-node sends the header as Idempotency-Key');
      assert.match(headerOf(attempts[0]!, 'content-type')!, /^application\/x-www-form-urlencoded/);

      const effects = await effectsWith(app, email);
      assert.equal(effects.length, 1, 'the handler ran once');
      assert.equal(customer.id, effects[0]!.id, 'the replay carries the first execution result id');
      assert.deepEqual(effects[0]!.body['metadata'], { order_id: 'ord-1', note: 'first' }, 'form fields arrive nested (metadata[order_id])');
      assert.equal(customer.lastResponse.headers['idempotent-replayed'], 'true');
      assert.equal(customer.email, email);
      await assertKeyNotLogged(keys[0]!);
      lostKey = keys[0]!;
      lostEmail = email;
    });

    it('a concurrent duplicate gets 409 + Retry-After; the SDK retries it with the same key into the replay', async () => {
      const stripe = stripeFor('sk_test_alice', 4);
      const email = uniqueEmail('stripe-dup');
      const params = { email, name: 'Grace Hopper', metadata: { order_id: 'ord-2', test_hold_ms: '1200' } };
      const from = proxy().exchanges.length;
      const first = stripe.customers.create(params);
      await waitUntil(async () => (await effectsWith(app, email)).length === 1, 10_000, 'the first execution');
      const key = headerOf(proxy().since(from)[0]!, 'idempotency-key')!;
      assert.match(key, STRIPE_KEY);
      // The same intent sent again while the first is running (e.g. a second worker), with the SDK-made key.
      const second = await stripe.customers.create(params, { idempotencyKey: key });
      const original = await first;

      assert.equal(second.id, original.id, 'the duplicate ends in the replay of the one result');
      assert.equal(original.lastResponse.headers['idempotent-replayed'], 'false');
      assert.equal(second.lastResponse.headers['idempotent-replayed'], 'true');
      const duplicates = proxy().since(from).slice(1);
      assert.ok(duplicates.length >= 2, 'the duplicate was retried');
      assert.equal(duplicates[0]!.status, 409);
      assert.match(duplicates[0]!.retryAfter ?? '', /^[1-9][0-9]*$/, '409 carries Retry-After in seconds');
      assert.equal(duplicates.at(-1)!.status, 200);
      assert.ok(duplicates.every((d) => headerOf(d, 'idempotency-key') === key));
      assert.equal((await effectsWith(app, email)).length, 1, 'the handler ran once');
    });

    it('a changed nested form field under the same key is answered 422 once and not retried by the SDK', async () => {
      assert.notEqual(lostKey, '', 'needs the lost-response test');
      const stripe = stripeFor('sk_test_alice', 3);
      const from = proxy().exchanges.length;
      let outcome: unknown;
      try {
        // Only the nested form field `metadata[order_id]` differs: the contract fingerprints /metadata/order_id.
        outcome = await stripe.customers.create({ email: lostEmail, name: 'Ada Lovelace', metadata: { order_id: 'ord-9', note: 'first' } }, { idempotencyKey: lostKey });
      } catch (error) {
        outcome = error;
      }
      const attempts = proxy().since(from);
      assert.equal(attempts.length, 1, 'no retry of a 422');
      assert.equal(attempts[0]!.status, 422);
      // The app renders the guard's answers in Stripe's error envelope (renderProblem): stripe-node raises a
      // StripeError carrying Stripe's error type and the guard's problem name (it resolved with the problem
      // document as if it were a customer before). Stripe itself answers a reused key with 400, whence the class.
      assert.ok(outcome instanceof Stripe.errors.StripeError, `a StripeError, got ${String(outcome)}`);
      assert.equal(outcome.statusCode, 422);
      assert.equal(outcome.rawType, 'idempotency_error');
      assert.equal(outcome.code, 'idempotency-key-reused');
      assert.match(outcome.message, /already used for a different request/);
      assert.equal((await effectsWith(app, lostEmail)).length, 1, 'the handler did not run for the mismatch');
    });

    it('another API key (principal) with the same key is another record', async () => {
      assert.notEqual(lostKey, '', 'needs the lost-response test');
      const bob = stripeFor('sk_test_bob', 0);
      const customer = await bob.customers.create({ email: lostEmail, name: 'Ada Lovelace', metadata: { order_id: 'ord-1' } }, { idempotencyKey: lostKey });
      assert.equal(customer.lastResponse.headers['idempotent-replayed'], 'false');
      const effects = await effectsWith(app, lostEmail);
      assert.deepEqual(effects.map((e) => e.principal).sort(), ['sk_test_alice', 'sk_test_bob']);
    });
  });

  describe('orb-billing, a Stainless client (JSON bodies, stainless-node-retry-<uuid> keys, Retry-After honoured)', () => {
    const orbFor = (apiKey: string, maxRetries: number): Orb => new Orb({ apiKey, baseURL: `http://127.0.0.1:${proxy().port}/orb`, maxRetries });
    const STAINLESS_KEY = new RegExp(`^stainless-node-retry-${UUID}$`);
    let lostKey = '';
    let lostEmail = '';

    it('lost response after commit: the SDK retries with its own key and gets the replay; the handler ran once', async () => {
      const orb = orbFor('orb_alice', 2);
      const email = uniqueEmail('orb-lost');
      const from = proxy().exchanges.length;
      proxy().dropAnswers = 1;
      const { data, response } = await orb.customers.create({ email, name: 'Ada Lovelace' }).withResponse();

      const attempts = proxy().since(from);
      assert.equal(attempts.length, 2, 'one lost attempt and one retry');
      assert.equal(attempts[0]!.dropped, true);
      assert.equal(attempts[0]!.status, 201);
      const keys = attempts.map((a) => headerOf(a, 'idempotency-key'));
      assert.match(keys[0]!, STAINLESS_KEY);
      assert.equal(keys[0]!.length, 57);
      assert.equal(keys[1], keys[0], 'the retry carries the same SDK-made key');
      assert.equal(headerOf(attempts[1]!, 'x-stainless-retry-count'), '1', 'the second attempt is the SDK retry');
      // Stainless sends `Idempotency-Key` next to lower-case `authorization` / `content-type` (its fetch keeps the casing given).
      assert.ok(attempts[0]!.headers.some(([name]) => name === 'Idempotency-Key'), JSON.stringify(attempts[0]!.headers.map(([n]) => n)));

      const effects = await effectsWith(app, email);
      assert.equal(effects.length, 1, 'the handler ran once');
      assert.equal(data.id, effects[0]!.id, 'the replay carries the first execution result id');
      assert.equal(response.status, 201);
      assert.equal(response.headers.get('idempotent-replayed'), 'true');
      await assertKeyNotLogged(keys[0]!);
      lostKey = keys[0]!;
      lostEmail = email;
    });

    it('a concurrent duplicate gets 409 + Retry-After; the SDK waits that long and its retry ends in the replay', async () => {
      const orb = orbFor('orb_alice', 3);
      const email = uniqueEmail('orb-dup');
      const from = proxy().exchanges.length;
      const first = orb.customers.create({ email, name: 'Grace Hopper', metadata: { test_hold_ms: '1200' } }).withResponse();
      await waitUntil(async () => (await effectsWith(app, email)).length === 1, 10_000, 'the first execution');
      const key = headerOf(proxy().since(from)[0]!, 'idempotency-key')!;
      assert.match(key, STAINLESS_KEY);
      // test_hold_ms is excluded from the fingerprint: the duplicate that does not hold is the same payload.
      const second = await orb.customers.create({ email, name: 'Grace Hopper', metadata: { test_hold_ms: '0' } }, { idempotencyKey: key }).withResponse();
      const original = await first;

      assert.equal(second.data.id, original.data.id, 'the duplicate ends in the replay of the one result');
      assert.equal(original.response.headers.get('idempotent-replayed'), 'false');
      assert.equal(second.response.headers.get('idempotent-replayed'), 'true');
      const duplicates = proxy().since(from).slice(1);
      assert.equal(duplicates[0]!.status, 409);
      assertRetryAfterWaited(duplicates, 409);
      assert.equal(duplicates.at(-1)!.status, 201);
      assert.ok(duplicates.every((d) => headerOf(d, 'idempotency-key') === key));
      assert.equal((await effectsWith(app, email)).length, 1, 'the handler ran once');
    });

    it('a changed payload under the same key is a 422 error the SDK does not retry', async () => {
      assert.notEqual(lostKey, '', 'needs the lost-response test');
      const orb = orbFor('orb_alice', 3);
      const from = proxy().exchanges.length;
      const error = await orb.customers.create({ email: lostEmail, name: 'Someone Else' }, { idempotencyKey: lostKey }).then(
        () => assert.fail('a mismatch must not succeed'),
        (e: unknown) => e,
      );
      assert.ok(error instanceof Orb.APIError, String(error));
      assert.equal(error.status, 422);
      assert.equal((error.error as { type?: string }).type, `${PROBLEM}idempotency-key-reused`);
      const attempts = proxy().since(from);
      assert.equal(attempts.length, 1, 'no retry of a 422');
      assert.equal((await effectsWith(app, lostEmail)).length, 1, 'the handler did not run for the mismatch');
    });

    // Keep this the last test that stores records: a restarted redis-server (no persistence) is empty.
    it(`store outage (${target.store.outageTitle}): 503 + Retry-After before the handler; the SDK retries with its key once the store is back; one effect`, async () => {
      const email = uniqueEmail('orb-outage');
      const outage = await target.store.outage(app);
      const from = proxy().exchanges.length;
      try {
        const pending = orbFor('orb_alice', 4).customers.create({ email, name: 'Outage' }).withResponse();
        await waitUntil(async () => proxy().since(from).some((e) => e.status === 503), 15_000, 'a 503 from the guard');
        assert.equal((await effectsWith(app, email)).length, 0, 'the handler never ran without a reservation');
        await outage.end();
        const { data, response } = await pending;
        assert.equal(response.status, 201);
        const attempts = proxy().since(from);
        assertRetryAfterWaited(attempts);
        assert.ok(new Set(attempts.map((e) => headerOf(e, 'idempotency-key'))).size === 1, 'every attempt carries the one SDK-made key');
        const effects = await effectsWith(app, email);
        assert.equal(effects.length, 1);
        assert.equal(data.id, effects[0]!.id);
      } finally {
        await outage.end();
      }
    });

    it('a key longer than the contract allows is a 400 the SDK does not retry', async () => {
      const orb = orbFor('orb_alice', 3);
      const from = proxy().exchanges.length;
      const error = await orb.customers.create({ email: uniqueEmail('orb-long'), name: 'X' }, { idempotencyKey: `stainless-node-retry-${'a'.repeat(60)}` }).then(
        () => assert.fail('an over-long key must be refused'),
        (e: unknown) => e,
      );
      assert.ok(error instanceof Orb.APIError);
      assert.equal(error.status, 400);
      assert.equal((error.error as { type?: string }).type, `${PROBLEM}idempotency-key-invalid`);
      assert.equal(proxy().since(from).length, 1);
    });
  });
});

describe('form bodies as the guard fingerprints them (stripe-node encoding)', () => {
  it('nests bracketed fields the same from raw text, a flat parser and a nesting parser', () => {
    const wire = 'email=a%40example.com&metadata[order_id]=o-1&expand[]=a&expand[]=b&items[0][price]=p1&items[1][price]=p2';
    const nested = { email: 'a@example.com', metadata: { order_id: 'o-1' }, expand: ['a', 'b'], items: [{ price: 'p1' }, { price: 'p2' }] };
    assert.deepEqual(JSON.parse(JSON.stringify(formFields(wire))), nested);
    const flat = { email: 'a@example.com', 'metadata[order_id]': 'o-1', 'expand[]': ['a', 'b'], 'items[0][price]': 'p1', 'items[1][price]': 'p2' };
    assert.deepEqual(JSON.parse(JSON.stringify(formFields(flat))), nested);
    assert.equal(formFields(nested), nested, 'an already nested body is used as it is');
  });

  it('keeps __proto__ as data and repeated plain fields as arrays', () => {
    const fields = formFields('__proto__[polluted]=yes&tag=x&tag=y') as Record<string, unknown>;
    assert.equal(({} as Record<string, unknown>)['polluted'], undefined);
    assert.deepEqual(JSON.parse(JSON.stringify(fields)), { ['__proto__']: { polluted: 'yes' }, tag: ['x', 'y'] });
  });
});
