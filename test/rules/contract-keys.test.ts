import contractMissing from '../../rules/contract-missing.js';
import keyHeaderUndeclared from '../../rules/key-header-undeclared.js';
import keyOptional from '../../rules/key-optional.js';
import keyUnbounded from '../../rules/key-unbounded.js';
import retryOnUnsafe from '../../rules/retry-on-unsafe-without-contract.js';
import { CONTRACT, CREATE, payouts, payoutsTree, yamlOf, type Tree } from '../helpers/api-docs.js';
import { ruleTester } from '../helpers/rule-tester.js';

const post = (t: Tree): Tree => t.paths['/payouts'].post;
/** Drops the contract (and, with `keepKey: false`, the key header) of POST /payouts. */
const uncontracted = (keepKey = true) =>
  payouts((t) => {
    delete post(t)['x-idempotency'];
    if (!keepKey) post(t).parameters = [];
  });
/** A second operation, POST /refunds (createRefund), sharing the payout's parameter and responses. */
const addRefunds = (t: Tree): Tree => {
  t.paths['/refunds'] = { post: { ...structuredClone(post(t)), operationId: 'createRefund' } };
  return t.paths['/refunds'].post;
};

const swagger2 = (body: string) => `swagger: '2.0'
info: { title: Legacy payments, version: '1' }
paths:
  /payments:
    post:
      operationId: createPayment
${body}`;

