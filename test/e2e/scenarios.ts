/**
 * The end-to-end scenarios every generated server target runs (DESIGN §1 readiness, §4 guard algorithm),
 * over real HTTP against the compiled app in a child process.
 */
import assert from 'node:assert/strict';
import { readFileSync, rmSync } from 'node:fs';
import {
  appFiles,
  effectsFor,
  holdSqliteWriteLock,
  post,
  postAndDrop,
  readLines,
  sleep,
  startServer,
  unique,
  waitFor,
  type Answer,
  type AppFiles,
  type RunningServer,
  type Target,
} from './harness.js';
import { requireBinary, startRedis, type RedisServer } from '../helpers/servers.js';

const DEMO = '/v1/demo-requests';
const PAYMENTS = (account: string) => `/v1/accounts/${account}/payments`;
const PROBLEM = 'https://idemkit.dev/problems/';

/** How a suite reaches its store (durable stores only). */
export interface StoreControl {
  /** Extra environment for the app (connection URLs). */
  env(): Record<string, string>;
  /** Makes the store unreachable for the app. */
  stop(files: AppFiles): Promise<void>;
  /** Brings it back (when the harness can; otherwise the recovery check is left out). */
  restart?(files: AppFiles): Promise<void>;
}

export interface ScenarioOptions {
  /**
   * For stores that outlive the process (SQLite, PostgreSQL, Redis): the crash and outage scenarios.
   * The memory store lives inside the app process, so a restart empties it by design and there is no
   * separate store to stop: those two scenarios do not apply to it.
   */
  readonly durable?: StoreControl;
  /** The app serves the one-transaction route (Express on SQLite and PostgreSQL). */
  readonly transactional?: boolean;
}

function assertProblem(answer: Answer, status: number, type: string): void {
  assert.equal(answer.status, status, answer.text);
  assert.match(String(answer.headers['content-type']), /^application\/problem\+json/);
  assert.equal(answer.headers['cache-control'], 'no-store');
  assert.equal(answer.json['type'], PROBLEM + type);
  assert.equal(answer.json['status'], status);
}

/** Retries like a client would while the answer is 409 in progress, up to `ms`. */
async function retryWhileInProgress(send: () => Promise<Answer>, ms: number): Promise<Answer> {
  const deadline = Date.now() + ms;
  for (;;) {
    const answer = await send();
    if (answer.status !== 409 || answer.json['type'] !== `${PROBLEM}idempotency-request-in-progress` || Date.now() > deadline) return answer;
    await sleep(100);
  }
}

/**
 * A suite around a throw-away `redis-server` (started before it, stopped after): `body` declares the suites that use
 * it, given the app's environment for it and the {@link StoreControl} whose outage kills it.
 */
export function describeWithRedis(title: string, body: (redis: { env(): Record<string, string>; durable: StoreControl }) => void): void {
  describe(title, function () {
    let redis: RedisServer | undefined;
    before(async function () {
      this.timeout(60_000);
      requireBinary(this, 'redis-server');
      redis = await startRedis();
    });
    after(async () => {
      await redis?.stop();
    });
    const env = () => ({ REDIS_URL: `redis://127.0.0.1:${redis!.port}` });
    body({ env, durable: { env, stop: () => redis!.kill() } });
  });
}

/** SQLite "outage": {@link holdSqliteWriteLock} from `stop` to `restart`. */
export function sqliteControl(): StoreControl {
  let lock: { release(): void } | undefined;
  return {
    env: () => ({ SQLITE_BUSY_MS: '400' }),
    async stop(files) {
      lock = holdSqliteWriteLock(files.sqlite);
    },
    async restart() {
      lock?.release();
      lock = undefined;
    },
  };
}

