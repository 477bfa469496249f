/**
 * Builds one HTTP request from an operation's path template and typed input. Used by generated clients.
 *
 * This file is copied into users' generated output: it imports nothing outside `runtime/client`.
 */
import type { PreparedRequest } from './engine.js';

/** A scalar parameter value. */
export type ParamValue = string | number | boolean;

/** A parameter's value: a scalar, an array of scalars, or an object of scalars (`null` / `undefined` members are left out). */
export type ParamInput = ParamValue | readonly (ParamValue | null | undefined)[] | Readonly<Record<string, ParamValue | null | undefined>>;

/** The parts of an operation call, by parameter location. */
export interface RequestParts {
  readonly path?: Readonly<Record<string, ParamInput>>;
  readonly query?: Readonly<Record<string, ParamInput | null | undefined>>;
  readonly headers?: Readonly<Record<string, ParamInput | null | undefined>>;
  /** Serialised for the operation's media type when not `undefined`. */
  readonly body?: unknown;
}

/**
 * How a parameter's value is written: OpenAPI 3 `style` and `explode`. Swagger 2.0 `collectionFormat` maps onto
 * these: `csv` → `form` (query) / `simple`, `ssv` → `spaceDelimited`, `pipes` → `pipeDelimited`,
 * `tsv` → `tabDelimited` (2.0 only), `multi` → exploded `form`; all but `multi` not exploded.
 */
export interface ParamFormat {
  readonly style: 'form' | 'simple' | 'label' | 'matrix' | 'spaceDelimited' | 'pipeDelimited' | 'tabDelimited' | 'deepObject';
  readonly explode: boolean;
}

/**
 * The formats of the parameters not written their location's default way: query `form` exploded
 * (`?id=1&id=2`), path and header `simple` not exploded (`1,2`).
 */
export interface ParamFormats {
  readonly path?: Readonly<Record<string, ParamFormat>>;
  readonly query?: Readonly<Record<string, ParamFormat>>;
  readonly headers?: Readonly<Record<string, ParamFormat>>;
}

/** How an operation's request is written, beyond its parts. */
export interface RequestFormat {
  /** The request body's media type (default `application/json`). */
  readonly mediaType?: string;
  readonly params?: ParamFormats;
}

const QUERY_DEFAULT: ParamFormat = { style: 'form', explode: true };
const SIMPLE_DEFAULT: ParamFormat = { style: 'simple', explode: false };

/** The separator of a not-exploded list, as written in a URL. */
const URL_DELIMITER: Readonly<Record<string, string>> = { spaceDelimited: '%20', pipeDelimited: '|', tabDelimited: '%09' };
/** The same separators in a header value. */
const HEADER_DELIMITER: Readonly<Record<string, string>> = { spaceDelimited: ' ', pipeDelimited: '|', tabDelimited: '\t' };

/**
 * Fills `{name}` segments of `pathTemplate`, appends the query, and serialises the body for the operation's request
 * media type (default `application/json`): JSON for `…json` types, Stripe-style bracketed fields for
 * `application/x-www-form-urlencoded`, a string or bytes (`Blob`, `ArrayBuffer`, a typed array) as they are for
 * other types (`text/*`, `application/octet-stream`, …). Parameters are written in their
 * {@link ParamFormat} (values percent-encoded in the URL, separators as the style says).
 * Throws `TypeError` when a path parameter is missing.
 */
export function buildRequest(baseUrl: string, method: string, pathTemplate: string, parts: RequestParts, format: RequestFormat = {}): PreparedRequest {
  const formats = format.params ?? {};
  const path = pathTemplate.replace(/\{([^}]+)\}/g, (_whole, name: string) => {
    const value = parts.path?.[name];
    if (value === undefined) throw new TypeError(`path parameter "${name}" is missing`);
    return expand(name, value, formats.path?.[name] ?? SIMPLE_DEFAULT, encodeURIComponent, URL_DELIMITER);
  });
  const query: string[] = [];
  for (const [name, value] of Object.entries(parts.query ?? {})) {
    // `null` (a nullable parameter left empty) is sent like an absent one.
    if (value !== undefined && value !== null) query.push(...queryPairs(name, value, formats.query?.[name] ?? QUERY_DEFAULT));
  }
  const headers: Record<string, string> = { accept: 'application/json' };
  for (const [name, value] of Object.entries(parts.headers ?? {})) {
    if (value !== undefined && value !== null) headers[name] = expand(name, value, formats.headers?.[name] ?? SIMPLE_DEFAULT, String, HEADER_DELIMITER);
  }
  let body: PreparedRequest['body'];
  if (parts.body !== undefined) {
    const mediaType = format.mediaType ?? 'application/json';
    headers['content-type'] = mediaType;
    body = encodeBody(parts.body, mediaType);
  }
  const url = baseUrl.replace(/\/+$/, '') + path + (query.length === 0 ? '' : `?${query.join('&')}`);
  return body === undefined ? { url, method, headers } : { url, method, headers, body };
}

