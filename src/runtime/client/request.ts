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
 * Fills `{name}` segments of `pathTemplate` (percent-encoded), appends the query, and serialises the body
 * for the operation's request media type (default `application/json`): JSON for `…json` types, Stripe-style
 * bracketed fields for `application/x-www-form-urlencoded`, the text itself for `text/*`.
 * Throws `TypeError` when a path parameter is missing.
 */
export function buildRequest(baseUrl: string, method: string, pathTemplate: string, parts: RequestParts, mediaType = 'application/json'): PreparedRequest {
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
    headers['content-type'] = mediaType;
    body = encodeBody(parts.body, mediaType);
  }
  const url = baseUrl.replace(/\/+$/, '') + path + (query === '' ? '' : `?${query}`);
  return body === undefined ? { url, method, headers } : { url, method, headers, body };
}

/** The request body as text in `mediaType`'s encoding. */
function encodeBody(value: unknown, mediaType: string): string {
  if (/^application\/x-www-form-urlencoded\b/i.test(mediaType)) {
    const form = new URLSearchParams();
    appendFormField(form, '', value);
    return form.toString();
  }
  if (typeof value === 'string' && !/json\b/i.test(mediaType)) return value;
  return JSON.stringify(value);
}

/**
 * Form fields the way Stripe-style APIs and OpenAPI `deepObject` read them: `metadata[order_id]=…`,
 * `expand[0]=…`; `null` is sent empty (Stripe's "unset"), `undefined` is left out.
 */
function appendFormField(form: URLSearchParams, name: string, value: unknown): void {
  if (value === undefined) return;
  if (value === null) {
    if (name !== '') form.append(name, '');
    return;
  }
  if (Array.isArray(value)) {
    value.forEach((item, index) => appendFormField(form, `${name}[${index}]`, item));
    return;
  }
  if (typeof value === 'object') {
    for (const [key, item] of Object.entries(value as Record<string, unknown>)) appendFormField(form, name === '' ? key : `${name}[${key}]`, item);
    return;
  }
  form.append(name, String(value));
}
