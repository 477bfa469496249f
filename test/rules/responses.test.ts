import replayHeaderUndeclared from '../../rules/replay-header-undeclared.js';
import replayUndefined from '../../rules/replay-undefined.js';
import retryAfterUndeclared from '../../rules/retry-after-undeclared.js';
import stateResponseMissing from '../../rules/state-response-missing.js';
import stateStatusInvalid from '../../rules/state-status-invalid.js';
import { CONTRACT, CREATE, payouts, type Tree } from '../helpers/api-docs.js';
import { ruleTester } from '../helpers/rule-tester.js';

const post = (t: Tree): Tree => t.paths['/payouts'].post;
const refunds = (t: Tree) => {
  t.paths['/refunds'] = { post: { ...structuredClone(post(t)), operationId: 'createRefund' } };
};

const swagger2 = (responses: string) => `swagger: '2.0'
info: { title: Legacy, version: '1' }
securityDefinitions: { key: { type: apiKey, in: header, name: X-Api-Key } }
security: [{ key: [] }]
paths:
  /transfers:
    post:
      operationId: createTransfer
      parameters:
        - { in: header, name: Idempotency-Key, type: string, required: true, maxLength: 255 }
      responses:
${responses}
      x-idempotency:
        responses:
          replay: { header: Idempotent-Replayed }
          inProgress: { status: 409 }
responses:
  Busy:
    description: in progress
    headers: { Retry-After: { type: integer } }
`;

ruleTester.run(stateResponseMissing, {
  valid: [
    { name: 'every state answered and documented', document: payouts() },
    { name: 'a status of the wrong type is contract-invalid\'s finding only', document: payouts((_t, c) => (c.responses.missingKey.status = '400')) },
    {
      name: 'a 4XX range documents the key errors',
      document: payouts((t) => {
        post(t).responses['4XX'] = post(t).responses['400'];
        delete post(t).responses['400'];
      }),
    },
    { name: 'an optional key needs no missingKey answer', document: payouts((_t, c) => ((c.key.required = false), delete c.responses.missingKey)) },
    {
      name: 'an OASIS key header with its 412 documented',
      document: payouts((t, c) => {
        c.key.header = 'Repeatability-Request-ID';
        post(t).responses['412'] = post(t).responses['422'];
      }),
    },
  ],
  invalid: [
    {
      name: 'mismatch without a status',
      document: payouts((_t, c) => delete c.responses.mismatch),
      errors: [{ messageId: 'noStatus', pointer: `${CONTRACT}/responses`, message: /`mismatch`.*status: 422/ }],
    },
    {
      name: 'a status the operation does not document',
      document: payouts((t) => delete post(t).responses['503']),
      errors: [{ messageId: 'undocumented', pointer: `${CONTRACT}/responses/storeUnavailable/status`, message: /503, which is not a documented response of POST \/payouts \(createPayout\)/ }],
    },
    {
      name: 'a status from the defaults: the finding at the defaults names the operation that does not document it',
      document: payouts((t, c) => {
        t['x-idempotency'] = { responses: { mismatch: { status: 422 } } };
        delete c.responses.mismatch;
        delete post(t).responses['422'];
      }),
      errors: [{ messageId: 'undocumented', pointer: '/x-idempotency/responses/mismatch/status', operations: ['createPayout'], message: /not a documented response of the operation: add a `'422'` response/ }],
    },
    {
      name: 'default does not document a state',
      document: payouts((t) => {
        post(t).responses.default = post(t).responses['422'];
        delete post(t).responses['422'];
      }),
      errors: [{ messageId: 'undocumented', pointer: `${CONTRACT}/responses/mismatch/status`, message: /POST \/payouts \(createPayout\) \(its `default` response does not say which status means this state\): add a `'422'` response/ }],
    },
    {
      name: 'an OASIS key header (Repeatability-Request-ID) without a documented 412',
      document: payouts((_t, c) => (c.key.header = 'Repeatability-Request-ID')),
      errors: [{ messageId: 'repeatExpired', pointer: `${CONTRACT}/key/header`, message: /follows OASIS Repeatable Requests.*add a `'412'` response/ }],
    },
    {
      // Findings at one node are ordered by message, so the states come out alphabetically.
      name: 'no state answered lists every state',
      document: payouts((_t, c) => (c.responses = { replay: { header: 'Idempotent-Replayed' } })),
      errors: ['abandoned', 'inProgress', 'invalidKey', 'mismatch', 'missingKey', 'storeUnavailable'].map((state) => ({
        messageId: 'noStatus',
        pointer: `${CONTRACT}/responses`,
        message: new RegExp(`\`${state}\``),
      })),
    },
  ],
});

