/**
 * A small in-memory ApiDocument for unit tests of the lint infrastructure (suppressions, baseline,
 * formatters), so they do not depend on the parser. Positions are fake but stable: line = pointer depth.
 */
import type { ApiDocument, OperationView } from '../../src/parser/model.js';
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
