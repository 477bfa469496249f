/**
 * A client generated from a Stripe- and Twilio-shaped document (form bodies with and without `encoding`
 * deepObject, deepObject query parameters), compiled with tsc --strict and called with a recording `fetch`:
 * the bytes it sends are the bytes stripe-node sends for the same call.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import Stripe from 'stripe';
import { generateClient } from '../../src/generate/client/index.js';
import { writeOutput } from '../../src/generate/output.js';
import { loadDocument } from '../../src/parser/index.js';
import { contractYaml } from './contracts.js';
import { prepareTsProject, runTsc } from '../generate/tsc.js';

const SPEC = `openapi: 3.0.0
info: { title: Stripe- and Twilio-shaped forms, version: '1' }
servers: [{ url: 'https://api.stripe.com' }]
paths:
  /v1/checkout/sessions:
    post:
      operationId: postCheckoutSessions
      parameters:
        - { name: Idempotency-Key, in: header, required: true, schema: { type: string, maxLength: 255 } }
      requestBody:
        content:
          application/x-www-form-urlencoded:
            encoding:
              line_items: { style: deepObject, explode: true }
              shipping: { style: deepObject, explode: true }
              expand: { style: deepObject, explode: true }
              metadata: { style: deepObject, explode: true }
            schema:
              type: object
              properties:
                mode: { type: string }
                line_items: { type: array, items: { type: object, properties: { price: { type: string }, quantity: { type: integer } } } }
                shipping: { type: object, properties: { name: { type: string }, address: { type: object, properties: { city: { type: string }, line1: { type: string } } } } }
                expand: { type: array, items: { type: string } }
                metadata: { type: object, additionalProperties: { type: string } }
      responses:
        '200': { description: ok }
      x-idempotency:
${contractYaml('        ')}
  /v1/customers:
    get:
      operationId: getCustomers
      parameters:
        - { name: expand, in: query, style: deepObject, explode: true, schema: { type: array, items: { type: string } } }
        - { name: created, in: query, style: deepObject, explode: true, schema: { type: object, properties: { gte: { type: integer }, lt: { type: integer } } } }
        - { name: limit, in: query, schema: { type: integer } }
      responses:
        '200': { description: ok }
  /2010-04-01/Accounts/{AccountSid}/Messages.json:
    post:
      operationId: createMessage
      parameters:
        - { name: AccountSid, in: path, required: true, schema: { type: string } }
      requestBody:
        content:
          application/x-www-form-urlencoded:
            schema:
              type: object
              properties:
                To: { type: string }
                Body: { type: string }
                MediaUrl: { type: array, items: { type: string, format: uri } }
      responses:
        '201': { description: created }
`;

/** One request as the mock `fetch` got it. */
interface Sent {
  readonly method: string;
  readonly url: string;
  readonly contentType: string | null;
  readonly body: string;
  readonly key: string | null;
}

/** The generated module's surface this test uses. */
interface FormClient {
  createClient(options: { runtime: { fetch: (url: string, init: RequestInit) => Promise<Response> } }): Record<string, (input: unknown) => Promise<{ kind?: string; status?: number }>>;
}

/** A `fetch` that records each request and answers `{}` with `status`. */
function recordingFetch(sent: Sent[]): (url: string | URL | Request, init?: RequestInit) => Promise<Response> {
  return async (url, init = {}) => {
    sent.push({
      method: init.method ?? 'GET',
      url: String(url),
      contentType: new Headers(init.headers).get('content-type'),
      body: init.body === undefined || init.body === null ? '' : String(init.body),
      key: new Headers(init.headers).get('idempotency-key'),
    });
    const status = String(url).includes('/2010-04-01/') ? 201 : 200;
    return new Response('{"object":"list","data":[],"has_more":false,"url":"/v1/customers"}', { status, headers: { 'content-type': 'application/json', 'request-id': 'req_1' } });
  };
}