ruleTester.run(contractMissing, {
  valid: [
    {
      name: 'an operation-level x-speakeasy-retries alone is retry-on-unsafe-without-contract\'s finding (one per fault)',
      document: payouts((t) => {
        delete post(t)['x-idempotency'];
        post(t).parameters = [];
        post(t)['x-speakeasy-retries'] = { strategy: 'backoff', statusCodes: ['5XX'] };
      }),
    },
    { name: 'the operation has a contract', document: payouts() },
    { name: 'x-idempotency: false says it is knowingly not idempotent', document: payouts((t) => (post(t)['x-idempotency'] = false)) },
    {
      name: 'a safe GET that takes a key header is not held to it',
      document: payouts((t) => (t.paths['/payouts/{id}'].get.parameters = [{ $ref: '#/components/parameters/IdempotencyKey' }])),
    },
    {
      name: 'X-Request-Id names a delivery, not an intent',
      document: payouts((t) => {
        delete post(t)['x-idempotency'];
        post(t).parameters = [{ name: 'X-Request-Id', in: 'header', schema: { type: 'string' } }];
      }),
    },
    {
      name: 'a PUT marked x-fern-idempotent: PUT invites repeats anyway, so a marker counts only where the config says PUT is unsafe',
      document: payouts((t) => {
        t.paths['/payouts'].put = { ...post(t), parameters: [], 'x-fern-idempotent': true };
        delete t.paths['/payouts'].put['x-idempotency'];
        delete t.paths['/payouts'].post;
      }),
    },
    {
      name: 'webhooks are requests the API sends, not operations',
      document: payouts((t) => {
        t.webhooks = { payoutPaid: { post: { parameters: [{ $ref: '#/components/parameters/IdempotencyKey' }], responses: { '200': { description: 'ok' } } } } };
      }),
    },
    { name: 'an unsafe operation with no key and no retry marker', document: uncontracted(false) },
    {
      name: 'request_id that names another request (Vonage verify check), not a retry key',
      document: payouts((t) => {
        delete post(t)['x-idempotency'];
        post(t).parameters = [];
        t.components.schemas.PayoutInput.properties.request_id = { type: 'string', description: 'The Verify request to check: the request_id you received from POST /verify.' };
        post(t).parameters = [{ name: 'request_id', in: 'query', schema: { type: 'string' } }];
      }),
    },
    {
      name: 'a read-only client_token (the server hands it out) and a deprecated idempotency_key',
      document: payouts((t) => {
        delete post(t)['x-idempotency'];
        post(t).parameters = [{ name: 'idempotency_key', in: 'query', deprecated: true, schema: { type: 'string' } }];
        t.components.schemas.PayoutInput.properties.client_token = { type: 'string', readOnly: true };
        t.components.schemas.PayoutInput.properties.ClientToken = { $ref: '#/components/schemas/DeprecatedToken' };
        t.components.schemas.DeprecatedToken = { type: 'string', deprecated: true };
      }),
    },
  ],
  invalid: [
    {
      name: 'Idempotency-Key header without a contract',
      document: uncontracted(),
      operation: 'createPayout',
      errors: [{ messageId: 'header', pointer: `${CREATE}/parameters/0`, message: /`Idempotency-Key`.*x-idempotency: false/ }],
    },
    {
      name: 'key header declared on the path item',
      document: payouts((t) => {
        delete post(t)['x-idempotency'];
        post(t).parameters = [];
        t.paths['/payouts'].parameters = [{ name: 'X-Idempotency-Key', in: 'header', schema: { type: 'string' } }];
      }),
      errors: [{ messageId: 'header', pointer: '/paths/~1payouts/parameters/0' }],
    },
    {
      name: 'PayPal-Request-Id header',
      document: payouts((t) => {
        delete post(t)['x-idempotency'];
        post(t).parameters = [{ name: 'PayPal-Request-Id', in: 'header', schema: { type: 'string' } }];
      }),
      errors: [{ messageId: 'header', pointer: `${CREATE}/parameters/0`, message: /PayPal-Request-Id/ }],
    },
    {
      name: 'a header named in settings.keyHeaders',
      document: payouts((t) => {
        delete post(t)['x-idempotency'];
        post(t).parameters = [{ name: 'X-Dedupe-Token', in: 'header', schema: { type: 'string' } }];
      }),
      settings: { keyHeaders: ['x-dedupe-token'] },
      errors: [{ messageId: 'header', pointer: `${CREATE}/parameters/0` }],
    },
    {
      name: 'PATCH is unsafe by default',
      document: payouts((t) => {
        t.paths['/payouts/{id}'].patch = { ...post(t), operationId: 'updatePayout' };
        delete t.paths['/payouts/{id}'].patch['x-idempotency'];
      }),
      operation: 'updatePayout',
      errors: [{ messageId: 'header', pointer: '/paths/~1payouts~1{id}/patch/parameters/0' }],
    },
    {
      name: 'settings.unsafeMethods adds PUT',
      document: payouts((t) => {
        t.paths['/payouts/{id}'].put = { ...post(t), operationId: 'replacePayout' };
        delete t.paths['/payouts/{id}'].put['x-idempotency'];
      }),
      settings: { unsafeMethods: ['post', 'patch', 'put'] },
      operation: 'replacePayout',
      errors: [{ messageId: 'header', pointer: '/paths/~1payouts~1{id}/put/parameters/0' }],
    },
    {
      name: 'idempotency_key in the JSON body',
      document: payouts((t) => {
        delete post(t)['x-idempotency'];
        post(t).parameters = [];
        t.components.schemas.PayoutInput.properties.idempotency_key = { type: 'string' };
      }),
      errors: [{ messageId: 'body', pointer: '/components/schemas/PayoutInput/properties/idempotency_key', message: /body field `idempotency_key` .*add `x-idempotency` with `key: \{ body: \/idempotency_key \}`.*or write `x-idempotency: false`/ }],
    },
    {
      name: 'ClientToken inherited through allOf',
      document: payouts((t) => {
        delete post(t)['x-idempotency'];
        post(t).parameters = [];
        t.components.schemas.Tokened = { type: 'object', properties: { ClientToken: { type: 'string' } } };
        const input = t.components.schemas.PayoutInput;
        t.components.schemas.PayoutInput = { allOf: [{ $ref: '#/components/schemas/Tokened' }, input] };
      }),
      errors: [{ messageId: 'body', pointer: '/components/schemas/Tokened/properties/ClientToken', message: /ClientToken/ }],
    },
    {
      name: 'request_id as a query parameter whose description speaks of retries (Google Compute style)',
      document: payouts((t) => {
        delete post(t)['x-idempotency'];
        post(t).parameters = [
          {
            name: 'requestId',
            in: 'query',
            description: 'Specify a unique request ID so that if you must retry your request, the server will ignore it if it has already been completed.',
            schema: { type: 'string' },
          },
        ];
      }),
      errors: [{ messageId: 'parameter', pointer: `${CREATE}/parameters/0`, message: /query parameter `requestId` .*add `x-idempotency` with `key: \{ query: requestId \}`.*or write `x-idempotency: false`/ }],
    },
    {
      name: 'a PUT that takes a key header: the key says repeats are deduplicated, whatever the method',
      document: payouts((t) => {
        t.paths['/payouts'].put = { ...post(t), operationId: 'putPayout' };
        delete t.paths['/payouts'].put['x-idempotency'];
        delete t.paths['/payouts'].post;
      }),
      errors: [{ messageId: 'header', pointer: '/paths/~1payouts/put/parameters/0', operations: ['putPayout'] }],
    },
    {
      name: 'a DELETE whose requestId says a second request with the same id is ignored (Google Dataproc style)',
      document: payouts((t) => {
        t.paths['/payouts/{id}'].delete = {
          operationId: 'deletePayout',
          parameters: [
            {
              name: 'requestId',
              in: 'query',
              description: 'Optional. A unique ID used to identify the request. If the server receives two DeleteClusterRequests with the same id, then the second request will be ignored.',
              schema: { type: 'string' },
            },
          ],
          responses: { '204': { description: 'deleted' } },
        };
      }),
      errors: [{ messageId: 'parameter', pointer: '/paths/~1payouts~1{id}/delete/parameters/0', operations: ['deletePayout'] }],
    },
    {
      name: 'a PUT marked x-fern-idempotent once the config counts PUT unsafe',
      document: payouts((t) => {
        t.paths['/payouts'].put = { ...post(t), operationId: 'putPayout', parameters: [], 'x-fern-idempotent': true };
        delete t.paths['/payouts'].put['x-idempotency'];
        delete t.paths['/payouts'].post;
      }),
      settings: { unsafeMethods: ['post', 'put'] },
      errors: [{ messageId: 'extension', pointer: '/paths/~1payouts/put/x-fern-idempotent' }],
    },
    ...[
      'A unique request ID for this message. Specifying an existing request ID returns the message created with that ID instead of creating a new message.',
      "To ensure that requests don't run multiple times, specify a unique ID for each request.",
      'Request identification of the change. Only the first change made with each `requestId` will be effective on a given order.',
      'If an ID provided is the same as for the previous request, the request is ignored.',
    ].map((description) => ({
      name: `requestId described as a dedupe key in other words: "${description.slice(0, 50)}…"`,
      document: payouts((t) => {
        delete post(t)['x-idempotency'];
        post(t).parameters = [{ name: 'requestId', in: 'query', description, schema: { type: 'string' } }];
      }),
      errors: [{ messageId: 'parameter', pointer: `${CREATE}/parameters/0` }],
    })),
    {
      name: 'a ClientToken in a text/xml body (EC2-style): the message does not propose a body key the guard cannot read',
      document: payouts((t) => {
        delete post(t)['x-idempotency'];
        post(t).parameters = [];
        t.components.schemas.PayoutInput.properties.ClientToken = { type: 'string' };
        post(t).requestBody.content = { 'text/xml': { schema: { $ref: '#/components/schemas/PayoutInput' } } };
      }),
      errors: [{ messageId: 'bodyUnreadable', pointer: '/components/schemas/PayoutInput/properties/ClientToken', message: /`text\/xml` request body .* accept the key in a header/ }],
    },
    {
      name: 'x-fern-idempotent marks it idempotent',
      document: payouts((t) => {
        delete post(t)['x-idempotency'];
        post(t).parameters = [];
        post(t)['x-fern-idempotent'] = true;
      }),
      errors: [{ messageId: 'extension', pointer: `${CREATE}/x-fern-idempotent` }],
    },
    {
      name: 'two operations that share the key parameter are reported one by one',
      document: payouts((t) => {
        delete post(t)['x-idempotency'];
        addRefunds(t);
      }),
      errors: [
        { messageId: 'header', pointer: `${CREATE}/parameters/0`, operations: ['createPayout'] },
        { messageId: 'header', pointer: '/paths/~1refunds/post/parameters/0', operations: ['createRefund'] },
      ],
    },
    {
      name: 'Swagger 2.0 body parameter with idempotencyKey',
      document: swagger2(`      parameters:
        - in: body
          name: payment
          schema: { $ref: '#/definitions/Payment' }
      responses: { '201': { description: created } }
definitions:
  Payment:
    type: object
    properties:
      amount: { type: integer }
      idempotencyKey: { type: string }
`),
      errors: [{ messageId: 'body', pointer: '/definitions/Payment/properties/idempotencyKey', message: /idempotencyKey/ }],
    },
    {
      name: 'Swagger 2.0 form field client_token',
      document: swagger2(`      consumes: [application/x-www-form-urlencoded]
      parameters:
        - { in: formData, name: amount, type: integer }
        - { in: formData, name: client_token, type: string }
      responses: { '201': { description: created } }
`),
      errors: [{ messageId: 'parameter', pointer: '/paths/~1payments/post/parameters/1', message: /form parameter `client_token` .*`key: \{ body: \/client_token \}`/ }],
    },
    {
      name: 'Swagger 2.0 Cko-Idempotency-Key header',
      document: swagger2(`      parameters:
        - { in: header, name: Cko-Idempotency-Key, type: string }
      responses: { '201': { description: created } }
`),
      errors: [{ messageId: 'header', pointer: '/paths/~1payments/post/parameters/0' }],
    },
  ],
});

