/**
 * Builds one HTTP request from an operation's path template and typed input. Used by generated clients.
 *
 * This file is copied into users' generated output: it imports nothing outside `runtime/client`.
 */
import type { PreparedRequest } from './engine.js';

/** A scalar parameter value; arrays repeat the parameter (OpenAPI `form` + `explode`). */
export type ParamValue = string | number | boolean;

/** The parts of an operation call, by parameter location. */
export interface RequestParts {
  readonly path?: Readonly<Record<string, ParamValue>>;
  readonly query?: Readonly<Record<string, ParamValue | readonly ParamValue[] | null | undefined>>;
  readonly headers?: Readonly<Record<string, ParamValue | null | undefined>>;
  /** Sent as JSON when not `undefined`. */
  readonly body?: unknown;
}

/**
 * Fills `{name}` segments of `pathTemplate` (percent-encoded), appends the query, and serialises the body.
 * Throws `TypeError` when a path parameter is missing.
 */
export function buildRequest(baseUrl: string, method: string, pathTemplate: string, parts: RequestParts): PreparedRequest {
  const path = pathTemplate.replace(/\{([^}]+)\}/g, (_whole, name: string) => {
    const value = parts.path?.[name];
    if (value === undefined) throw new TypeError(`path parameter "${name}" is missing`);
    return encodeURIComponent(String(value));
  });
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(parts.query ?? {})) {
    // `null` (a nullable parameter left empty) is sent like an absent one.
    if (value === undefined || value === null) continue;
    const values: readonly ParamValue[] = Array.isArray(value) ? value : [value as ParamValue];
    for (const v of values) search.append(name, String(v));
  }
  const query = search.toString();
  const headers: Record<string, string> = { accept: 'application/json' };
  for (const [name, value] of Object.entries(parts.headers ?? {})) {
    if (value !== undefined && value !== null) headers[name] = String(value);
  }
  let body: string | undefined;
  if (parts.body !== undefined) {
    headers['content-type'] = 'application/json';
    body = JSON.stringify(parts.body);
  }
  const url = baseUrl.replace(/\/+$/, '') + path + (query === '' ? '' : `?${query}`);
  return body === undefined ? { url, method, headers } : { url, method, headers, body };
}
