/** The lint side of a key that travels in the query (`key.query`) or the body (`key.body`, a JSON Pointer). */
import keyHeaderUndeclared from '../../rules/key-header-undeclared.js';
import keyOptional from '../../rules/key-optional.js';
import keyUnbounded from '../../rules/key-unbounded.js';
import stateResponseMissing from '../../rules/state-response-missing.js';
import fingerprintRequiredUncovered from '../../rules/fingerprint-required-uncovered.js';
import { CONTRACT, CREATE, payouts, type Tree } from '../helpers/api-docs.js';
import { ruleTester } from '../helpers/rule-tester.js';

const post = (t: Tree): Tree => t.paths['/payouts'].post;
const input = (t: Tree): Tree => t.components.schemas.PayoutInput;

/** POST /payouts keyed by the query parameter `requestId` (declared with `param`, after the key header). */
const queryKeyed = (param: Tree | undefined, key: Tree = { query: 'requestId', required: true, maxLength: 255 }, edit?: (t: Tree) => void) =>
  payouts((t, c) => {
    c.key = key;
    if (param) post(t).parameters.push({ name: 'requestId', in: 'query', ...param });
    edit?.(t);
  });

/** POST /payouts keyed by the body field `ClientToken` (declared with `field`, listed under `required` when `listed`). */
const bodyKeyed = (field: Tree | undefined, listed = true, key: Tree = { body: '/ClientToken', required: true, maxLength: 64 }, edit?: (t: Tree) => void) =>
  payouts((t, c) => {
    c.key = key;
    post(t).parameters = [];
    if (field) input(t).properties.ClientToken = field;
    if (field && listed) input(t).required.push('ClientToken');
    edit?.(t);
  });

const TOKEN = { type: 'string', maxLength: 64 };