ruleTester.run(retryOnUnsafe, {
  valid: [
    { name: 'a contracted operation may be retried', document: payouts((t) => (post(t)['x-speakeasy-retries'] = { strategy: 'backoff' })) },
    {
      name: 'a key without a contract is contract-missing\'s finding',
      document: payouts((t) => {
        delete post(t)['x-idempotency'];
        post(t)['x-speakeasy-retries'] = { strategy: 'backoff' };
      }),
    },
    {
      name: 'retries switched off on the operation under a document-level policy',
      document: payouts((t) => {
        t['x-speakeasy-retries'] = { strategy: 'backoff' };
        delete post(t)['x-idempotency'];
        post(t).parameters = [];
        delete post(t).responses['503'];
        post(t)['x-speakeasy-retries'] = { strategy: 'none' };
      }),
    },
    {
      name: 'a GET may be retried',
      document: payouts((t) => (t.paths['/payouts/{id}'].get['x-speakeasy-retries'] = { strategy: 'backoff' })),
    },
    {
      name: 'a 429 with Retry-After is rate limiting, not a 5xx',
      document: payouts((t) => {
        delete post(t)['x-idempotency'];
        post(t).parameters = [];
        delete post(t).responses['503'];
        post(t).responses['429'] = { $ref: '#/components/responses/Conflict' };
      }),
    },
  ],
  invalid: [
    {
      name: 'operation-level retries on an uncontracted POST (an error, as at document level)',
      document: payouts((t) => {
        delete post(t)['x-idempotency'];
        post(t).parameters = [];
        delete post(t).responses['503'];
        post(t)['x-speakeasy-retries'] = { strategy: 'backoff', statusCodes: ['5XX'] };
      }),
      errors: [{ messageId: 'operationRetry', pointer: `${CREATE}/x-speakeasy-retries` }],
    },
    {
      name: 'document-level retries reach an uncontracted POST',
      document: payouts((t) => {
        t['x-speakeasy-retries'] = { strategy: 'backoff', statusCodes: ['5XX'] };
        delete post(t)['x-idempotency'];
        post(t).parameters = [];
        delete post(t).responses['503'];
      }),
      operation: 'createPayout',
      errors: [{ messageId: 'documentRetry', pointer: CREATE }],
    },
    {
      name: 'x-idempotency: false with operation-level retries',
      document: payouts((t) => {
        post(t)['x-idempotency'] = false;
        post(t)['x-speakeasy-retries'] = { strategy: 'backoff' };
      }),
      errors: [{ messageId: 'optedOut', pointer: `${CREATE}/x-speakeasy-retries` }],
    },
    {
      name: 'x-idempotency: false under document-level retries',
      document: payouts((t) => {
        t['x-speakeasy-retries'] = { strategy: 'backoff' };
        post(t)['x-idempotency'] = false;
      }),
      errors: [{ messageId: 'optedOut', pointer: CONTRACT }],
    },
    {
      name: 'a shared 503 with Retry-After on two uncontracted POSTs is one finding at the header',
      document: payouts((t) => {
        delete post(t)['x-idempotency'];
        post(t).parameters = [];
        addRefunds(t);
      }),
      errors: [{ messageId: 'retryAfter', pointer: '/components/headers/RetryAfter', operations: ['createPayout', 'createRefund'] }],
    },
  ],
});