ruleTester.run(stateStatusInvalid, {
  valid: [
    { name: 'the design\'s statuses', document: payouts() },
    { name: '428 for a missing key is a client error', document: payouts((_t, c) => (c.responses.missingKey.status = 428)) },
  ],
  invalid: [
    {
      name: 'mismatch answered 409',
      document: payouts((_t, c) => (c.responses.mismatch.status = 409)),
      errors: [{ messageId: 'mismatchConflict', pointer: `${CONTRACT}/responses/mismatch/status` }],
    },
    {
      name: 'mismatch answered 200',
      document: payouts((_t, c) => (c.responses.mismatch.status = 200)),
      errors: [{ messageId: 'mismatchSuccess', pointer: `${CONTRACT}/responses/mismatch/status` }],
    },
    {
      // The article review's: a 503 mismatch (every SDK retries it) and a 201 for a request abandoned mid-run.
      name: 'mismatch answered 503, abandoned answered 201',
      document: payouts((_t, c) => {
        c.responses.mismatch.status = 503;
        c.responses.abandoned.status = 201;
      }),
      errors: [
        { messageId: 'mismatchRetryable', pointer: `${CONTRACT}/responses/mismatch/status`, message: /answers 503/ },
        { messageId: 'abandonedNotError', pointer: `${CONTRACT}/responses/abandoned/status`, message: /answers 201/ },
      ],
    },
    {
      name: 'mismatch answered 429',
      document: payouts((_t, c) => (c.responses.mismatch.status = 429)),
      errors: [{ messageId: 'mismatchRetryable', pointer: `${CONTRACT}/responses/mismatch/status` }],
    },
    {
      name: 'inProgress answered 503, invalidKey answered 409, storeUnavailable answered 400',
      document: payouts((_t, c) => {
        c.responses.inProgress.status = 503;
        c.responses.invalidKey.status = 409;
        c.responses.storeUnavailable.status = 400;
      }),
      errors: [
        { messageId: 'keyError', pointer: `${CONTRACT}/responses/invalidKey/status` },
        { messageId: 'inProgressNotConflict', pointer: `${CONTRACT}/responses/inProgress/status` },
        { messageId: 'storeNotServerError', pointer: `${CONTRACT}/responses/storeUnavailable/status` },
      ],
    },
  ],
});

ruleTester.run(retryAfterUndeclared, {
  valid: [
    { name: 'Retry-After on the shared 409 and 503', document: payouts() },
    { name: 'Swagger 2.0 response with Retry-After', document: swagger2("        '201': { description: created }\n        '409': { $ref: '#/responses/Busy' }") },
    { name: 'an undocumented status is state-response-missing\'s', document: payouts((t) => delete post(t).responses['503']) },
  ],
  invalid: [
    {
      name: 'a shared 409 without Retry-After, used by two operations',
      document: payouts((t) => {
        delete t.components.responses.Conflict.headers;
        refunds(t);
      }),
      errors: [{ messageId: 'missing', pointer: '/components/responses/Conflict', operations: ['createPayout', 'createRefund'], message: /409 response that answers `inProgress`/ }],
    },
    {
      name: 'an inline 503 without Retry-After',
      document: payouts((t) => (post(t).responses['503'] = { description: 'store down' })),
      errors: [{ messageId: 'missing', pointer: `${CREATE}/responses/503`, message: /`storeUnavailable`/ }],
    },
    {
      name: 'Swagger 2.0 inline 409 without headers',
      document: swagger2("        '201': { description: created }\n        '409': { description: busy }"),
      errors: [{ messageId: 'missing', pointer: '/paths/~1transfers/post/responses/409' }],
    },
  ],
});

