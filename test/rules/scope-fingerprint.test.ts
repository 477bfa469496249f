import fingerprintFieldUnknown from '../../rules/fingerprint-field-unknown.js';
import fingerprintMissing from '../../rules/fingerprint-missing.js';
import fingerprintRequiredUncovered from '../../rules/fingerprint-required-uncovered.js';
import scopeMissing from '../../rules/scope-missing.js';
import scopeTooWide from '../../rules/scope-too-wide.js';
import scopeUnresolvable from '../../rules/scope-unresolvable.js';
import { CONTRACT, completeContract, payouts, type Tree } from '../helpers/api-docs.js';
import { ruleTester } from '../helpers/rule-tester.js';

const post = (t: Tree): Tree => t.paths['/payouts'].post;
const tenantHeader = { name: 'X-Tenant-Id', in: 'header', required: true, schema: { type: 'string' } };

ruleTester.run(scopeMissing, {
  valid: [
    { name: 'scope: [principal]', document: payouts() },
    { name: 'an explicit global scope', document: payouts((_t, c) => (c.scope = ['global'])) },
    { name: 'a scope written but invalid is contract-invalid\'s finding only', document: payouts((_t, c) => (c.scope = ['globall'])) },
    { name: 'scope from the document defaults', document: payouts((t, c) => ((t['x-idempotency'] = { scope: ['principal'] }), delete c.scope)) },
  ],
  invalid: [
    { name: 'no scope', document: payouts((_t, c) => delete c.scope), errors: [{ messageId: 'missing', pointer: CONTRACT }] },
    { name: 'an empty scope', document: payouts((_t, c) => (c.scope = [])), errors: [{ messageId: 'missing', pointer: `${CONTRACT}/scope` }] },
    {
      name: 'x-idempotency: true with defaults that lack a scope',
      document: payouts((t) => {
        const { scope: _scope, ...rest } = completeContract();
        t['x-idempotency'] = rest;
        post(t)['x-idempotency'] = true;
      }),
      errors: [{ messageId: 'missing', pointer: CONTRACT }],
    },
  ],
});

ruleTester.run(scopeTooWide, {
  valid: [
    { name: 'principal on an authenticated operation', document: payouts() },
    { name: 'global on an operation that says security: []', document: payouts((t, c) => ((c.scope = ['global']), (post(t).security = []))) },
    { name: 'global on a document without security', document: payouts((t, c) => ((c.scope = ['global']), delete t.security)) },
    {
      name: 'a tenant header beside the principal',
      document: payouts((t, c) => {
        c.scope = ['principal', 'header:X-Tenant-Id'];
        post(t).parameters.push(tenantHeader);
      }),
    },
    {
      name: 'the API key header of the operation\'s apiKey scheme: the credential is the caller',
      document: payouts((t, c) => {
        t.components.securitySchemes.apiKey = { type: 'apiKey', in: 'header', name: 'X-MBX-APIKEY' };
        t.security = [{ apiKey: [] }];
        c.scope = ['header:x-mbx-apikey'];
      }),
    },
  ],
  invalid: [
    {
      name: 'global scope under document-level security',
      document: payouts((_t, c) => (c.scope = ['global'])),
      errors: [{ messageId: 'global', pointer: `${CONTRACT}/scope/0` }],
    },
    {
      name: 'global scope under operation-level security',
      document: payouts((t, c) => {
        delete t.security;
        post(t).security = [{ bearerAuth: [] }];
        c.scope = ['header:X-Tenant-Id', 'global'];
        post(t).parameters.push(tenantHeader);
      }),
      errors: [{ messageId: 'global', pointer: `${CONTRACT}/scope/1` }],
    },
    {
      name: 'a tenant header alone: the client says whose record it is, and a replay skips the handler\'s check',
      document: payouts((t, c) => {
        c.scope = ['header:X-Tenant-Id'];
        post(t).parameters.push(tenantHeader);
      }),
      errors: [{ messageId: 'ownerUnverified', pointer: `${CONTRACT}/scope/0`, message: /takes the owner from `header:X-Tenant-Id`.*scope: \[principal, header:X-Tenant-Id\]/ }],
    },
    {
      name: 'a scope that names no owner',
      document: payouts((t, c) => {
        c.scope = ['header:X-Region'];
        post(t).parameters.push({ name: 'X-Region', in: 'header', schema: { type: 'string' } });
      }),
      errors: [{ messageId: 'noOwner', pointer: `${CONTRACT}/scope`, message: /header:X-Region/ }],
    },
  ],
});