export function describeServerScenarios(target: Target, options: ScenarioOptions = {}): void {
  describe(`generated ${target.framework} guard on ${target.store}${target.runtime === undefined ? '' : ` under ${target.runtime}`}, over HTTP`, function () {
    this.timeout(60_000);
    let files: AppFiles;
    let server: RunningServer;

    before(async function () {
      // The first suite builds every target (one tsc run); a Next.js target's first start adds its `next build` (~25 s here).
      this.timeout(300_000);
      files = appFiles();
      server = await startServer(target, files, options.durable?.env() ?? {});
    });
    after(async () => {
      await server?.stop();
      rmSync(files.dir, { recursive: true, force: true });
    });

    it('first answer says Idempotent-Replayed: false; a retry replays the same status, headers and bytes', async () => {
      const key = unique('first');
      const body = { topic: unique('topic'), contact: { email: 'a@example.com' } };
      const first = await post(server.port, DEMO, { key, user: 'alice', body, headers: { 'x-test-write': 'raw' } });
      assert.equal(first.status, 201, first.text);
      assert.equal(first.headers['idempotent-replayed'], 'false');
      const again = await post(server.port, DEMO, { key, user: 'alice', body: { ...body, clientSentAt: 'later' } });
      assert.equal(again.status, 201);
      assert.equal(again.headers['idempotent-replayed'], 'true');
      assert.equal(again.text, first.text);
      assert.equal(again.headers['location'], first.headers['location']);
      assert.match(String(again.headers['content-type']), /^application\/json/);
      assert.equal(effectsFor(files, body.topic).length, 1);
    });

    it('lost response: the socket dies before the answer; the retry gets the stored result, one effect', async () => {
      const key = unique('lost');
      const body = { topic: unique('topic'), contact: { email: 'b@example.com' } };
      const dropWhen = () => effectsFor(files, body.topic).length === 1;
      const answered = await postAndDrop(server.port, DEMO, { key, user: 'alice', body, dropWhen, headers: { 'x-test-hold-ms': '500' } });
      assert.equal(answered, false, 'the first answer must be lost');
      await waitFor(() => effectsFor(files, body.topic).length === 1, 5000, 'the effect of the lost request');
      const retry = await retryWhileInProgress(() => post(server.port, DEMO, { key, user: 'alice', body }), 5000);
      assert.equal(retry.status, 201, retry.text);
      assert.equal(retry.headers['idempotent-replayed'], 'true');
      const [effect] = effectsFor(files, body.topic);
      assert.equal(retry.json['id'], effect!['id'], 'the replay carries the result id of the one effect');
      await sleep(100);
      assert.equal(effectsFor(files, body.topic).length, 1);
    });

    it('50 concurrent requests with one key run the handler once; the rest get 409 + Retry-After or the replay', async () => {
      const key = unique('burst');
      const body = { topic: unique('topic'), contact: { email: 'c@example.com' } };
      const answers = await Promise.all(
        Array.from({ length: 50 }, () => post(server.port, DEMO, { key, user: 'alice', body, headers: { 'x-test-hold-ms': '400' } })),
      );
      assert.equal(effectsFor(files, body.topic).length, 1);
      const firsts = answers.filter((a) => a.status === 201 && a.headers['idempotent-replayed'] === 'false');
      assert.equal(firsts.length, 1);
      for (const answer of answers) {
        if (answer.status === 201) {
          assert.equal(answer.json['id'], firsts[0]!.json['id']);
        } else {
          assertProblem(answer, 409, 'idempotency-request-in-progress');
          assert.match(String(answer.headers['retry-after']), /^[1-9]\d*$/);
        }
      }
    });

    it('another body with the same key: 422 before the handler, while in progress and after completion', async () => {
      const key = unique('mismatch');
      const body = { topic: unique('topic'), contact: { email: 'd@example.com' } };
      const other = { topic: unique('other'), contact: { email: 'd@example.com' } };
      const running = post(server.port, DEMO, { key, user: 'alice', body, headers: { 'x-test-hold-ms': '700' } });
      await waitFor(() => effectsFor(files, body.topic).length === 1, 5000, 'the first request to start');
      assertProblem(await post(server.port, DEMO, { key, user: 'alice', body: other }), 422, 'idempotency-key-reused');
      assert.equal((await running).status, 201);
      assertProblem(await post(server.port, DEMO, { key, user: 'alice', body: other }), 422, 'idempotency-key-reused');
      assert.equal(effectsFor(files, other.topic).length, 0, 'the handler never ran for the other body');
      assert.equal(effectsFor(files, body.topic).length, 1);
    });

    it('missing, invalid and oversized keys: 400 problem+json, handler not run', async () => {
      const topic = unique('topic');
      const body = { topic, contact: { email: 'e@example.com' } };
      assertProblem(await post(server.port, DEMO, { user: 'alice', body }), 400, 'idempotency-key-missing');
      assertProblem(await post(server.port, DEMO, { key: '', user: 'alice', body }), 400, 'idempotency-key-invalid');
      assertProblem(await post(server.port, DEMO, { key: 'x'.repeat(81), user: 'alice', body }), 400, 'idempotency-key-invalid');
      assertProblem(await post(server.port, DEMO, { key: 'tab\tinside', user: 'alice', body }), 400, 'idempotency-key-invalid');
      if (target.framework !== 'fetch') {
        // A fetch Headers object folds repeated headers into one "a, b" value before any handler sees them.
        assertProblem(await post(server.port, DEMO, { key: ['k1', 'k2'], user: 'alice', body }), 400, 'idempotency-key-invalid');
      }
      // Real clients' keys (stripe-node-retry-<uuid>: 54–57 characters) and the quoted structured-field form pass.
      const stripeLike = `stripe-node-retry-${unique('u').padEnd(36, '0').slice(0, 36)}`;
      const quoted = await post(server.port, DEMO, { key: `"${stripeLike}"`, user: 'alice', body });
      assert.equal(quoted.status, 201, quoted.text);
      const bare = await post(server.port, DEMO, { key: stripeLike, user: 'alice', body });
      assert.equal(bare.headers['idempotent-replayed'], 'true', 'the quoted and the bare form are the same key');
      assert.equal(effectsFor(files, topic).length, 1);
    });

    it('the same key from two principals makes two records and two effects', async () => {
      const key = unique('shared');
      const body = { topic: unique('topic'), contact: { email: 'f@example.com' } };
      const alice = await post(server.port, DEMO, { key, user: 'alice', body });
      const bob = await post(server.port, DEMO, { key, user: 'bob', body });
      assert.equal(alice.status, 201);
      assert.equal(bob.status, 201);
      assert.equal(bob.headers['idempotent-replayed'], 'false', "bob never sees alice's response");
      assert.notEqual(alice.json['id'], bob.json['id']);
      assert.equal(effectsFor(files, body.topic).length, 2);
      // A path scope separates accounts too.
      const one = await post(server.port, PAYMENTS('acc-1'), { key, user: 'alice', body: { amount: 100, currency: unique('EUR') } });
      const two = await post(server.port, PAYMENTS('acc-2'), { key, user: 'alice', body: { amount: 100, currency: unique('EUR') } });
      assert.equal(one.status, 201, one.text);
      assert.equal(two.headers['idempotent-replayed'], 'false');
    });

    it('a transient status releases the key: the retry runs the handler again', async () => {
      const key = unique('transient');
      const body = { topic: unique('topic'), contact: { email: 'g@example.com' } };
      const busy = await post(server.port, DEMO, { key, user: 'alice', body, headers: { 'x-test-status': '503' } });
      assert.equal(busy.status, 503);
      const retry = await post(server.port, DEMO, { key, user: 'alice', body });
      assert.equal(retry.status, 201);
      assert.equal(retry.headers['idempotent-replayed'], 'false');
      assert.equal(effectsFor(files, body.topic).length, 2);
    });

    it('logs carry a hashed key id, never the raw key or the payload', async () => {
      const key = unique('secret-key');
      const secret = unique('secret-payload');
      await post(server.port, DEMO, { key, user: 'alice', body: { topic: secret, contact: { email: 'h@example.com' } } });
      await waitFor(() => readFileSync(files.log, 'utf8').includes('"completed"'), 3000, 'the completion log line');
      const log = readFileSync(files.log, 'utf8');
      assert.ok(!log.includes(key), 'raw key in the guard log');
      assert.ok(!log.includes(secret), 'payload in the guard log');
      assert.ok(readLines(files.log).some((line) => line['decision'] === 'completed' && /^[0-9a-f]{64}$/.test(String(line['keyId']))));
    });

    if (options.transactional === true) {
      const rows = async (topic: string): Promise<number> => {
        const answer = await fetch(`http://127.0.0.1:${server.port}/test/rows?topic=${encodeURIComponent(topic)}`);
        return ((await answer.json()) as { n: number }).n;
      };

      it('one-transaction mode: a 500 rolls back the business row with the reservation; the retry commits both once', async () => {
        const key = unique('tx');
        const body = { topic: unique('topic'), contact: { email: 'tx@example.com' } };
        const failed = await post(server.port, '/v1/tx/demo-requests', { key, user: 'alice', body, headers: { 'x-test-status': '500' } });
        assert.equal(failed.status, 500);
        assert.equal(await rows(body.topic), 0, 'the row was rolled back');
        const retry = await post(server.port, '/v1/tx/demo-requests', { key, user: 'alice', body });
        assert.equal(retry.status, 201, retry.text);
        assert.equal(retry.headers['idempotent-replayed'], 'false');
        const replay = await post(server.port, '/v1/tx/demo-requests', { key, user: 'alice', body });
        assert.equal(replay.headers['idempotent-replayed'], 'true');
        assert.equal(replay.json['id'], retry.json['id']);
        assert.equal(await rows(body.topic), 1);
      });

      it('one-transaction mode: concurrent duplicates wait for the commit and replay it; one business row', async () => {
        const key = unique('tx-burst');
        const body = { topic: unique('topic'), contact: { email: 'tx2@example.com' } };
        const answers = await Promise.all(
          Array.from({ length: 10 }, () => post(server.port, '/v1/tx/demo-requests', { key, user: 'alice', body, headers: { 'x-test-hold-ms': '200' } })),
        );
        assert.equal(await rows(body.topic), 1);
        const firsts = answers.filter((a) => a.status === 201 && a.headers['idempotent-replayed'] === 'false');
        assert.equal(firsts.length, 1);
        for (const answer of answers) {
          if (answer.status === 201) assert.equal(answer.json['id'], firsts[0]!.json['id']);
          else assertProblem(answer, 409, 'idempotency-request-in-progress');
        }
      });
    }

    if (options.durable === undefined) {
      it('memory store: records live in the app process, so a restart forgets them (why crash and outage scenarios run on the durable stores)', async () => {
        const memoryFiles = appFiles();
        let app = await startServer(target, memoryFiles);
        try {
          const key = unique('restart');
          const body = { topic: unique('topic'), contact: { email: 'r@example.com' } };
          assert.equal((await post(app.port, DEMO, { key, user: 'alice', body })).headers['idempotent-replayed'], 'false');
          assert.equal((await post(app.port, DEMO, { key, user: 'alice', body })).headers['idempotent-replayed'], 'true');
          await app.stop();
          app = await startServer(target, memoryFiles);
          assert.equal((await post(app.port, DEMO, { key, user: 'alice', body })).headers['idempotent-replayed'], 'false');
          assert.equal(effectsFor(memoryFiles, body.topic).length, 2);
        } finally {
          await app.stop();
          rmSync(memoryFiles.dir, { recursive: true, force: true });
        }
      });
    }

    if (options.durable !== undefined) {
      const durable = options.durable;

      it('SIGKILL inside the handler after the effect: after restart and lease end, 409 abandoned, reconciliation runs, no second effect; a hook that finds the effect completes the intent', async () => {
        const crashFiles = appFiles();
        let crashing: RunningServer | undefined;
        let restarted: RunningServer | undefined;
        try {
          crashing = await startServer(target, crashFiles, durable.env());
          const key = unique('crash');
          const body = { amount: 4200, currency: unique('EUR') };
          const lost = await post(crashing.port, PAYMENTS('acc-9'), { key, user: 'alice', body, headers: { 'x-test-crash': 'after-effect' } }).then(
            () => 'answered',
            () => 'connection lost',
          );
          assert.equal(lost, 'connection lost');
          assert.equal(await crashing.exited, 'SIGKILL');
          assert.equal(effectsFor(crashFiles, body.currency).length, 1);

          restarted = await startServer(target, crashFiles, durable.env());
          const early = await post(restarted.port, PAYMENTS('acc-9'), { key, user: 'alice', body });
          if (early.status === 409 && early.json['type'] === `${PROBLEM}idempotency-request-in-progress`) {
            assert.match(String(early.headers['retry-after']), /^[1-9]\d*$/);
          }
          await sleep(1100); // the createPayment lease is PT1S
          const retry = await post(restarted.port, PAYMENTS('acc-9'), { key, user: 'alice', body });
          assertProblem(retry, 409, 'idempotency-request-abandoned');
          assert.ok(
            readLines(crashFiles.reconcile).some((line) => line['operation'] === 'createPayment' && line['pid'] === restarted!.child.pid),
            'the reconciliation hook ran in the restarted process',
          );
          assert.equal(effectsFor(crashFiles, body.currency).length, 1, 'no second effect');

          // A hook that can read the outcome (here: by the payment's business data) closes the intent.
          const reconciled = await post(restarted.port, PAYMENTS('acc-9'), { key, user: 'alice', body, headers: { 'x-test-reconcile': 'lookup' } });
          assert.equal(reconciled.status, 201, reconciled.text);
          assert.equal(reconciled.headers['idempotent-replayed'], 'true');
          assert.equal(reconciled.json['id'], effectsFor(crashFiles, body.currency)[0]!['id'], 'the result id of the one effect');
          const after = await post(restarted.port, PAYMENTS('acc-9'), { key, user: 'alice', body });
          assert.equal(after.text, reconciled.text, 'later retries replay the reconciled result');
          assert.equal(effectsFor(crashFiles, body.currency).length, 1, 'still one effect');
        } finally {
          await crashing?.stop();
          await restarted?.stop();
          rmSync(crashFiles.dir, { recursive: true, force: true });
        }
      });

      it('store stopped mid-run: 503 + Retry-After in bounded time, the handler never runs, nothing hangs', async () => {
        const key = unique('outage');
        const body = { topic: unique('topic'), contact: { email: 'i@example.com' } };
        // One request is inside its handler (reserved, effect done) when the store goes away.
        const inFlightBody = { topic: unique('in-flight'), contact: { email: 'i@example.com' } };
        const inFlight = post(server.port, DEMO, { key: `${key}-in-flight`, user: 'alice', body: inFlightBody, headers: { 'x-test-hold-ms': '400' } });
        await waitFor(() => effectsFor(files, inFlightBody.topic).length === 1, 5000, 'the in-flight handler');
        await durable.stop(files);
        try {
          const started = Date.now();
          const answers = await Promise.all(Array.from({ length: 5 }, (_, i) => post(server.port, DEMO, { key: `${key}-${i}`, user: 'alice', body })));
          const elapsed = Date.now() - started;
          // Its effect happened, so it gets its answer although the record could not be completed.
          const first = await inFlight;
          assert.equal(first.status, 201, first.text);
          assert.equal(effectsFor(files, inFlightBody.topic).length, 1);
          for (const answer of answers) {
            assertProblem(answer, 503, 'idempotency-store-unavailable');
            assert.match(String(answer.headers['retry-after']), /^[1-9]\d*$/);
          }
          assert.ok(elapsed < 15_000, `answered in ${elapsed} ms`);
          assert.equal(effectsFor(files, body.topic).length, 0, 'the handler never ran without a reservation');
        } finally {
          await durable.restart?.(files);
        }
        if (durable.restart === undefined) return;
        const recovered = await retryWhileInProgress(() => post(server.port, DEMO, { key: `${key}-0`, user: 'alice', body }), 10_000);
        assert.equal(recovered.status, 201, recovered.text);
        assert.equal(effectsFor(files, body.topic).length, 1);
      });
    }
  });
}

