/**
 * A real AWS SDK v3 client whose idempotency key is a member of the JSON body, against a generated guard
 * (Express, SQLite store, `key: { body: /ClientToken }`) over HTTP on 127.0.0.1.
 *
 * @aws-sdk/client-scheduler's CreateSchedule (restJson1, POST /schedules/{Name}) models `ClientToken` as an
 * idempotencyToken: the SDK writes a UUID there when the caller leaves it out, serializes and signs (SigV4) the
 * request once, and sends those same bytes again when its standard retry strategy retries a reset connection.
 * It talks to the app through the proxy of the SDK suites, which drops the first answer after the handler
 * committed (the lost response).
 */
import assert from 'node:assert/strict';
import { CreateScheduleCommand, SchedulerClient, SchedulerServiceException, type CreateScheduleCommandInput } from '@aws-sdk/client-scheduler';
import { appBehindProxy, compileGuardedApps, headerOf, type Exchange } from './sdk-harness.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

interface ScheduleEffect {
  readonly arn: string;
  readonly requestId: string;
  readonly principal?: string;
  readonly name: string;
  readonly body: Record<string, unknown>;
}

/** A Scheduler client on the proxy, signing with fake static credentials; records each call's replay header. */
function schedulerFor(port: number, accessKeyId: string, replayed: (string | undefined)[] = []): SchedulerClient {
  const client = new SchedulerClient({
    endpoint: `http://127.0.0.1:${port}`,
    region: 'us-east-1',
    credentials: { accessKeyId, secretAccessKey: 'fake-secret-for-tests' },
    maxAttempts: 3,
  });
  // What a user would read off the raw answer: the guard's Idempotent-Replayed header (after the SDK's retries).
  client.middlewareStack.add(
    (next) => async (args) => {
      const result = await next(args);
      replayed.push((result.response as { headers?: Record<string, string> }).headers?.['idempotent-replayed']);
      return result;
    },
    { step: 'build', name: 'readIdempotentReplayed' },
  );
  return client;
}

let counter = 0;
const uniqueName = (who: string): string => `${who}-${process.pid}-${Date.now().toString(36)}-${(counter += 1)}`;

const scheduleInput = (Name: string, Input = '{"job":"nightly-report"}'): CreateScheduleCommandInput => ({
  Name,
  ScheduleExpression: 'rate(1 day)',
  FlexibleTimeWindow: { Mode: 'OFF' },
  Target: { Arn: 'arn:aws:lambda:us-east-1:123456789012:function:report', RoleArn: 'arn:aws:iam::123456789012:role/scheduler', Input },
});

/** The ClientToken an exchange's JSON body carried. */
const tokenOf = (exchange: Exchange): unknown => (JSON.parse(exchange.body) as { ClientToken?: unknown }).ClientToken;