ruleTester.run(scopeUnresolvable, {
  valid: [
    { name: 'principal with document security', document: payouts() },
    {
      name: 'header, path and query parts that are declared (path-level too)',
      document: payouts((t, c) => {
        t.paths['/payouts/{id}'].post = { ...structuredClone(post(t)), operationId: 'retryPayout' };
        t.paths['/payouts/{id}'].post['x-idempotency'].scope = ['principal', 'header:x-tenant-id', 'path:id', 'query:mode'];
        t.paths['/payouts/{id}'].post.parameters.push(tenantHeader, { name: 'mode', in: 'query', schema: { type: 'string' } });
        c.scope = ['principal'];
      }),
    },
    { name: 'an explicit global', document: payouts((_t, c) => (c.scope = ['global'])) },
    {
      name: 'a header that an API key security scheme of the operation sends (no parameter lists it)',
      document: payouts((t, c) => {
        t.components.securitySchemes.tenantKey = { type: 'apiKey', in: 'header', name: 'X-Tenant-Id' };
        t.security = [{ bearerAuth: [], tenantKey: [] }];
        c.scope = ['principal', 'header:x-tenant-id'];
      }),
    },
    {
      name: 'a query API key (Swagger 2.0 securityDefinitions)',
      document: `swagger: '2.0'
info: { title: Keys, version: '1' }
securityDefinitions:
  appKey: { type: apiKey, in: query, name: app_key }
security: [{ appKey: [] }]
paths:
  /orders:
    post:
      operationId: createOrder
      parameters:
        - { in: header, name: Idempotency-Key, type: string, required: true, maxLength: 255 }
      responses: { '201': { description: created } }
      x-idempotency: { scope: ['query:app_key'] }
`,
      operation: 'createOrder',
    },
  ],
  invalid: [
    {
      name: 'an undeclared header',
      document: payouts((_t, c) => (c.scope = ['principal', 'header:X-Tenant-Id'])),
      errors: [{ messageId: 'undeclared', pointer: `${CONTRACT}/scope/1`, message: /`header:X-Tenant-Id`.*header parameter/ }],
    },
    {
      // The article review's: the generated client sends a new X-Request-Id per attempt, so the lost-response retry
      // of the article's own case got a record of its own and ran the effect twice — on a contract lint passed.
      name: 'a declared X-Request-Id header, or a trace header: new on every attempt',
      document: payouts((t, c) => {
        post(t).parameters.push({ name: 'X-Request-Id', in: 'header', schema: { type: 'string' } }, { name: 'traceparent', in: 'header', schema: { type: 'string' } });
        c.scope = ['principal', 'header:X-Request-Id', 'header:traceparent'];
      }),
      errors: [
        { messageId: 'perAttempt', pointer: `${CONTRACT}/scope/1`, message: /`header:X-Request-Id` names a header that changes on every attempt/ },
        { messageId: 'perAttempt', pointer: `${CONTRACT}/scope/2` },
      ],
    },
    {
      name: 'the Authorization header of a bearer-secured operation: scope by principal, not the token',
      document: payouts((_t, c) => (c.scope = ['header:Authorization'])),
      errors: [{ messageId: 'credentialHeader', pointer: `${CONTRACT}/scope/0`, message: /`header:Authorization` scopes by the credentials themselves.*scope by `principal`/ }],
    },
    {
      name: 'a header of an API key scheme the operation does not use',
      document: payouts((t, c) => {
        t.components.securitySchemes.tenantKey = { type: 'apiKey', in: 'header', name: 'X-Tenant-Id' };
        c.scope = ['principal', 'header:X-Tenant-Id'];
      }),
      errors: [{ messageId: 'undeclared', pointer: `${CONTRACT}/scope/1` }],
    },
    {
      name: 'a defaults scope part that two operations lack: one finding at the defaults naming both',
      document: payouts((t, c) => {
        delete c.scope;
        t['x-idempotency'] = { scope: ['principal', 'header:X-Tenant-Id'] };
        t.paths['/refunds'] = { post: { ...structuredClone(post(t)), operationId: 'createRefund' } };
      }),
      errors: [
        { messageId: 'undeclared', pointer: '/x-idempotency/scope/1', operations: ['createPayout', 'createRefund'], message: /a header parameter that the operation does not declare/ },
      ],
    },
    {
      name: 'a misspelt path parameter gets a hint',
      document: payouts((t) => {
        t.paths['/payouts/{id}'].post = { ...structuredClone(post(t)), operationId: 'retryPayout' };
        t.paths['/payouts/{id}'].post['x-idempotency'].scope = ['principal', 'path:di'];
      }),
      operation: 'retryPayout',
      errors: [{ messageId: 'undeclared', pointer: '/paths/~1payouts~1{id}/post/x-idempotency/scope/1', message: /did you mean `path:id`/ }],
    },
    {
      name: 'principal on an operation with security: []',
      document: payouts((t) => (post(t).security = [])),
      errors: [{ messageId: 'principalUnsecured', pointer: `${CONTRACT}/scope/0`, message: /security: \[\]/ }],
    },
    {
      name: 'principal on an operation whose only alternative is anonymous',
      document: payouts((t) => (post(t).security = [{}])),
      errors: [{ messageId: 'principalUnsecured', pointer: `${CONTRACT}/scope/0`, message: /the security of POST \/payouts \(createPayout\) names no scheme/ }],
    },
    {
      name: 'principal with no security anywhere',
      document: payouts((t) => delete t.security),
      errors: [{ messageId: 'principalUnsecured', pointer: `${CONTRACT}/scope/0`, message: /neither/ }],
    },
    {
      name: 'principal when anonymous requests are allowed',
      document: payouts((t) => (t.security = [{}, { bearerAuth: [] }])),
      errors: [{ messageId: 'principalAnonymous', pointer: `${CONTRACT}/scope/0` }],
    },
  ],
});