ruleTester.run(keyHeaderUndeclared, {
  valid: [
    { name: 'a query key declared as a required query parameter', document: queryKeyed({ required: true, schema: { type: 'string', maxLength: 255 } }) },
    {
      name: 'an optional query key declared optional',
      document: queryKeyed({ schema: { type: 'string' } }, { query: 'requestId', required: false }),
    },
    { name: 'a body key declared as a required field of the body schema', document: bodyKeyed(TOKEN) },
    {
      name: 'a required nested body key inside a required object',
      document: bodyKeyed(undefined, true, { body: '/options/idempotencyKey' }, (t) => {
        input(t).properties.options = { type: 'object', required: ['idempotencyKey'], properties: { idempotencyKey: TOKEN } };
        input(t).required.push('options');
      }),
    },
    { name: 'an optional body key the schema does not list under required', document: bodyKeyed(TOKEN, false, { body: '/ClientToken', required: false }) },
    {
      name: 'a body key in a nested object that lists it under its own required',
      document: bodyKeyed(undefined, true, { body: '/meta/ClientToken' }, (t) => {
        input(t).properties.meta = { type: 'object', required: ['ClientToken'], properties: { ClientToken: TOKEN } };
        input(t).required.push('meta');
      }),
    },
    {
      name: 'a body key reached through a $ref to the schema that declares it',
      document: bodyKeyed(undefined, true, { body: '/meta/ClientToken' }, (t) => {
        t.components.schemas.Meta = { type: 'object', required: ['ClientToken'], properties: { ClientToken: { $ref: '#/components/schemas/Token' } } };
        t.components.schemas.Token = TOKEN;
        input(t).properties.meta = { $ref: '#/components/schemas/Meta' };
        input(t).required.push('meta');
      }),
    },
    ...['application/x-amz-json-1.1', 'text/json', '*/*', 'application/*', 'text/plain'].map((media) => ({
      name: `a body key in a ${media} body, which the adapters parse as JSON (AWS's JSON protocol is x-amz-json)`,
      document: bodyKeyed(TOKEN, true, { body: '/ClientToken', required: true, maxLength: 64 }, (t) => {
        post(t).requestBody.content = { [media]: { schema: { $ref: '#/components/schemas/PayoutInput' } } };
      }),
    })),
    {
      name: 'a body key where the body is declared as application/xml and as x-amz-json-1.0: the JSON one is read',
      document: bodyKeyed(TOKEN, true, { body: '/ClientToken', required: true, maxLength: 64 }, (t) => {
        const schema = { $ref: '#/components/schemas/PayoutInput' };
        post(t).requestBody.content = { 'application/xml': { schema }, 'application/x-amz-json-1.0': { schema } };
      }),
    },
    {
      name: 'a required body key listed under required in an allOf branch (Tokened), not at the object itself',
      document: bodyKeyed(undefined, true, { body: '/ClientToken', required: true }, (t) => {
        t.components.schemas.Tokened = { type: 'object', required: ['ClientToken'], properties: { ClientToken: TOKEN } };
        t.components.schemas.PayoutInput = { allOf: [{ $ref: '#/components/schemas/Tokened' }, input(t)] };
      }),
    },
    {
      name: 'a body key inherited through allOf, optional in the contract and in the schema',
      document: bodyKeyed(undefined, true, { body: '/ClientToken', required: false }, (t) => {
        t.components.schemas.Tokened = { type: 'object', properties: { ClientToken: TOKEN } };
        t.components.schemas.PayoutInput = { allOf: [{ $ref: '#/components/schemas/Tokened' }, input(t)] };
      }),
    },
    {
      name: "a body-key contract whose field is the body's key field: no bodyKey (the guard reads it where clients send it)",
      document: bodyKeyed(TOKEN, true, { body: '/ClientToken', required: true }, (t) => (post(t).parameters = [{ $ref: '#/components/parameters/IdempotencyKey' }])),
    },
  ],
  invalid: [
    {
      name: 'a body key in a text/xml body: the guard reads body keys from JSON and form bodies only',
      document: bodyKeyed(TOKEN, true, { body: '/ClientToken', required: true, maxLength: 64 }, (t) => {
        post(t).requestBody.content = { 'text/xml': { schema: { $ref: '#/components/schemas/PayoutInput' } } };
      }),
      errors: [{ messageId: 'bodyUnreadable', pointer: `${CREATE}/x-idempotency/key/body`, message: /`text\/xml` body/ }],
    },
    {
      name: 'a query key the operation does not declare (a near name is offered)',
      document: queryKeyed({ required: true, schema: { type: 'string' } }, { query: 'requestID' }),
      errors: [{ messageId: 'queryUndeclared', pointer: `${CONTRACT}/key/query`, message: /query parameter `requestID` is not a declared query parameter of .*did you mean `requestId`/ }],
    },
    {
      name: 'a query key declared only as a header is not declared in the query',
      document: queryKeyed(undefined, { query: 'Idempotency-Key' }),
      errors: [{ messageId: 'queryUndeclared', pointer: `${CONTRACT}/key/query` }],
    },
    {
      name: 'a query key whose parameter says required: false while the contract requires it',
      document: queryKeyed({ required: false, schema: { type: 'string' } }),
      errors: [{ messageId: 'fieldRequiredMismatch', pointer: `${CREATE}/parameters/1/required`, message: /the query parameter `requestId` is optional .*key.required: true.*set `required: true` on the parameter/ }],
    },
    {
      name: 'a query key parameter without required, the contract requiring it by default, points at the parameter',
      document: queryKeyed({ schema: { type: 'string' } }, { query: 'requestId' }),
      errors: [{ messageId: 'fieldRequiredMismatch', pointer: `${CREATE}/parameters/1` }],
    },
    {
      name: 'a body pointer the body schema does not declare',
      document: bodyKeyed(TOKEN, true, { body: '/clientToken' }),
      errors: [{ messageId: 'bodyUndeclared', pointer: `${CONTRACT}/key/body`, message: /body field `\/clientToken` is not a field of the request body schema .*listed under `required`/ }],
    },
    {
      name: 'a nested body pointer whose object is not declared',
      document: bodyKeyed(TOKEN, true, { body: '/meta/ClientToken' }),
      errors: [{ messageId: 'bodyUndeclared', pointer: `${CONTRACT}/key/body` }],
    },
    {
      name: 'a required body key the schema does not list under required',
      document: bodyKeyed(TOKEN, false),
      errors: [{ messageId: 'fieldRequiredMismatch', pointer: '/components/schemas/PayoutInput/required', message: /the body field `\/ClientToken` is optional .*list the field under `required`/ }],
    },
    {
      name: 'an optional body key the schema lists under required',
      document: bodyKeyed(TOKEN, true, { body: '/ClientToken', required: false }),
      errors: [{ messageId: 'fieldRequiredMismatch', pointer: '/components/schemas/PayoutInput/required', message: /is required in the document .*take the field out of `required`/ }],
    },
    {
      name: 'a required nested body key its $ref-ed object does not list: the finding is at that object',
      document: bodyKeyed(undefined, true, { body: '/meta/ClientToken' }, (t) => {
        t.components.schemas.Meta = { type: 'object', properties: { ClientToken: TOKEN } };
        input(t).properties.meta = { $ref: '#/components/schemas/Meta' };
        input(t).required.push('meta');
      }),
      errors: [{ messageId: 'fieldRequiredMismatch', pointer: '/components/schemas/Meta' }],
    },
    {
      name: 'a required nested body key inside an object the body may leave out (Trigger.dev\'s /options/idempotencyKey): the finding is at the outer required list',
      document: bodyKeyed(undefined, true, { body: '/options/idempotencyKey' }, (t) => {
        input(t).properties.options = { type: 'object', required: ['idempotencyKey'], properties: { idempotencyKey: TOKEN } };
      }),
      errors: [{ messageId: 'fieldRequiredMismatch', pointer: '/components/schemas/PayoutInput/required', message: /the body field `\/options\/idempotencyKey` is optional .*it is inside `options`, which a request may leave out: list `options` under `required`, and the field under its own object's `required` where it is not/ }],
    },
    {
      name: 'a header-key contract whose body also offers ClientToken still reports bodyKey',
      document: bodyKeyed(TOKEN, true, { header: 'Idempotency-Key', required: true }, (t) => (post(t).parameters = [{ $ref: '#/components/parameters/IdempotencyKey' }])),
      errors: [{ messageId: 'bodyKey', pointer: '/components/schemas/PayoutInput/properties/ClientToken' }],
    },
  ],
});

ruleTester.run(keyUnbounded, {
  valid: [
    { name: "the query parameter's maxLength bounds a query key", document: queryKeyed({ required: true, schema: { type: 'string', maxLength: 255 } }, { query: 'requestId' }) },
    { name: "the body field's maxLength bounds a body key", document: bodyKeyed({ type: 'string', maxLength: 64 }, true, { body: '/ClientToken' }) },
    { name: 'the contract and the body field agree', document: bodyKeyed({ type: 'string', maxLength: 64 }) },
    { name: "a body field's format: uuid", document: bodyKeyed({ type: 'string', format: 'uuid' }, true, { body: '/ClientToken' }) },
    { name: "an undeclared body key is key-header-undeclared's finding", document: bodyKeyed(undefined, false, { body: '/ClientToken' }) },
    // No SDK fills a query or body key: a bound below 64 is the API's own rule (Square's idempotency_key: 45), and the
    // guard enforces it as written (it widened it to 64, and the finding said so).
    { name: "a query parameter's maxLength below 64", document: queryKeyed({ required: true, schema: { type: 'string', maxLength: 40 } }, { query: 'requestId' }) },
    { name: "a body field's maxLength below 64", document: bodyKeyed({ type: 'string', maxLength: 40 }, true, { body: '/ClientToken' }) },
    { name: "a body key's contract maxLength of 45, as the body field", document: bodyKeyed({ type: 'string', maxLength: 45 }, true, { body: '/ClientToken', maxLength: 45 }) },
  ],
  invalid: [
    {
      name: "a body field's maxLength below a UUID, the key the generated client sends",
      document: bodyKeyed({ type: 'string', maxLength: 32 }, true, { body: '/ClientToken' }),
      errors: [{ messageId: 'tooShortForUuid', pointer: '/components/schemas/PayoutInput/properties/ClientToken/maxLength', message: /the body field `\/ClientToken`'s `maxLength: 32` is shorter than a UUID/ }],
    },
    {
      name: "a query key's contract maxLength below a UUID",
      document: queryKeyed({ required: true, schema: { type: 'string', maxLength: 32 } }, { query: 'requestId', maxLength: 32 }),
      errors: [{ messageId: 'tooShortForUuid', pointer: `${CONTRACT}/key/maxLength` }],
    },
    {
      name: 'a query key bounded nowhere',
      document: queryKeyed({ required: true, schema: { type: 'string' } }, { query: 'requestId' }),
      errors: [{ messageId: 'unbounded', pointer: `${CONTRACT}/key`, message: /`requestId`/ }],
    },
    {
      name: 'a body key bounded nowhere (the key header parameter, still declared, bounds nothing here)',
      document: bodyKeyed({ type: 'string' }, true, { body: '/ClientToken' }, (t) => (post(t).parameters = [{ $ref: '#/components/parameters/IdempotencyKey' }])),
      errors: [{ messageId: 'unbounded', pointer: `${CONTRACT}/key`, message: /`\/ClientToken`/ }],
    },
    {
      name: 'the contract and the body field disagree: the message names the body field',
      document: bodyKeyed({ type: 'string', maxLength: 64 }, true, { body: '/ClientToken', maxLength: 128 }),
      errors: [{ messageId: 'disagrees', pointer: `${CONTRACT}/key/maxLength`, message: /`key.maxLength` is 128 but the body field `\/ClientToken` declares `maxLength: 64`/ }],
    },
    {
      name: 'the contract and the query parameter disagree: the message names the query parameter',
      document: queryKeyed({ required: true, schema: { type: 'string', maxLength: 100 } }, { query: 'requestId', maxLength: 128 }),
      errors: [{ messageId: 'disagrees', pointer: `${CONTRACT}/key/maxLength`, message: /but the query parameter `requestId` declares `maxLength: 100`/ }],
    },
  ],
});

ruleTester.run(keyOptional, {
  valid: [{ name: 'a required body key', document: bodyKeyed(TOKEN) }],
  invalid: [
    {
      name: 'an optional body key names the body field',
      document: bodyKeyed(TOKEN, false, { body: '/ClientToken', required: false }),
      errors: [{ messageId: 'optional', pointer: `${CONTRACT}/key/required`, message: /a client that omits `\/ClientToken`/ }],
    },
    {
      name: 'an optional query key names the query parameter',
      document: queryKeyed({ schema: { type: 'string' } }, { query: 'requestId', required: false }),
      errors: [{ messageId: 'optional', pointer: `${CONTRACT}/key/required`, message: /a client that omits `requestId`/ }],
    },
  ],
});

ruleTester.run(stateResponseMissing, {
  valid: [
    {
      name: 'a query key that happens to be named Repeatability-Request-ID is no OASIS header: no 412 asked for',
      document: queryKeyed({ name: 'Repeatability-Request-ID', required: true, schema: { type: 'string', maxLength: 36 } }, { query: 'Repeatability-Request-ID' }),
    },
  ],
  invalid: [
    {
      name: 'the OASIS key header without a 412 (the header case the query case is measured against)',
      document: payouts((_t, c) => (c.key.header = 'Repeatability-Request-ID')),
      errors: [{ messageId: 'repeatExpired', pointer: `${CONTRACT}/key/header` }],
    },
  ],
});

ruleTester.run(fingerprintRequiredUncovered, {
  valid: [
    {
      name: 'a required body key field left out of fingerprint.include: it is the key, not the payload',
      document: bodyKeyed(TOKEN, true, { body: '/ClientToken', required: true, maxLength: 64 }, (t) => {
        post(t)['x-idempotency'].fingerprint = { include: ['/amount', '/currency', '/destination'] };
      }),
    },
  ],
  invalid: [
    {
      name: 'the same field under a header-keyed contract is payload, and uncovered',
      document: payouts((t) => {
        input(t).properties.ClientToken = TOKEN;
        input(t).required.push('ClientToken');
        post(t)['x-idempotency'].fingerprint = { include: ['/amount', '/currency', '/destination'] };
      }),
      errors: [{ messageId: 'uncovered', pointer: `${CREATE}/x-idempotency/fingerprint/include`, message: /ClientToken/ }],
    },
  ],
});