ruleTester.run(keyHeaderUndeclared, {
  valid: [
    { name: 'the key header is a declared, required header parameter', document: payouts() },
    {
      name: 'declared on the path item, name in another case',
      document: payouts((t, c) => {
        c.key.header = 'idempotency-key';
        t.paths['/payouts'].parameters = post(t).parameters;
        post(t).parameters = [];
      }),
    },
    { name: 'x-idempotency: false is not checked', document: payouts((t) => ((post(t)['x-idempotency'] = false), (post(t).parameters = []))) },
  ],
  invalid: [
    {
      name: 'the contract names a header the operation does not declare',
      document: payouts((_t, c) => (c.key.header = 'Idempotency-Token')),
      errors: [{ messageId: 'undeclared', pointer: `${CONTRACT}/key/header`, message: /`Idempotency-Token`.*did you mean `Idempotency-Key`/ }],
    },
    {
      name: 'the default header, undeclared, points at the key object',
      document: payouts((t, c) => {
        delete c.key.header;
        post(t).parameters = [];
      }),
      errors: [{ messageId: 'undeclared', pointer: `${CONTRACT}/key`, message: /`Idempotency-Key`/ }],
    },
    {
      name: 'a shared parameter that says required: false, used by two operations',
      document: payouts((t) => {
        t.components.parameters.IdempotencyKey.required = false;
        addRefunds(t);
      }),
      errors: [
        {
          messageId: 'requiredMismatch',
          pointer: '/components/parameters/IdempotencyKey/required',
          operations: ['createPayout', 'createRefund'],
        },
      ],
    },
    {
      name: 'a parameter without required disagrees with the contract default',
      document: payouts((t, c) => {
        delete t.components.parameters.IdempotencyKey.required;
        delete c.key.required;
      }),
      errors: [{ messageId: 'requiredMismatch', pointer: '/components/parameters/IdempotencyKey', message: /required: false.*key.required: true/ }],
    },
    {
      name: "a body key field beside the key header (Square's idempotency_key): clients that send it there get 400",
      document: payouts((t) => {
        t.components.schemas.PayoutInput.properties.idempotency_key = { type: 'string', maxLength: 45 };
      }),
      errors: [
        {
          messageId: 'bodyKey',
          pointer: '/components/schemas/PayoutInput/properties/idempotency_key',
          message: /takes an idempotency key in the request body field `idempotency_key`, and the guard reads the key from `Idempotency-Key` only/,
        },
      ],
    },
  ],
});