ruleTester.run(replayHeaderUndeclared, {
  valid: [
    { name: 'the 201 declares Idempotent-Replayed', document: payouts() },
    { name: 'no replay block is replay-undefined\'s', document: payouts((t, c) => (delete c.responses.replay, delete post(t).responses['201'].headers)) },
    {
      name: 'a custom replay header, declared in another case',
      document: payouts((t, c) => {
        c.responses.replay.header = 'X-Replayed';
        post(t).responses['201'].headers = { 'x-replayed': { schema: { type: 'boolean' } } };
      }),
    },
  ],
  invalid: [
    {
      name: 'the 201 lacks the header',
      document: payouts((t) => delete post(t).responses['201'].headers),
      errors: [{ messageId: 'missing', pointer: `${CREATE}/responses/201`, message: /`Idempotent-Replayed`/ }],
    },
    {
      name: 'every success response needs it',
      document: payouts((t) => (post(t).responses['200'] = { description: 'replayed from an older API version' })),
      errors: [{ messageId: 'missing', pointer: `${CREATE}/responses/200` }],
    },
    {
      name: 'Swagger 2.0',
      document: swagger2("        '201': { description: created }\n        '409': { $ref: '#/responses/Busy' }"),
      errors: [{ messageId: 'missing', pointer: '/paths/~1transfers/post/responses/201' }],
    },
  ],
});