describe('a real AWS SDK (client-scheduler CreateSchedule) with its ClientToken in the JSON body, against the generated guard: Express, SQLite', function () {
  this.timeout(60_000);
  const { app, proxy } = appBehindProxy(async (app) =>
    app.start(await compileGuardedApps([{ spec: 'scheduler.yaml', framework: 'express', gen: 'gen-scheduler', app: 'app-scheduler.ts' }]), 'app-scheduler.js'),
  );
  const effectsNamed = async (name: string): Promise<ScheduleEffect[]> =>
    (await app.getJson<ScheduleEffect[]>('/test/effects')).filter((effect) => effect.name === name);

  let lostName = '';
  let lostToken = '';
  let lostRequestId = '';

  it('lost response after commit: the SDK retries the same signed body with its own ClientToken and resolves with the replay; the handler ran once', async () => {
    const replayed: (string | undefined)[] = [];
    const scheduler = schedulerFor(proxy().port, 'AKIDALICE', replayed);
    const name = uniqueName('lost');
    const from = proxy().exchanges.length;
    proxy().dropAnswers = 1;
    const output = await scheduler.send(new CreateScheduleCommand(scheduleInput(name)));

    const attempts = proxy().since(from);
    assert.equal(attempts.length, 2, 'one lost attempt and one retry');
    assert.equal(attempts[0]!.dropped, true);
    assert.equal(attempts[0]!.status, 200, 'the first attempt committed and answered 200 (then the answer was lost)');
    assert.equal(attempts[1]!.status, 200);
    assert.equal(attempts[0]!.method, 'POST');
    assert.equal(attempts[0]!.path, `/schedules/${name}`);
    assert.equal(headerOf(attempts[0]!, 'content-type'), 'application/json', 'restJson1 sends plain application/json');
    assert.match(headerOf(attempts[0]!, 'authorization')!, /^AWS4-HMAC-SHA256 Credential=AKIDALICE\/\d{8}\/us-east-1\/scheduler\/aws4_request, /);
    assert.match(headerOf(attempts[0]!, 'amz-sdk-request')!, /^attempt=1; max=3$/);
    assert.match(headerOf(attempts[1]!, 'amz-sdk-request')!, /^attempt=2; max=3$/, 'the second attempt is the SDK retry');
    const token = tokenOf(attempts[0]!);
    assert.equal(typeof token, 'string');
    assert.match(token as string, UUID, 'the SDK filled ClientToken with a UUID');
    assert.equal(tokenOf(attempts[1]!), token, 'the retry carries the same ClientToken');
    assert.equal(attempts[1]!.body, attempts[0]!.body, 'the retry sends the same body bytes');

    const effects = await effectsNamed(name);
    assert.equal(effects.length, 1, 'the handler ran once');
    assert.equal(effects[0]!.principal, 'AKIDALICE', 'the principal is the SigV4 access key id');
    assert.deepEqual(effects[0]!.body, JSON.parse(attempts[0]!.body), 'the handler got the signed body as sent, token included');
    assert.equal(output.ScheduleArn, effects[0]!.arn, 'the SDK resolved with the first execution result');
    assert.equal(output.$metadata.httpStatusCode, 200);
    assert.equal(output.$metadata.requestId, effects[0]!.requestId, "the replay carries the first execution's x-amzn-RequestId");
    assert.equal(output.$metadata.attempts, 2);
    assert.deepEqual(replayed, ['true']);

    const log = JSON.stringify(await app.getJson<unknown[]>('/test/log'));
    assert.ok(log.length > 2, 'the guard logged its decisions');
    assert.ok(!log.includes(token as string), 'the raw ClientToken is not in the guard log');
    lostName = name;
    lostToken = token as string;
    lostRequestId = effects[0]!.requestId;
  });

  it("the SDK's token is the record's key: the same input sent with it as ClientToken is a replay", async () => {
    assert.notEqual(lostToken, '', 'needs the lost-response test');
    const replayed: (string | undefined)[] = [];
    const output = await schedulerFor(proxy().port, 'AKIDALICE', replayed).send(new CreateScheduleCommand({ ...scheduleInput(lostName), ClientToken: lostToken }));
    assert.deepEqual(replayed, ['true']);
    assert.equal(output.$metadata.requestId, lostRequestId);
    assert.equal((await effectsNamed(lostName)).length, 1, 'the handler did not run again');
  });

  it('a new command (the SDK makes a new ClientToken) is a new intent: the handler runs again', async () => {
    assert.notEqual(lostToken, '', 'needs the lost-response test');
    const replayed: (string | undefined)[] = [];
    const from = proxy().exchanges.length;
    const output = await schedulerFor(proxy().port, 'AKIDALICE', replayed).send(new CreateScheduleCommand(scheduleInput(lostName)));
    const [attempt] = proxy().since(from);
    assert.match(tokenOf(attempt!) as string, UUID);
    assert.notEqual(tokenOf(attempt!), lostToken, 'a new token');
    assert.deepEqual(replayed, ['false']);
    const effects = await effectsNamed(lostName);
    assert.equal(effects.length, 2, 'the handler ran for the new command');
    assert.equal(output.$metadata.requestId, effects[1]!.requestId);
  });

  it('a caller-given ClientToken reused with a different body is a 422 the SDK raises and does not retry', async () => {
    assert.notEqual(lostToken, '', 'needs the lost-response test');
    const from = proxy().exchanges.length;
    const before = (await effectsNamed(lostName)).length;
    const error = await schedulerFor(proxy().port, 'AKIDALICE')
      .send(new CreateScheduleCommand({ ...scheduleInput(lostName, '{"job":"weekly-report"}'), ClientToken: lostToken }))
      .then(
        () => assert.fail('a reused ClientToken with another body must not succeed'),
        (e: unknown) => e,
      );
    assert.ok(error instanceof SchedulerServiceException, `a SchedulerServiceException, got ${String(error)}`);
    assert.equal(error.name, 'IdempotencyKeyReusedException', 'named from x-amzn-ErrorType');
    assert.match(error.message, /already used for a different request/);
    assert.equal(error.$metadata.httpStatusCode, 422);
    assert.equal(error.$metadata.attempts, 1);
    const attempts = proxy().since(from);
    assert.equal(attempts.length, 1, 'no retry of a 422');
    assert.equal(attempts[0]!.status, 422);
    assert.equal((await effectsNamed(lostName)).length, before, 'the handler did not run for the mismatch');
  });

  it('another access key (principal) with the same ClientToken is another record', async () => {
    assert.notEqual(lostToken, '', 'needs the lost-response test');
    const replayed: (string | undefined)[] = [];
    await schedulerFor(proxy().port, 'AKIDBOB', replayed).send(new CreateScheduleCommand({ ...scheduleInput(lostName), ClientToken: lostToken }));
    assert.deepEqual(replayed, ['false']);
    const effects = await effectsNamed(lostName);
    assert.deepEqual(effects.map((e) => e.principal).sort(), ['AKIDALICE', 'AKIDALICE', 'AKIDBOB']);
  });
});
