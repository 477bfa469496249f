/**
 * Builders for the small OpenAPI documents the rule tables lint: one complete, clean "payouts" API that
 * a case changes in one place, so each invalid case differs from a valid document by exactly the fault
 * it is about.
 */
import { stringify } from 'yaml';

/** A JSON-like tree the cases edit. */
// `any` on purpose: cases reach deep into OpenAPI shapes, and typing each of them would only add casts.
export type Tree = Record<string, any>;

/** The complete contract of `POST /payouts` (every readiness field answered). */
export function completeContract(): Tree {
  return {
    key: { header: 'Idempotency-Key', required: true, maxLength: 255 },
    scope: ['principal'],
    fingerprint: { include: ['/amount', '/currency', '/destination'], exclude: ['/note'] },
    ttl: 'P1D',
    lease: 'PT30S',
    retry: { deadline: 'PT30S', maxAttempts: 4, backoff: { initial: 'PT0.2S', max: 'PT5S', jitter: 'full' } },
    effect: { owner: 'payouts', external: true, providerKey: 'forward', statusRoute: 'getPayout' },
    transient: [429, 503],
    responses: {
      replay: { header: 'Idempotent-Replayed' },
      missingKey: { status: 400 },
      invalidKey: { status: 400 },
      mismatch: { status: 422 },
      inProgress: { status: 409 },
      abandoned: { status: 409 },
      storeUnavailable: { status: 503 },
    },
    unknownOutcome: 'status-route',
  };
}

/** The complete OpenAPI 3.1 payouts document as a tree. */
export function payoutsTree(): Tree {
  const problem = { 'application/problem+json': { schema: { $ref: '#/components/schemas/Problem' } } };
  return {
    openapi: '3.1.0',
    info: { title: 'Payouts', version: '1.0.0' },
    security: [{ bearerAuth: [] }],
    paths: {
      '/payouts': {
        post: {
          operationId: 'createPayout',
          parameters: [{ $ref: '#/components/parameters/IdempotencyKey' }],
          requestBody: {
            required: true,
            content: { 'application/json': { schema: { $ref: '#/components/schemas/PayoutInput' } } },
          },
          responses: {
            '201': {
              description: 'Created (or a replay of the request that created it).',
              headers: { 'Idempotent-Replayed': { $ref: '#/components/headers/IdempotentReplayed' } },
              content: { 'application/json': { schema: { $ref: '#/components/schemas/Payout' } } },
            },
            '400': { description: 'Missing or invalid key.', content: problem },
            '409': { $ref: '#/components/responses/Conflict' },
            '422': { description: 'Key reused with another payload.', content: problem },
            '503': { $ref: '#/components/responses/Unavailable' },
          },
          'x-idempotency': completeContract(),
        },
      },
      '/payouts/{id}': {
        parameters: [{ name: 'id', in: 'path', required: true, schema: { type: 'string' } }],
        get: {
          operationId: 'getPayout',
          responses: { '200': { description: 'The payout.', content: { 'application/json': { schema: { $ref: '#/components/schemas/Payout' } } } } },
        },
      },
    },
    components: {
      securitySchemes: { bearerAuth: { type: 'http', scheme: 'bearer' } },
      parameters: {
        IdempotencyKey: { name: 'Idempotency-Key', in: 'header', required: true, schema: { type: 'string', maxLength: 255 } },
      },
      headers: {
        IdempotentReplayed: { schema: { type: 'boolean' } },
        RetryAfter: { schema: { type: 'integer', minimum: 0 } },
      },
      responses: {
        Conflict: {
          description: 'In progress, or abandoned and being reconciled.',
          headers: { 'Retry-After': { $ref: '#/components/headers/RetryAfter' } },
          content: problem,
        },
        Unavailable: {
          description: 'The idempotency store is unavailable.',
          headers: { 'Retry-After': { $ref: '#/components/headers/RetryAfter' } },
          content: problem,
        },
      },
      schemas: {
        PayoutInput: {
          type: 'object',
          required: ['amount', 'currency', 'destination'],
          properties: {
            amount: { type: 'integer', minimum: 1 },
            currency: { type: 'string' },
            destination: { $ref: '#/components/schemas/Destination' },
            note: { type: ['string', 'null'] },
          },
        },
        Destination: {
          type: 'object',
          properties: { iban: { type: 'string' }, holder: { type: 'string' } },
        },
        Payout: { type: 'object', required: ['id'], properties: { id: { type: 'string' }, status: { type: 'string' } } },
        Problem: { type: 'object', properties: { type: { type: 'string' }, title: { type: 'string' }, status: { type: 'integer' } } },
      },
    },
  };
}

/** Pointer of `POST /payouts` in {@link payoutsTree}. */
export const CREATE = '/paths/~1payouts/post';
/** Pointer of its contract. */
export const CONTRACT = `${CREATE}/x-idempotency`;

/** The payouts document as YAML text, after `edit` changed the tree. */
export function payouts(edit?: (tree: Tree, contract: Tree) => void): string {
  const tree = payoutsTree();
  edit?.(tree, tree.paths['/payouts'].post['x-idempotency']);
  return stringify(tree);
}

/** Any tree as YAML text. */
export function yamlOf(tree: Tree): string {
  return stringify(tree);
}
