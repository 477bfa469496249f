/**
 * A small in-memory ApiDocument for unit tests of the lint infrastructure (suppressions, baseline,
 * formatters), so they do not depend on the parser. Positions are fake but stable: line = pointer depth.
 */
import type { ApiDocument, IdempotencyContract, OperationView } from '../../src/parser/model.js';
import type { Finding, Severity } from '../../src/lint/rule.js';

const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];

function escape(token: string): string {
  return token.replace(/~/g, '~0').replace(/\//g, '~1');
}

function unescape(token: string): string {
  return token.replace(/~1/g, '/').replace(/~0/g, '~');
}

/** Builds a document over `root` (an OpenAPI object) located at `file`. */
export function fakeDocument(file: string, root: Record<string, unknown>): ApiDocument {
  const operations: OperationView[] = [];
  const paths = (root.paths ?? {}) as Record<string, Record<string, unknown>>;
  for (const [p, pathItem] of Object.entries(paths)) {
    for (const method of METHODS) {
      const node = pathItem[method] as Record<string, unknown> | undefined;
      if (!node) continue;
      const operationId = typeof node.operationId === 'string' ? node.operationId : undefined;
      operations.push({
        method,
        path: p,
        operationId,
        node,
        at: { file, pointer: `/paths/${escape(p)}/${method}` },
        pathItem,
        pathItemAt: { file, pointer: `/paths/${escape(p)}` },
        contract: undefined,
        label: `${method.toUpperCase()} ${p}${operationId ? ` (${operationId})` : ''}`,
      });
    }
  }
  const get = (at: { pointer: string }) => {
    let value: unknown = root;
    for (const token of at.pointer.split('/').slice(1).map(unescape)) {
      if (typeof value !== 'object' || value === null) return undefined;
      value = (value as Record<string, unknown>)[token];
    }
    return value;
  };
  return {
    file,
    version: '3.1',
    root,
    operations,
    defaultsAt: undefined,
    get,
    deref: (value, at) => ({ value, at }),
    position: (at) => ({ line: at.pointer.split('/').length, column: 3 }),
    warnings: [],
  };
}

/** A finding with defaults for the fields a test does not care about. */
export function fakeFinding(partial: Partial<Finding> & { ruleId: string; file: string; pointer: string }): Finding {
  return {
    severity: 'error' as Severity,
    message: `${partial.ruleId} at ${partial.pointer}`,
    messageId: 'problem',
    line: partial.pointer.split('/').length,
    column: 3,
    operations: [],
    ...partial,
  };
}

/** A contract for markdown-card tests: every readiness question answered unless overridden. */
export function fakeContract(operationAt: { file: string; pointer: string }, overrides: Partial<IdempotencyContract> = {}): IdempotencyContract {
  const absent = undefined;
  return {
    enabled: true,
    key: { in: 'header', name: 'Idempotency-Key', required: true, maxLength: 255, pattern: absent },
    scope: [{ kind: 'principal' }, { kind: 'header', name: 'X-Tenant-Id' }],
    fingerprint: { include: ['/amount', '/currency'], exclude: [] },
    ttl: { raw: 'P1D', ms: 86_400_000 },
    lease: { raw: 'PT30S', ms: 30_000 },
    retry: { deadline: { raw: 'PT30S', ms: 30_000 }, maxAttempts: 4, backoff: absent },
    effect: { owner: 'payouts', external: true, providerKey: 'forward', statusRoute: 'getPayout' },
    transient: [429, 503],
    responses: {
      replay: { header: 'Idempotent-Replayed', sendOnFirst: true },
      missingKey: { status: 400 },
      invalidKey: { status: 400 },
      mismatch: { status: 422 },
      inProgress: { status: 409 },
      abandoned: { status: 409 },
      storeUnavailable: { status: 503 },
    },
    unknownOutcome: 'status-route',
    raw: {},
    schemaErrors: [],
    at: (...path: (string | number)[]) => ({ file: operationAt.file, pointer: `${operationAt.pointer}/x-idempotency${path.map((p) => `/${p}`).join('')}` }),
    ...overrides,
  };
}

/** Replaces the contract of the operation with `label`. */
export function withContract(document: ApiDocument, label: string, contract: IdempotencyContract): ApiDocument {
  return { ...document, operations: document.operations.map((op) => (op.label === label ? { ...op, contract } : op)) } as ApiDocument;
}