ruleTester.run(fingerprintMissing, {
  valid: [
    { name: 'a fingerprint', document: payouts() },
    { name: 'x-idempotency of the wrong type is contract-invalid\'s finding only', document: payouts((t) => (t.paths['/payouts'].post['x-idempotency'] = 'yes')) },
    {
      name: 'no body, no fingerprint needed',
      document: payouts((t, c) => {
        delete post(t).requestBody;
        delete c.fingerprint;
      }),
    },
  ],
  invalid: [{ name: 'a body and no fingerprint', document: payouts((_t, c) => delete c.fingerprint), errors: [{ messageId: 'missing', pointer: CONTRACT }] }],
});

const swagger2 = `swagger: '2.0'
info: { title: Legacy, version: '1' }
paths:
  /transfers:
    post:
      operationId: createTransfer
      parameters:
        - { in: header, name: Idempotency-Key, type: string, required: true, maxLength: 255 }
        - { in: body, name: transfer, required: true, schema: { $ref: '#/definitions/Transfer' } }
      responses: { '201': { description: created } }
      x-idempotency:
        fingerprint: { include: [/amount, /beneficiary/account, /beneficiary/acount] }
definitions:
  Transfer:
    type: object
    properties:
      amount: { type: integer }
      beneficiary: { $ref: '#/definitions/Beneficiary' }
  Beneficiary:
    type: object
    properties:
      account: { type: string }
`;

/** Swagger 2.0 form fields (`in: formData`): the guard reads them as one object, field name → value. */
const swagger2Form = (include: string) => `swagger: '2.0'
info: { title: Petstore, version: '1' }
paths:
  /pets/{petId}:
    post:
      operationId: updatePetWithForm
      consumes: [application/x-www-form-urlencoded]
      parameters:
        - { in: path, name: petId, required: true, type: integer }
        - { in: header, name: Idempotency-Key, required: true, type: string, maxLength: 128 }
        - { in: formData, name: name, required: false, type: string }
        - { in: formData, name: status, required: true, type: string }
        - { in: formData, name: tags, type: array, items: { type: string } }
      responses: { '200': { description: ok } }
      x-idempotency:
        fingerprint: { include: ${include} }
`;

/**
 * Stripe-style bracketed form fields: the guard nests `metadata[order_id]` as `/metadata/order_id` and
 * `expand[]` as the list `/expand` before fingerprinting, in a 2.0 form or a 3.x urlencoded body alike.
 */
