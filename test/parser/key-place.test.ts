import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { loadDocument } from '../../src/parser/load.js';
import type { IdempotencyContract } from '../../src/parser/model.js';
import { validateContractValue } from '../../src/parser/schema.js';

/** The contract of POST /orders in a document whose operation says `contract` under the document defaults `defaults`. */
async function contractOf(contract: string, defaults = ''): Promise<{ contract: IdempotencyContract; position: (pointer: string) => { line: number; column: number } }> {
  const dir = await mkdtemp(path.join(tmpdir(), 'idemkit-key-place-'));
  try {
    const file = path.join(dir, 'openapi.yaml');
    await writeFile(
      file,
      `openapi: 3.1.0
info: { title: Orders, version: '1' }
${defaults}paths:
  /orders:
    post:
      operationId: createOrder
      responses: { '201': { description: created } }
      x-idempotency:
${contract}`,
    );
    const doc = await loadDocument(file);
    const op = doc.operations.find((operation) => operation.operationId === 'createOrder')!;
    return { contract: op.contract!, position: (pointer) => doc.position({ file, pointer }) };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

const OWN = '/paths/~1orders/post/x-idempotency';

describe('where the key travels (key.header, key.query, key.body)', () => {
  it('reads `key.query` and `key.body` into key.in and key.name, the rest of `key` kept', async () => {
    const query = (await contractOf('        key: { query: requestId, required: true, maxLength: 64 }\n')).contract;
    assert.deepEqual(query.schemaErrors, []);
    assert.deepEqual(query.key, { in: 'query', name: 'requestId', required: true, maxLength: 64, pattern: undefined });
    const body = (await contractOf('        key: { body: /ClientToken, pattern: "^[a-z0-9-]+$" }\n')).contract;
    assert.deepEqual(body.schemaErrors, []);
    assert.deepEqual(body.key, { in: 'body', name: '/ClientToken', required: undefined, maxLength: undefined, pattern: '^[a-z0-9-]+$' });
    const header = (await contractOf('        key: { maxLength: 64 }\n')).contract;
    assert.deepEqual([header.key.in, header.key.name], ['header', 'Idempotency-Key'], 'no place named: the default header');
  });

  it('two places in one key object are a schema error at the second, naming both', async () => {
    const { contract, position } = await contractOf('        key:\n          header: Idempotency-Key\n          body: /ClientToken\n');
    assert.deepEqual(
      contract.schemaErrors.map((error) => ({ pointer: error.at.pointer, message: error.message })),
      [{ pointer: `${OWN}/key/body`, message: 'x-idempotency.key names two places for the key (`header` and `body`): a request carries it in one — keep one of them' }],
    );
    assert.equal(position(`${OWN}/key/body`).line, 11, 'the line of `body:`');
    const queryAndBody = (await contractOf('        key: { query: requestId, body: /ClientToken }\n')).contract;
    assert.deepEqual(queryAndBody.schemaErrors.map((error) => error.at.pointer), [`${OWN}/key/body`]);
  });

  it("an operation's own place replaces the document defaults' (their bounds kept), and names two places only when it does", async () => {
    const defaults = 'x-idempotency:\n  key: { header: X-Key, maxLength: 80 }\n';
    const body = (await contractOf('        key: { body: /token }\n', defaults)).contract;
    assert.deepEqual(body.schemaErrors, [], 'the default header and the own body pointer are not two places');
    assert.deepEqual(body.key, { in: 'body', name: '/token', required: undefined, maxLength: 80, pattern: undefined });
    const query = (await contractOf('        key: { query: requestId, required: true }\n', defaults)).contract;
    assert.deepEqual([query.key.in, query.key.name, query.key.maxLength, query.key.required], ['query', 'requestId', 80, true]);
    const inherited = (await contractOf('        ttl: P1D\n', defaults)).contract;
    assert.deepEqual([inherited.key.in, inherited.key.name, inherited.key.maxLength], ['header', 'X-Key', 80], 'no own place: the defaults\'');
    const bodyDefaults = 'x-idempotency:\n  key: { body: /token }\n';
    const own = (await contractOf('        key: { header: Idempotency-Key }\n', bodyDefaults)).contract;
    assert.deepEqual([own.key.in, own.key.name, own.schemaErrors.length], ['header', 'Idempotency-Key', 0]);
  });

  it('the schema refuses a `body` that is not a JSON Pointer, and an empty `query`', () => {
    for (const body of ['ClientToken', '', '/a~2b']) {
      const errors = validateContractValue({ key: { body } });
      assert.deepEqual(errors.map((error) => error.path), [['key', 'body']], JSON.stringify(body));
    }
    for (const body of ['/ClientToken', '/meta/client_token', '/a~1b', '/items/0/id']) assert.deepEqual(validateContractValue({ key: { body } }), [], body);
    assert.deepEqual(validateContractValue({ key: { query: '' } }).map((error) => error.path), [['key', 'query']]);
    assert.deepEqual(validateContractValue({ key: { query: 'requestId' } }), []);
  });
});