ruleTester.run(replayUndefined, {
  valid: [
    { name: 'replay header and an id in the 201', document: payouts() },
    { name: 'a 204 has nothing to return but its status', document: payouts((t) => (post(t).responses = { '204': { description: 'done' }, ...post(t).responses }, delete post(t).responses['201'])) },
    { name: 'a Location header identifies the result', document: payouts((t) => ((t.components.schemas.Payout = { type: 'object' }), (post(t).responses['201'].headers.Location = { schema: { type: 'string' } }))) },
    {
      name: 'an id inside a data envelope, through allOf',
      document: payouts((t) => {
        t.components.schemas.Payout = { allOf: [{ type: 'object', properties: { data: { $ref: '#/components/schemas/PayoutData' } } }] };
        t.components.schemas.PayoutData = { type: 'object', properties: { payout_id: { type: 'string' } } };
      }),
    },
    {
      name: 'an id in the resource named after itself beside metadata, as GoCardless writes it ({payouts: {id}, links})',
      document: payouts((t) => {
        t.components.schemas.Payout = {
          type: 'object',
          properties: { payouts: { type: 'object', properties: { id: { type: 'string' } } }, links: { type: 'object' }, meta: { type: 'object' } },
        };
      }),
    },
    {
      name: "UK Open Banking's capitalised envelope ({Data: {ConsentId}, Links, Meta})",
      document: payouts((t) => {
        t.components.schemas.Payout = {
          type: 'object',
          properties: { Data: { type: 'object', properties: { ConsentId: { type: 'string' } } }, Links: { type: 'object' }, Meta: { type: 'object' } },
        };
      }),
    },
    {
      name: "Square's resource beside its errors list ({errors: [], refund: {id}})",
      document: payouts((t) => {
        t.components.schemas.Payout = { type: 'object', properties: { errors: { type: 'array', items: { type: 'object' } }, refund: { type: 'object', properties: { id: { type: 'string' } } } } };
      }),
    },
    {
      name: "Azure's long-running 202 names its result by Operation-Location",
      document: payouts((t) => {
        t.components.schemas.Payout = { type: 'object', properties: { status: { type: 'string' } } };
        t.components.headers = { ...t.components.headers, OperationLocation: { schema: { type: 'string', format: 'uri' } } };
        post(t).responses['201'].headers['Operation-Location'] = { $ref: '#/components/headers/OperationLocation' };
      }),
    },
    {
      name: "Twilio's sid ({sid, account_sid, status})",
      document: payouts((t) => {
        t.components.schemas.Payout = { type: 'object', properties: { sid: { type: 'string' }, account_sid: { type: 'string' }, status: { type: 'string' } } };
      }),
    },
    {
      name: "AWS's ARN of what was created ({ScheduleArn}, {resource_arn})",
      document: payouts((t) => {
        t.components.schemas.Payout = { type: 'object', properties: { ScheduleArn: { type: 'string' }, State: { type: 'string' } } };
      }),
    },
    {
      name: "Adyen's pspReference (its id of the payment or modification)",
      document: payouts((t) => {
        t.components.schemas.Payout = { type: 'object', properties: { pspReference: { type: 'string' }, status: { type: 'string' } } };
      }),
    },
    {
      name: "Xero's list of what was created ({Invoices: [{InvoiceID}]}, items through a $ref)",
      document: payouts((t) => {
        t.components.schemas.Invoice = { type: 'object', properties: { InvoiceID: { type: 'string', format: 'uuid' }, Total: { type: 'number' } } };
        t.components.schemas.Payout = { type: 'object', properties: { Invoices: { type: 'array', items: { $ref: '#/components/schemas/Invoice' } }, Warnings: { type: 'array' } } };
      }),
    },
  ],
  invalid: [
    {
      name: 'words that end in id or arn are no result id ({paid, valid, void, amount_paid, yarn, barn})',
      document: payouts((t) => {
        t.components.schemas.Payout = {
          type: 'object',
          properties: { paid: { type: 'boolean' }, valid: { type: 'boolean' }, void: { type: 'boolean' }, amount_paid: { type: 'integer' }, yarn: { type: 'string' }, barn: { type: 'string' } },
        };
      }),
      errors: [{ messageId: 'noResultId', pointer: '/components/schemas/Payout' }],
    },
    {
      name: "a client's own reference is no result id ({merchantReference, status})",
      document: payouts((t) => {
        t.components.schemas.Payout = { type: 'object', properties: { merchantReference: { type: 'string' }, status: { type: 'string' } } };
      }),
      errors: [{ messageId: 'noResultId', pointer: '/components/schemas/Payout' }],
    },
    {
      name: 'two resources side by side: neither is the result',
      document: payouts((t) => {
        const resource = { type: 'object', properties: { id: { type: 'string' } } };
        t.components.schemas.Payout = { type: 'object', properties: { payout: resource, customer: resource } };
      }),
      errors: [{ messageId: 'noResultId', pointer: '/components/schemas/Payout' }],
    },
    { name: 'no replay block', document: payouts((_t, c) => delete c.responses.replay), errors: [{ messageId: 'noReplay', pointer: `${CONTRACT}/responses` }] },
    {
      name: 'no success response',
      document: payouts((t) => delete post(t).responses['201']),
      errors: [{ messageId: 'noSuccess', pointer: `${CREATE}/responses` }],
    },
    {
      name: 'a success body without a result id, reported at the shared schema',
      document: payouts((t) => (t.components.schemas.Payout = { type: 'object', properties: { status: { type: 'string' } } })),
      errors: [{ messageId: 'noResultId', pointer: '/components/schemas/Payout', message: /201 success response carries no result id/ }],
    },
    {
      name: 'a success response without a body schema',
      document: payouts((t) => delete post(t).responses['201'].content),
      errors: [{ messageId: 'noResultId', pointer: `${CREATE}/responses/201` }],
    },
  ],
});