const bracketForm2 = (include: string) => `swagger: '2.0'
info: { title: Charges, version: '1' }
consumes: [application/x-www-form-urlencoded]
paths:
  /charges:
    post:
      operationId: createCharge
      parameters:
        - { in: header, name: Idempotency-Key, required: true, type: string, maxLength: 255 }
        - { in: formData, name: amount, required: true, type: integer }
        - { in: formData, name: 'metadata[order_id]', required: true, type: string }
        - { in: formData, name: 'expand[]', type: string }
        - { in: formData, name: 'lines[0][sku]', type: string }
      responses: { '200': { description: ok } }
      x-idempotency:
        fingerprint: { include: ${include} }
`;
const bracketForm3 = (include: string, mediaType = 'application/x-www-form-urlencoded') => `openapi: 3.1.0
info: { title: Charges, version: '1' }
paths:
  /charges:
    post:
      operationId: createCharge
      parameters:
        - { in: header, name: Idempotency-Key, required: true, schema: { type: string, maxLength: 255 } }
      requestBody:
        content:
          ${mediaType}:
            schema: { $ref: '#/components/schemas/ChargeForm' }
      responses: { '200': { description: ok } }
      x-idempotency:
        fingerprint: { include: ${include} }
components:
  schemas:
    ChargeForm:
      type: object
      required: [amount, 'metadata[order_id]']
      properties:
        amount: { type: integer }
        'metadata[order_id]': { type: string }
`;

/** `text` with `from` replaced by `to`; throws when `from` is not there (a fixture that silently stayed the same). */
function replaced(text: string, from: string, to: string): string {
  if (!text.includes(from)) throw new Error(`fixture text not found: ${from}`);
  return text.replace(from, to);
}

/** A polymorphic Swagger 2.0 body: the base `Fish` has a discriminator, `Salmon` extends it through allOf. */
const swagger2Fish = (include: string, discriminator = '    discriminator: fishtype\n') => `swagger: '2.0'
info: { title: Polymorphism, version: '1' }
paths:
  /fish:
    put:
      operationId: putFish
      parameters:
        - { in: header, name: Idempotency-Key, type: string, required: true, maxLength: 64 }
        - { in: body, name: fish, required: true, schema: { $ref: '#/definitions/Fish' } }
      responses: { '200': { description: ok } }
      x-idempotency:
        fingerprint: { include: ${include} }
definitions:
  Fish:
    type: object
${discriminator}    required: [fishtype]
    properties:
      fishtype: { type: string }
      length: { type: number }
  Salmon:
    allOf: [{ $ref: '#/definitions/Fish' }]
    type: object
    properties:
      location: { type: string }
`;