/**
 * Several app processes sharing one store (PostgreSQL, Redis): the reservation is atomic across
 * processes, and a retry that lands on another instance replays the first one's result.
 */
export function describeMultiProcess(target: Target, env: () => Record<string, string>, processes = 4): void {
  describe(`${processes} ${target.framework} processes on one ${target.store}`, function () {
    this.timeout(90_000);
    let files: AppFiles;
    let servers: RunningServer[] = [];

    before(async function () {
      this.timeout(300_000); // may build every target, as above
      files = appFiles();
      // The first instance migrates alone; the others start all at once and migrate concurrently (idempotent,
      // ordered by the store's advisory lock).
      servers.push(await startServer(target, files, env()));
      servers.push(...(await Promise.all(Array.from({ length: processes - 1 }, () => startServer(target, files, env())))));
      // Open every process's PostgreSQL connections before the tests' bursts: the fixture's pool (max 10) opens them
      // at its first burst otherwise, 40 at once on 4 processes, which on a loaded 2-core machine outlasted the
      // fixture's 1 s connect and store timeouts (503). /test/rows runs one plain pool query per request (the store
      // batches the reservations of a turn into one statement, so guarded requests would open only one).
      if (target.store === 'postgres') {
        await Promise.all(servers.flatMap((server) => Array.from({ length: 10 }, async () => (await fetch(`http://127.0.0.1:${server.port}/test/rows?topic=warm`)).arrayBuffer())));
      }
    });
    after(async () => {
      await Promise.all(servers.map((server) => server.stop()));
      servers = [];
      rmSync(files.dir, { recursive: true, force: true });
    });

    it('50 concurrent requests with one key spread over the processes run the handler once', async () => {
      const key = unique('multi');
      const body = { topic: unique('topic'), contact: { email: 'm@example.com' } };
      const answers = await Promise.all(
        Array.from({ length: 50 }, (_, i) => post(servers[i % servers.length]!.port, DEMO, { key, user: 'alice', body, headers: { 'x-test-hold-ms': '400' } })),
      );
      const effects = effectsFor(files, body.topic);
      assert.equal(effects.length, 1, `effects in pids ${effects.map((e) => String(e['pid'])).join(', ')}`);
      const firsts = answers.filter((a) => a.status === 201 && a.headers['idempotent-replayed'] === 'false');
      assert.equal(firsts.length, 1);
      for (const answer of answers) {
        if (answer.status === 201) assert.equal(answer.json['id'], effects[0]!['id']);
        else {
          assertProblem(answer, 409, 'idempotency-request-in-progress');
          assert.match(String(answer.headers['retry-after']), /^[1-9]\d*$/);
        }
      }
    });

    it('a lost response on one process is replayed by another', async () => {
      const key = unique('lost-multi');
      const body = { topic: unique('topic'), contact: { email: 'n@example.com' } };
      const dropWhen = () => effectsFor(files, body.topic).length === 1;
      assert.equal(await postAndDrop(servers[0]!.port, DEMO, { key, user: 'alice', body, dropWhen, headers: { 'x-test-hold-ms': '500' } }), false);
      await waitFor(() => effectsFor(files, body.topic).length === 1, 5000, 'the effect of the lost request');
      const retry = await retryWhileInProgress(() => post(servers[1]!.port, DEMO, { key, user: 'alice', body }), 5000);
      assert.equal(retry.status, 201, retry.text);
      assert.equal(retry.headers['idempotent-replayed'], 'true');
      assert.equal(retry.json['id'], effectsFor(files, body.topic)[0]!['id']);
    });
  });
}