ruleTester.run(keyOptional, {
  valid: [
    { name: 'required: true', document: payouts() },
    { name: 'required left to the default', document: payouts((_t, c) => delete c.key.required) },
  ],
  invalid: [
    { name: 'required: false on the operation', document: payouts((_t, c) => (c.key.required = false)), errors: [{ messageId: 'optional', pointer: `${CONTRACT}/key/required` }] },
    {
      name: 'a path item $ref to another file: the finding points into that file',
      document: payouts((t) => (t.paths['/payouts'] = { $ref: 'paths/payouts.yaml' })),
      files: {
        'paths/payouts.yaml': yamlOf({
          post: {
            ...payoutsTree().paths['/payouts'].post,
            parameters: [{ name: 'Idempotency-Key', in: 'header', required: false, schema: { type: 'string', maxLength: 255 } }],
            requestBody: { required: true, content: { 'application/json': { schema: { type: 'object' } } } },
            responses: { '201': { description: 'created' } },
            'x-idempotency': { key: { required: false } },
          },
        }),
      },
      operation: 'createPayout',
      errors: [{ messageId: 'optional', pointer: '/post/x-idempotency/key/required', file: 'paths/payouts.yaml' }],
    },
    {
      name: 'required: false in the document defaults reaches two operations once',
      document: payouts((t, c) => {
        delete c.key.required;
        t['x-idempotency'] = { key: { required: false } };
        addRefunds(t);
      }),
      errors: [{ messageId: 'optional', pointer: '/x-idempotency/key/required', operations: ['createPayout', 'createRefund'] }],
    },
  ],
});