ruleTester.run(fingerprintFieldUnknown, {
  valid: [
    { name: 'pointers through $ref and a 3.1 type array', document: payouts((_t, c) => (c.fingerprint.include = ['/amount', '/destination/iban', '/note'])) },
    { name: 'include: all with an exclude', document: payouts((_t, c) => (c.fingerprint = { include: 'all', exclude: ['/note'] })) },
    { name: 'Swagger 2.0 form fields, an array field included whole', document: swagger2Form('[/name, /status, /tags]'), operation: 'updatePetWithForm' },
    {
      name: 'Swagger 2.0 bracketed form fields, nested as the guard nests them',
      document: bracketForm2('[/amount, /metadata/order_id, /metadata, /expand, /expand/0, /lines/0/sku]'),
      operation: 'createCharge',
    },
    { name: 'bracketed properties of a 3.x form body, nested as the guard nests them', document: bracketForm3('[/amount, /metadata/order_id]'), operation: 'createCharge' },
    {
      name: 'a plain field beside a bracketed one of the same name (Stripe card token or card hash), either order: /card/number and /card/',
      document: `swagger: '2.0'
info: { title: Cards, version: '1' }
paths:
  /charges:
    post:
      operationId: createCharge
      consumes: [application/x-www-form-urlencoded]
      parameters:
        - { in: header, name: Idempotency-Key, required: true, type: string, maxLength: 255 }
        - { in: formData, name: card, type: string }
        - { in: formData, name: 'card[number]', type: string }
        - { in: formData, name: 'source[token]', type: string }
        - { in: formData, name: source, type: string }
        - { in: formData, name: 'items[][price]', type: string }
        - { in: formData, name: 'items[][quantity]', type: integer }
      responses: { '200': { description: ok } }
      x-idempotency:
        fingerprint: { include: [/card/number, /card/, /source/token, /source/, /items/0/price, /items/0/quantity] }
`,
      operation: 'createCharge',
    },
    {
      name: 'bracketed properties of a 3.x form body composed with allOf',
      document: replaced(
        bracketForm3('[/amount, /metadata/order_id]'),
        "    ChargeForm:\n      type: object\n      required: [amount, 'metadata[order_id]']\n      properties:\n        amount: { type: integer }\n        'metadata[order_id]': { type: string }\n",
        "    ChargeForm:\n      allOf:\n        - { type: object, properties: { amount: { type: integer } } }\n        - { type: object, properties: { 'metadata[order_id]': { type: string } } }\n",
      ),
      operation: 'createCharge',
    },
    { name: 'a JSON body property named with brackets is itself (JSON is not nested)', document: bracketForm3("[/amount, '/metadata[order_id]']", 'application/json'), operation: 'createCharge' },
    { name: 'a property of a subtype that extends a discriminated base (Swagger 2.0 allOf)', document: swagger2Fish('[/fishtype, /length, /location]'), operation: 'putFish' },
    {
      name: 'a property of a subtype named by a 3.x discriminator mapping',
      document: payouts((t, c) => {
        const schemas = t.components.schemas;
        schemas.Destination = { type: 'object', properties: { kind: { type: 'string' } }, discriminator: { propertyName: 'kind', mapping: { sepa: 'Sepa', card: '#/components/schemas/Card' } } };
        schemas.Sepa = { type: 'object', properties: { iban: { type: 'string' } } };
        schemas.Card = { type: 'object', properties: { last4: { type: 'string' } } };
        c.fingerprint.include = ['/amount', '/destination/kind', '/destination/iban', '/destination/last4'];
      }),
    },
    {
      name: 'oneOf branches, allOf parts and nullable (3.0)',
      document: payouts((t, c) => {
        t.openapi = '3.0.3';
        const schemas = t.components.schemas;
        schemas.PayoutInput.properties.note = { type: 'string', nullable: true };
        schemas.Destination = {
          oneOf: [
            { type: 'object', properties: { iban: { type: 'string' } } },
            { allOf: [{ type: 'object', properties: { card: { type: 'object', properties: { last4: { type: 'string' } } } } }] },
          ],
        };
        c.fingerprint.include = ['/amount', '/currency', '/destination/iban', '/destination/card/last4', '/note'];
      }),
    },
    {
      name: 'array items and a free-form map',
      document: payouts((t, c) => {
        const props = t.components.schemas.PayoutInput.properties;
        props.lines = { type: 'array', items: { type: 'object', properties: { sku: { type: 'string' } } } };
        props.metadata = { type: 'object', additionalProperties: { type: 'string' } };
        props.labels = { type: 'object' };
        c.fingerprint.include = ['/amount', '/currency', '/destination', '/lines/0/sku', '/metadata/orderRef', '/labels/any/thing'];
      }),
    },
    {
      name: 'a body defined in another file',
      document: payouts((t) => (t.components.schemas.PayoutInput = { $ref: 'schemas/payout-input.yaml' })),
      files: {
        'schemas/payout-input.yaml': 'type: object\nrequired: [amount]\nproperties:\n  amount: { type: integer }\n  currency: { type: string }\n  destination: { type: object }\n  note: { type: string }\n',
      },
    },
  ],
  invalid: [
    {
      name: 'a property of a schema that extends the body schema without a discriminator (composition, not a subtype)',
      document: swagger2Fish('[/fishtype, /location]', ''),
      operation: 'putFish',
      errors: [{ messageId: 'noProperty', pointer: '/paths/~1fish/put/x-idempotency/fingerprint/include/1', message: /no property `location`/ }],
    },
    {
      name: 'one item of a Swagger 2.0 form array: the wire sends the field as one text (`tags=a,b`), so only the whole field resolves',
      document: swagger2Form('[/status, /tags/0]'),
      operation: 'updatePetWithForm',
      errors: [{ messageId: 'notContainer', pointer: '/paths/~1pets~1{petId}/post/x-idempotency/fingerprint/include/1', message: /point at `\/tags` itself/ }],
    },
    {
      name: 'a Swagger 2.0 form field misspelt',
      document: swagger2Form('[/nam, /status]'),
      operation: 'updatePetWithForm',
      errors: [{ messageId: 'noProperty', pointer: '/paths/~1pets~1{petId}/post/x-idempotency/fingerprint/include/0', message: /no property `nam` \(did you mean `\/name`\?\)/ }],
    },
    {
      name: 'a bracketed form field written as its raw name, which the guard never matches (2.0)',
      document: bracketForm2("[/amount, '/metadata[order_id]']"),
      operation: 'createCharge',
      errors: [
        {
          messageId: 'noProperty',
          pointer: '/paths/~1charges/post/x-idempotency/fingerprint/include/1',
          message: /no property `metadata\[order_id\]` \(the guard nests a form field's bracketed name: did you mean `\/metadata\/order_id`\?\)/,
        },
      ],
    },
    {
      name: 'an inline schema of a shared 2.0 body parameter is named by its place, not as `schema`',
      document: `swagger: '2.0'
info: { title: Transfers, version: '1' }
paths:
  /transfers:
    post:
      operationId: createTransfer
      parameters:
        - { in: header, name: Idempotency-Key, required: true, type: string, maxLength: 255 }
        - $ref: '#/parameters/Body'
      responses: { '201': { description: ok } }
      x-idempotency:
        fingerprint: { include: [/amount, /amout] }
parameters:
  Body:
    in: body
    name: body
    required: true
    schema: { type: object, properties: { amount: { type: integer } } }
`,
      operation: 'createTransfer',
      errors: [{ messageId: 'noProperty', pointer: '/paths/~1transfers/post/x-idempotency/fingerprint/include/1', message: /in the request body schema at `#\/parameters\/Body\/schema`: the body has no property `amout`/ }],
    },
    {
      name: 'a bracketed property of a 3.x form body written as its raw name',
      document: bracketForm3("[/amount, '/metadata[order_id]']", 'multipart/form-data'),
      operation: 'createCharge',
      errors: [{ messageId: 'noProperty', pointer: '/paths/~1charges/post/x-idempotency/fingerprint/include/1', message: /did you mean `\/metadata\/order_id`/ }],
    },
    {
      name: 'a misspelt top-level field',
      document: payouts((_t, c) => (c.fingerprint.include = ['/amount', '/curency', '/destination'])),
      errors: [{ messageId: 'noProperty', pointer: `${CONTRACT}/fingerprint/include/1`, message: /the body has no property `curency` \(did you mean `\/currency`\?\)/ }],
    },
    {
      name: 'a nested field behind $ref, and an exclude',
      document: payouts((_t, c) => ((c.fingerprint.include = ['/amount', '/destination/bic']), (c.fingerprint.exclude = ['/notes']))),
      errors: [
        { messageId: 'noProperty', pointer: `${CONTRACT}/fingerprint/include/1`, message: /`\/destination` has no property `bic`/ },
        { messageId: 'noProperty', pointer: `${CONTRACT}/fingerprint/exclude/0`, message: /did you mean `\/note`/ },
      ],
    },
    {
      name: 'a defaults pointer wrong for a shared body schema: one finding naming the schema and both operations',
      document: payouts((t, c) => {
        delete c.fingerprint;
        t['x-idempotency'] = { fingerprint: { include: ['/amout'] } };
        t.paths['/refunds'] = { post: { ...structuredClone(post(t)), operationId: 'createRefund' } };
      }),
      errors: [
        {
          messageId: 'noProperty',
          pointer: '/x-idempotency/fingerprint/include/0',
          operations: ['createPayout', 'createRefund'],
          message: /does not resolve in the request body schema `PayoutInput`: the body has no property `amout` \(did you mean `\/amount`\?\)/,
        },
      ],
    },
    {
      name: 'a contract aliased into two operations (YAML &anchor / *alias): one finding at the anchor naming both',
      document: payouts((t, c) => {
        c.fingerprint.include = ['/amout'];
        // The same object twice: the YAML writer emits an anchor and an alias.
        t.paths['/refunds'] = { post: { ...structuredClone(post(t)), operationId: 'createRefund', 'x-idempotency': c } };
      }),
      errors: [{ messageId: 'noProperty', pointer: `${CONTRACT}/fingerprint/include/0`, operations: ['createPayout', 'createRefund'] }],
    },
    {
      name: 'an inline body schema is named by its operation',
      document: payouts((t, c) => {
        post(t).requestBody.content['application/json'].schema = { type: 'object', properties: { amount: { type: 'integer' } } };
        c.fingerprint = { include: ['/amount', '/currency'] };
      }),
      errors: [{ messageId: 'noProperty', pointer: `${CONTRACT}/fingerprint/include/1`, message: /request body schema of POST \/payouts \(createPayout\): the body has no property `currency`/ }],
    },
    {
      name: 'a member of a scalar',
      document: payouts((_t, c) => (c.fingerprint.include = ['/amount/value'])),
      errors: [{ messageId: 'notContainer', pointer: `${CONTRACT}/fingerprint/include/0`, message: /`\/amount` is not an object/ }],
    },
    {
      name: 'a member of an array: names the array and suggests an item index',
      document: payouts((t, c) => {
        t.components.schemas.PayoutInput.properties.lines = { type: 'array', items: { type: 'object', properties: { sku: { type: 'string' } } } };
        c.fingerprint.include = ['/amount', '/lines/sku'];
      }),
      errors: [
        {
          messageId: 'notIndex',
          pointer: `${CONTRACT}/fingerprint/include/1`,
          message: /`\/lines` is an array, and `sku` is not an item index; point at one item \(`\/lines\/0\/sku`\) or at `\/lines` itself/,
        },
      ],
    },
    {
      name: 'a schema path through `items` (`/lines/items/sku`): suggests the data pointer that resolves, `/lines/0/sku`',
      document: payouts((t, c) => {
        t.components.schemas.PayoutInput.properties.lines = { type: 'array', items: { type: 'object', properties: { sku: { type: 'string' } } } };
        c.fingerprint.include = ['/amount', '/lines/items/sku'];
      }),
      errors: [
        {
          messageId: 'notIndex',
          pointer: `${CONTRACT}/fingerprint/include/1`,
          message: /`\/lines` is an array, and `items` is not an item index; point at one item \(`\/lines\/0\/sku`\) or at `\/lines` itself/,
        },
      ],
    },
    {
      name: 'a `-` array segment (past the last item, not every item): names the array and suggests the whole list or an index',
      document: payouts((t, c) => {
        t.components.schemas.PayoutInput.properties.lines = { type: 'array', items: { type: 'object', properties: { sku: { type: 'string' } } } };
        c.fingerprint.include = ['/amount', '/lines/-/sku', '/lines/-'];
      }),
      errors: [
        {
          messageId: 'pastEnd',
          pointer: `${CONTRACT}/fingerprint/include/1`,
          message: /`-` after the array `\/lines` is the slot past its last item \(JSON Pointer\), so it compares nothing; point at `\/lines` itself \(the whole list\) or at one item \(`\/lines\/0\/sku`\)/,
        },
        { messageId: 'pastEnd', pointer: `${CONTRACT}/fingerprint/include/2`, message: /one item \(`\/lines\/0`\)/ },
      ],
    },
    {
      name: 'a field one level deeper than written gets a hint',
      document: payouts((t, c) => {
        t.components.schemas.PayoutInput.properties.source = { type: 'object', properties: { card: { type: 'object', properties: { number: { type: 'string' } } } } };
        c.fingerprint.include = ['/amount', '/currency', '/destination', '/card/number'];
      }),
      errors: [{ messageId: 'noProperty', pointer: `${CONTRACT}/fingerprint/include/3`, message: /did you mean `\/source\/card\/number`/ }],
    },
    {
      // The real-spec review's: on Kubernetes, `/spec/image` was told `did you mean /spec/labels/image` — a map's key.
      name: 'no hint into a free-form map, where any name resolves',
      document: payouts((t, c) => {
        t.components.schemas.PayoutInput.properties.metadata = { type: 'object', additionalProperties: { type: 'string' } };
        c.fingerprint.include = ['/amount', '/currency', '/destination', '/memo'];
      }),
      errors: [{ messageId: 'noProperty', pointer: `${CONTRACT}/fingerprint/include/3`, message: /the body has no property `memo`; fix the pointer/ }],
    },
    {
      name: 'a field no oneOf branch has',
      document: payouts((t, c) => {
        t.components.schemas.Destination = { oneOf: [{ properties: { iban: { type: 'string' } } }, { properties: { card: { type: 'string' } } }] };
        c.fingerprint.include = ['/destination/wallet'];
      }),
      errors: [{ messageId: 'noProperty', pointer: `${CONTRACT}/fingerprint/include/0` }],
    },
    {
      name: 'fingerprint pointers on an operation without a body',
      document: payouts((t) => delete post(t).requestBody),
      errors: [{ messageId: 'noBody', pointer: `${CONTRACT}/fingerprint/include` }],
    },
    {
      name: 'Swagger 2.0 body parameter',
      document: swagger2,
      errors: [{ messageId: 'noProperty', pointer: '/paths/~1transfers/post/x-idempotency/fingerprint/include/2', message: /did you mean `\/beneficiary\/account`/ }],
    },
  ],
});

ruleTester.run(fingerprintRequiredUncovered, {
  valid: [
    { name: 'every required field included', document: payouts() },
    { name: 'a required field explicitly excluded', document: payouts((_t, c) => ((c.fingerprint.include = ['/amount', '/currency']), (c.fingerprint.exclude = ['/destination']))) },
    { name: 'a nested pointer covers its top-level field', document: payouts((_t, c) => (c.fingerprint.include = ['/amount', '/currency', '/destination/iban'])) },
    {
      name: 'a partly included object whose required properties are all covered',
      document: payouts((t, c) => {
        t.components.schemas.Destination.required = ['iban'];
        c.fingerprint.include = ['/amount', '/currency', '/destination/iban'];
      }),
    },
    { name: 'include: all', document: payouts((_t, c) => (c.fingerprint = { include: 'all' })) },
    { name: 'a required bracketed form field covered by its nested pointer', document: bracketForm2('[/amount, /metadata/order_id]'), operation: 'createCharge' },
  ],
  invalid: [
    {
      name: 'a required bracketed form field left out: named as the guard nests it',
      document: bracketForm2('[/amount]'),
      operation: 'createCharge',
      errors: [{ messageId: 'uncovered', pointer: '/paths/~1charges/post/x-idempotency/fingerprint/include', message: /required property `metadata` .*add `\/metadata`/ }],
    },
    {
      name: 'a required Swagger 2.0 form field left out',
      document: swagger2Form('[/name]'),
      operation: 'updatePetWithForm',
      errors: [{ messageId: 'uncovered', pointer: '/paths/~1pets~1{petId}/post/x-idempotency/fingerprint/include', message: /required property `status` of the request body schema of POST \/pets\/\{petId\}/ }],
    },
    {
      name: 'a required field left out',
      document: payouts((_t, c) => (c.fingerprint.include = ['/amount', '/currency'])),
      errors: [{ messageId: 'uncovered', pointer: `${CONTRACT}/fingerprint/include`, message: /`destination`/ }],
    },
    {
      name: 'a required property of an object included only in part (through $ref and allOf)',
      document: payouts((t, c) => {
        t.components.schemas.Destination = { allOf: [{ $ref: '#/components/schemas/Account' }, { type: 'object', properties: { bic: { type: 'string' } } }] };
        t.components.schemas.Account = { type: 'object', required: ['iban'], properties: { iban: { type: 'string' }, holder: { type: 'string' } } };
        c.fingerprint.include = ['/amount', '/currency', '/destination/bic'];
      }),
      errors: [{ messageId: 'uncovered', pointer: `${CONTRACT}/fingerprint/include`, message: /required property `destination\/iban` .* add `\/destination\/iban`/ }],
    },
    {
      name: 'required fields through allOf',
      document: payouts((t, c) => {
        t.components.schemas.PayoutInput = { allOf: [{ $ref: '#/components/schemas/Base' }, { type: 'object', required: ['reference'], properties: { reference: { type: 'string' } } }] };
        t.components.schemas.Base = { type: 'object', required: ['amount'], properties: { amount: { type: 'integer' } } };
        c.fingerprint.include = ['/amount'];
      }),
      errors: [{ messageId: 'uncovered', pointer: `${CONTRACT}/fingerprint/include`, message: /`reference`/ }],
    },
  ],
});

