/**
 * What the framework adapters share: the options every route guard takes and small request helpers.
 * Imports only `../guard.js`; copied into users' generated code with the adapter.
 */
import type { CompiledContract } from '../contract.js';
import type { GuardOptions } from '../guard.js';

/**
 * Options of a route guard: the guard core's options (the store, the reconciliation hook, timeouts, …)
 * plus how to read the principal and the delivery's request id from the framework's request.
 */
export interface RouteGuardOptionsFor<Req> extends GuardOptions {
  /**
   * The authenticated owner of the request (user, account, API client id) for `principal` key scopes.
   * Return `undefined` when the request has none: a principal-scoped operation then answers 400.
   * Runs after your authentication middleware, so read what it attached.
   */
  readonly principal?: (request: Req) => string | undefined | Promise<string | undefined>;
  /** The delivery's request id, for logs only (default: the `X-Request-Id` header). */
  readonly requestId?: (request: Req) => string | undefined;
}

/** Header map for the guard: lower-case names; a header sent several times stays an array. */
export type GuardHeaders = Record<string, string | readonly string[] | undefined>;

/** Builds the guard's header map from `[name, values]` pairs, keeping repeated headers as arrays. */
export function headersFromEntries(entries: Iterable<readonly [string, readonly string[] | string | undefined]>): GuardHeaders {
  const headers: GuardHeaders = {};
  for (const [name, value] of entries) {
    if (value === undefined) continue;
    const lower = name.toLowerCase();
    const values = typeof value === 'string' ? [value] : value;
    const previous = headers[lower];
    const merged = previous === undefined ? [...values] : [...(typeof previous === 'string' ? [previous] : previous), ...values];
    headers[lower] = merged.length === 1 ? merged[0] : merged;
  }
  return headers;
}

/** The single value of a header, or `undefined` when absent or sent several times. */
export function singleHeader(headers: GuardHeaders, name: string): string | undefined {
  const value = headers[name.toLowerCase()];
  return typeof value === 'string' ? value : undefined;
}

/** Query parameters as the guard reads them: repeated names become arrays. */
export function queryFromSearchParams(params: URLSearchParams): Record<string, string | readonly string[]> {
  const query: Record<string, string | string[]> = {};
  for (const [name, value] of params) {
    const previous = query[name];
    query[name] = previous === undefined ? value : Array.isArray(previous) ? [...previous, value] : [previous, value];
  }
  return query;
}

/** Concatenates byte chunks into one `Uint8Array`. */
export function concatBytes(chunks: readonly Uint8Array[]): Uint8Array {
  let length = 0;
  for (const chunk of chunks) length += chunk.length;
  const out = new Uint8Array(length);
  let offset = 0;
  for (const chunk of chunks) {
    out.set(chunk, offset);
    offset += chunk.length;
  }
  return out;
}

/** Whether the guard reads query parameters for this contract (a query scope part or fingerprinted query). */
export function readsQuery(contract: CompiledContract): boolean {
  return contract.fingerprint.query.length > 0 || contract.scope.some((part) => part.kind === 'query');
}

/**
 * The guard's header map from Node's parsed headers: `headers` (repeated headers joined with `, `, as Node
 * does) with the key header's separate values from `distinct()` when it may have been sent several times —
 * asked only then, because Node builds that map on demand.
 */
export function nodeHeaders(
  headers: Readonly<Record<string, string | readonly string[] | undefined>>,
  distinct: () => Readonly<Record<string, readonly string[] | undefined>>,
  keyHeader: string,
): GuardHeaders {
  const result: GuardHeaders = { ...headers };
  const joined = headers[keyHeader];
  if (typeof joined === 'string' && joined.includes(',')) {
    const values = distinct()[keyHeader];
    if (values !== undefined && values.length > 1) result[keyHeader] = values;
  }
  return result;
}