describe('generated client: form bodies and deepObject queries end to end (Stripe and Twilio shapes, mock fetch)', function () {
  this.timeout(120_000);

  let dir: string;
  let module: FormClient;

  before(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'idemkit-client-form-'));
    writeFileSync(path.join(dir, 'forms.yaml'), SPEC);
    await writeOutput(path.join(dir, 'src', 'client'), generateClient(await loadDocument(path.join(dir, 'forms.yaml')), { source: 'forms.yaml' }));
    writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ type: 'module', private: true }));
    const tsconfig = prepareTsProject(dir, { outDir: path.join(dir, 'out'), include: ['src/**/*.ts'] });
    assert.equal(await runTsc(tsconfig), '', 'the generated client compiles under tsc --strict');
    module = (await import(pathToFileURL(path.join(dir, 'out', 'src', 'client', 'index.js')).href)) as FormClient;
  });

  after(() => {
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  });

  it('sends exactly what stripe-node sends for the same checkout session and customer list', async () => {
    const ours: Sent[] = [];
    const api = module.createClient({ runtime: { fetch: recordingFetch(ours) } });
    const session = {
      mode: 'payment',
      line_items: [
        { price: 'price_1', quantity: 2 },
        { price: 'price_2', quantity: 1 },
      ],
      shipping: { name: 'A B', address: { city: 'Paris', line1: '1 rue' } },
      expand: ['customer', 'payment_intent'],
      metadata: { order_id: '6735', note: "Bob's (30th)!*" },
    };
    const list = { expand: ['data.default_source', 'data.sources'], created: { gte: 1700000000 }, limit: 3 };
    assert.equal((await api['postCheckoutSessions']!({ headers: { 'Idempotency-Key': 'k1' }, body: session })).kind, 'completed');
    assert.equal(ours[0]!.key, 'k1', 'the caller\'s own key is the intent\'s, not replaced by a fresh one');
    // A call's header wins over the client's in any letter case, as it does in the same one.
    const layered: Sent[] = [];
    const withDefault = module.createClient({ runtime: { fetch: recordingFetch(layered) }, headers: { 'idempotency-key': 'client-43' } } as Parameters<FormClient['createClient']>[0]);
    await withDefault['postCheckoutSessions']!({ headers: { 'Idempotency-Key': 'call-44' }, body: session });
    await withDefault['postCheckoutSessions']!({ body: session });
    assert.deepEqual(layered.map((sent) => sent.key), ['call-44', 'client-43']);
    assert.equal((await api['getCustomers']!({ query: list })).status, 200);

    const theirs: Sent[] = [];
    const stripe = new Stripe('sk_test_x', { httpClient: Stripe.createFetchHttpClient(recordingFetch(theirs) as typeof fetch), maxNetworkRetries: 0, telemetry: false });
    // stripe-node's types know more about these calls than this test needs: its encoding is what is compared.
    await stripe.checkout.sessions.create(session as Stripe.Checkout.SessionCreateParams);
    await stripe.customers.list(list);

    assert.deepEqual(
      ours.map(({ method, url, contentType, body }) => ({ method, url, contentType, body })),
      [
        {
          method: 'POST',
          url: 'https://api.stripe.com/v1/checkout/sessions',
          contentType: 'application/x-www-form-urlencoded',
          body:
            'mode=payment&line_items[0][price]=price_1&line_items[0][quantity]=2&line_items[1][price]=price_2&line_items[1][quantity]=1' +
            '&shipping[name]=A%20B&shipping[address][city]=Paris&shipping[address][line1]=1%20rue&expand[0]=customer&expand[1]=payment_intent&metadata[order_id]=6735' +
            '&metadata[note]=Bob%27s%20%2830th%29%21%2A',
        },
        {
          method: 'GET',
          url: 'https://api.stripe.com/v1/customers?expand[0]=data.default_source&expand[1]=data.sources&created[gte]=1700000000&limit=3',
          contentType: null,
          body: '',
        },
      ],
    );
    assert.deepEqual(
      theirs.map(({ url, body }) => ({ url, body })),
      ours.map(({ url, body }) => ({ url, body })),
      'stripe-node writes the same body and query',
    );
  });

  it('Twilio createMessage (no encoding): MediaUrl repeated, as twilio-node sends it', async () => {
    const sent: Sent[] = [];
    const api = module.createClient({ runtime: { fetch: recordingFetch(sent) } });
    const answer = await api['createMessage']!({
      path: { AccountSid: 'AC1' },
      body: { To: '+15551234567', Body: 'hi', MediaUrl: ['https://a.example/1.png', 'https://a.example/2.png'] },
    });
    assert.equal(answer.status, 201);
    assert.equal(sent.length, 1);
    assert.equal(sent[0]!.url, 'https://api.stripe.com/2010-04-01/Accounts/AC1/Messages.json');
    assert.equal(sent[0]!.body, 'To=%2B15551234567&Body=hi&MediaUrl=https%3A%2F%2Fa.example%2F1.png&MediaUrl=https%3A%2F%2Fa.example%2F2.png');
  });
});