/** The scalars of an array value, or the `[key, value]` pairs of an object value, or `undefined` for a scalar. */
function membersOf(value: ParamInput): { list: string[] } | { pairs: [string, string][] } | undefined {
  if (Array.isArray(value)) return { list: (value as readonly unknown[]).filter((v) => v !== undefined && v !== null).map(String) };
  if (typeof value === 'object' && value !== null) {
    return { pairs: Object.entries(value).filter(([, v]) => v !== undefined && v !== null).map(([k, v]) => [k, String(v)]) };
  }
  return undefined;
}

/** `name=value` pairs (encoded) of one query parameter; an empty array or object adds none. */
function queryPairs(name: string, value: ParamInput, format: ParamFormat): string[] {
  const e = encodeURIComponent;
  const members = membersOf(value);
  if (members === undefined) return [`${e(name)}=${e(String(value))}`];
  const delimiter = URL_DELIMITER[format.style] ?? ',';
  if ('list' in members) {
    if (members.list.length === 0) return [];
    if (format.explode || format.style === 'deepObject') return members.list.map((v) => `${e(name)}=${e(v)}`);
    return [`${e(name)}=${members.list.map(e).join(delimiter)}`];
  }
  if (members.pairs.length === 0) return [];
  if (format.style === 'deepObject') return members.pairs.map(([k, v]) => `${e(name)}[${e(k)}]=${e(v)}`);
  if (format.explode) return members.pairs.map(([k, v]) => `${e(k)}=${e(v)}`);
  return [`${e(name)}=${members.pairs.flatMap(([k, v]) => [e(k), e(v)]).join(delimiter)}`];
}

/**
 * A path segment (`encode` = percent-encoding) or header value (`encode` = none) in `simple`, `label` or `matrix`
 * style (RFC 6570 `{x}`, `{.x}`, `{;x}`), or joined by a 2.0 `collectionFormat` separator.
 */
function expand(name: string, value: ParamInput, format: ParamFormat, encode: (text: string) => string, delimiters: Readonly<Record<string, string>>): string {
  const prefix = format.style === 'label' ? '.' : format.style === 'matrix' ? ';' : '';
  const named = (text: string): string => (format.style === 'matrix' ? `${encode(name)}=${text}` : text);
  const members = membersOf(value);
  if (members === undefined) return prefix + named(encode(String(value)));
  // Exploded label and matrix values repeat their prefix; everything else is one list.
  const separator = format.explode && prefix !== '' ? prefix : (delimiters[format.style] ?? ',');
  if ('list' in members) {
    const items = members.list.map(encode);
    return prefix + (format.explode && format.style === 'matrix' ? items.map(named) : [named(items.join(separator))]).join(separator);
  }
  const pairs = members.pairs.map(([k, v]) => [encode(k), encode(v)] as const);
  if (format.explode) return prefix + pairs.map(([k, v]) => `${k}=${v}`).join(separator);
  return prefix + named(pairs.flatMap(([k, v]) => [k, v]).join(separator));
}

/** The request body in `mediaType`'s encoding: text, or for other than JSON and form media, bytes as given. */
function encodeBody(value: unknown, mediaType: string): PreparedRequest['body'] {
  if (/^application\/x-www-form-urlencoded\b/i.test(mediaType)) {
    const form = new URLSearchParams();
    appendFormField(form, '', value);
    return form.toString();
  }
  if (!/json\b/i.test(mediaType)) {
    if (typeof value === 'string' || value instanceof Blob) return value;
    if (value instanceof ArrayBuffer) return value.slice(0);
    if (ArrayBuffer.isView(value)) {
      // A copy: every attempt sends these bytes even if the caller reuses its buffer meanwhile.
      const bytes = new Uint8Array(value.byteLength);
      bytes.set(new Uint8Array(value.buffer, value.byteOffset, value.byteLength));
      return bytes.buffer;
    }
  }
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