ruleTester.run(keyUnbounded, {
  valid: [
    { name: 'maxLength in the contract', document: payouts() },
    { name: 'a pattern in the contract', document: payouts((_t, c) => ((c.key.pattern = '^[A-Za-z0-9+/=-]{1,64}$'), delete c.key.maxLength)) },

    {
      name: "a UUID-only pattern on OASIS Repeatability-Request-ID (its clients send UUIDs)",
      document: payouts((t, c) => {
        c.key = { header: 'Repeatability-Request-ID', required: true, maxLength: 36, pattern: '[0-9a-f-]{36}' };
        t.components.parameters.IdempotencyKey = { name: 'Repeatability-Request-ID', in: 'header', required: true, schema: { type: 'string', maxLength: 36 } };
      }),
    },
    { name: 'maxLength on the header parameter schema', document: payouts((_t, c) => delete c.key.maxLength) },
    {
      name: "OASIS Repeatability-Request-ID bounded at a UUID's 36 characters (Azure SDKs send UUIDs)",
      document: payouts((t, c) => {
        c.key = { header: 'Repeatability-Request-ID', required: true, maxLength: 36 };
        t.components.parameters.IdempotencyKey = { name: 'Repeatability-Request-ID', in: 'header', required: true, schema: { type: 'string', maxLength: 36 } };
      }),
    },
    {
      name: 'a header declared format: uuid with maxLength 36, the contract bounding it the same',
      document: payouts((t, c) => {
        c.key.maxLength = 36;
        Object.assign(t.components.parameters.IdempotencyKey.schema, { format: 'uuid', maxLength: 36 });
      }),
    },
    {
      name: 'format: uuid on the header parameter',
      document: payouts((t, c) => {
        delete c.key.maxLength;
        t.components.parameters.IdempotencyKey.schema = { type: 'string', format: 'uuid' };
      }),
    },
    {
      // key-header-undeclared reports it, and its fix declares the bound too: one finding per fault.
      name: 'no header parameter at all (and no bound in the contract)',
      document: payouts((t, c) => {
        delete c.key.maxLength;
        t.paths['/payouts'].post.parameters = [];
      }),
    },
  ],
  invalid: [
    {
      name: 'no bound anywhere',
      document: payouts((t, c) => {
        delete c.key.maxLength;
        t.components.parameters.IdempotencyKey.schema = { type: 'string' };
      }),
      errors: [{ messageId: 'unbounded', pointer: `${CONTRACT}/key` }],
    },
    {
      name: 'Swagger 2.0 header without maxLength',
      document: `swagger: '2.0'
info: { title: t, version: '1' }
paths:
  /payments:
    post:
      parameters:
        - { in: header, name: Idempotency-Key, type: string, required: true }
      responses: { '201': { description: created } }
      x-idempotency: { key: { required: true } }
`,
      errors: [{ messageId: 'unbounded', pointer: '/paths/~1payments/post/x-idempotency/key' }],
    },
    {
      // The pattern decides what the guard takes (36 characters at most): "accepts up to 64 anyway" would be untrue.
      name: 'a maxLength below 64 beside a UUID pattern: only that the pattern refuses SDK keys',
      document: payouts((t, c) => {
        Object.assign(c.key, { maxLength: 36, pattern: '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' });
        t.components.parameters.IdempotencyKey.schema.maxLength = 36;
      }),
      errors: [{ messageId: 'patternRejectsSdkKeys', pointer: `${CONTRACT}/key/pattern` }],
    },
    {
      name: 'a maxLength below 64 beside a pattern that takes SDK keys: the guard takes 64 anyway',
      document: payouts((_t, c) => Object.assign(c.key, { maxLength: 20, pattern: '^[A-Za-z0-9+/=-]+$' })),
      errors: [{ messageId: 'tooShort', pointer: `${CONTRACT}/key/maxLength`, message: /accepts up to 64 anyway/ }],
    },
    {
      name: 'a contract maxLength below 64 rejects SDK keys',
      document: payouts((_t, c) => (c.key.maxLength = 20)),
      errors: [{ messageId: 'tooShort', pointer: `${CONTRACT}/key/maxLength`, message: /the contract's `maxLength: 20` is shorter than the keys SDKs generate .*the generated guard accepts up to 64 anyway/ }],
    },
    {
      name: 'a header parameter maxLength below 64 (the contract sets none)',
      document: payouts((t, c) => {
        delete c.key.maxLength;
        t.components.parameters.IdempotencyKey.schema.maxLength = 40;
      }),
      errors: [{ messageId: 'tooShort', pointer: '/components/parameters/IdempotencyKey/schema/maxLength', message: /the generated guard accepts up to 255 anyway/ }],
    },
    {
      name: 'a UUID key (a header declared format: uuid) shorter than a UUID',
      document: payouts((t, c) => {
        delete c.key.maxLength;
        Object.assign(t.components.parameters.IdempotencyKey.schema, { format: 'uuid', maxLength: 32 });
      }),
      errors: [{ messageId: 'tooShortForUuid', pointer: '/components/parameters/IdempotencyKey/schema/maxLength', message: /shorter than a UUID \(36 characters\)/ }],
    },
    {
      name: 'a UUID-only pattern rejects the keys SDKs generate (stainless-node-retry-<uuid>, 57 characters)',
      document: payouts((_t, c) => (c.key.pattern = '^[0-9a-fA-F-]{36}$')),
      errors: [{ messageId: 'patternRejectsSdkKeys', pointer: `${CONTRACT}/key/pattern`, message: /`key.pattern` rejects keys SDKs generate .*stainless-node-retry-<uuid>/ }],
    },
    {
      name: "a pattern without + and / rejects @mollie/api-client's base64 keys (about half of them), though it takes <sdk>-retry-<uuid> keys",
      document: payouts((_t, c) => (c.key.pattern = '^[A-Za-z0-9._:-]+$')),
      errors: [{ messageId: 'patternRejectsSdkKeys', pointer: `${CONTRACT}/key/pattern`, message: /base64 with `\+` and `\/`.*\^\[A-Za-z0-9\._:\+\/=-\]\+\$/ }],
    },
    {
      name: 'the contract and the header parameter disagree on maxLength',
      document: payouts((_t, c) => (c.key.maxLength = 128)),
      errors: [{ messageId: 'disagrees', pointer: `${CONTRACT}/key/maxLength`, message: /`key.maxLength` is 128 but the header parameter `Idempotency-Key` declares `maxLength: 255`/ }],
    },
  ],
});
