/**
 * Builds one HTTP request from an operation's path template and typed input. Used by generated clients.
 *
 * This file is copied into users' generated output: it imports nothing outside `runtime/client`.
 */
import { encodeBody } from './body.js';
import type { PreparedRequest } from './engine.js';
import { headerName, setHeader } from './headers.js';
import { expand, formatOf, percentEncode, queryPairs, QUERY_DEFAULT, SIMPLE_DEFAULT, TEXT_DELIMITER, URL_DELIMITER, type ParamFormat, type ParamFormats, type ParamInput } from './params.js';
import { mergeQuery, splitQuery } from './server.js';

/** The parts of an operation call, by parameter location. */
export interface RequestParts {
  readonly path?: Readonly<Record<string, ParamInput>>;
  readonly query?: Readonly<Record<string, ParamInput | null | undefined>>;
  readonly headers?: Readonly<Record<string, ParamInput | null | undefined>>;
  /** Cookie parameters, sent in one `Cookie` header (after a `Cookie` header given with the call's headers). */
  readonly cookies?: Readonly<Record<string, ParamInput | null | undefined>>;
  /** Serialised for the operation's media type when not `undefined`. */
  readonly body?: unknown;
}

/** How an operation's request is written, beyond its parts. */
export interface RequestFormat {
  /** The request body's media type (default `application/json`). */
  readonly mediaType?: string;
  readonly params?: ParamFormats;
  /** How form-body fields are written: 2.0 `collectionFormat` of `in: formData` arrays, 3.x `encoding` style/explode. */
  readonly fields?: Readonly<Record<string, ParamFormat>>;
  /** The `Content-Type` of multipart parts a 3.x `encoding` names (files without a type of their own, text fields). */
  readonly partTypes?: Readonly<Record<string, string>>;
}

/**
 * Fills `{name}` segments of `pathTemplate` and appends it to `baseUrl` (before a query `baseUrl` has, whose pairs are
 * kept unless the call sets a query parameter of the same name), appends the query (after pairs the template writes
 * itself; a fragment in the template is not sent), writes cookie parameters, and encodes the body for the operation's request
 * media type (default `application/json`; see `encodeBody`). Parameters are written in their
 * {@link ParamFormat} (values percent-encoded in the URL, separators as the style says).
 * Throws `TypeError` when a path parameter is missing or makes a `.` or `..` segment, a form body is not an object of fields, or a value cannot
 * be written where it goes (a path or header value with an array or object inside it, a `Map`, a file outside a
 * multipart body, a value nested past 32 names; see `queryPairs` and `expand`).
 */
export function buildRequest(baseUrl: string, method: string, pathTemplate: string, parts: RequestParts, format: RequestFormat = {}): PreparedRequest {
  const formats = format.params ?? {};
  const filled = withoutFragment(pathTemplate).replace(/\{([^}]+)\}/g, (_whole, name: string) => {
    const value = parts.path !== undefined && Object.hasOwn(parts.path, name) ? parts.path[name] : undefined;
    if (value === undefined) throw new TypeError(`path parameter "${name}" is missing`);
    return expand(name, value, formatOf(formats.path, name) ?? SIMPLE_DEFAULT, percentEncode, URL_DELIMITER);
  });
  // Values are percent-encoded (`?`, `&` and `=` too), so the first `?` is the template's own.
  const { url: path, query: fixedQuery } = splitPathQuery(filled);
  refuseDotSegments(path, pathTemplate);
  const query: string[] = [];
  for (const [name, value] of Object.entries(parts.query ?? {})) {
    // `null` (a nullable parameter left empty) is sent like an absent one.
    if (value !== undefined && value !== null) query.push(...queryPairs(name, value, formatOf(formats.query, name) ?? QUERY_DEFAULT));
  }
  // Header names in any letter case are one header: the caller's `Accept` replaces this one.
  const headers: Record<string, string> = { accept: 'application/json' };
  for (const [name, value] of Object.entries(parts.headers ?? {})) {
    if (value !== undefined && value !== null) setHeader(headers, name, expand(name, value, formatOf(formats.headers, name) ?? SIMPLE_DEFAULT, String, TEXT_DELIMITER));
  }
  const cookies: string[] = [];
  for (const [name, value] of Object.entries(parts.cookies ?? {})) {
    // Written as form query pairs (percent-encoded, so `;` and `,` in a value cannot split the header).
    if (value !== undefined && value !== null) cookies.push(...queryPairs(name, value, formatOf(formats.cookies, name) ?? QUERY_DEFAULT));
  }
  if (cookies.length > 0) {
    // One `Cookie` header (RFC 6265 §5.4): joined to one the caller set, whatever its case.
    const given = headerName(headers, 'cookie');
    if (given === undefined) headers['cookie'] = cookies.join('; ');
    else headers[given] = `${headers[given]}; ${cookies.join('; ')}`;
  }
  let body: PreparedRequest['body'];
  if (parts.body !== undefined) {
    const given = headerName(headers, 'content-type');
    const encoded = encodeBody(parts.body, format.mediaType ?? 'application/json', format.fields, format.partTypes, given === undefined ? undefined : headers[given]);
    // The encoding's type: a caller's for text or bytes when the document allows it, else the document's (a
    // multipart one names the boundary the bytes were written with).
    setHeader(headers, 'content-type', encoded.contentType);
    body = encoded.body;
  }
  // One `/` between them, whether or not the document's path starts with one (`business-accounts/{id}` happens).
  const base = splitQuery(baseUrl);
  const pairs = base.query.length === 0 && fixedQuery.length === 0 ? query : mergeQuery(base.query, fixedQuery, query);
  const url = base.url + (path.startsWith('/') ? '' : '/') + path + (pairs.length === 0 ? '' : `?${pairs.join('&')}`);
  return body === undefined ? { url, method, headers } : { url, method, headers, body };
}

/**
 * Documents write what tells two operations on one path apart after the path. A fragment (AWS's
 * `/#Action=DescribeInstances`, `/lenses/{LensAlias}#ClientRequestToken`) is never sent: `fetch` would drop it,
 * and the query written after it with it. A query in the template (`/current/airquality?city={city}`) is sent, its
 * pairs joined to the call's with `&` (see {@link splitPathQuery}): a second `?` would end up inside a value.
 */
function withoutFragment(pathTemplate: string): string {
  // `{#x}` (an RFC 6570 expansion) is a parameter's name here, not a fragment.
  const hash = pathTemplate.search(/(?<!\{)#/);
  return hash < 0 ? pathTemplate : pathTemplate.slice(0, hash);
}

/**
 * Throws `TypeError` when path parameters made a `.` or `..` segment of `path` that `pathTemplate` does not have:
 * the URL parser resolves it away (`/orders/..` is `/`), so the request would reach another route. Encoding cannot
 * help: `%2e` is a dot to the parser too.
 */
function refuseDotSegments(path: string, pathTemplate: string): void {
  const dots = (text: string): number => text.split('/').filter((segment) => segment === '.' || segment === '..').length;
  if (dots(path) > dots(withoutFragment(pathTemplate).split('?')[0]!)) {
    throw new TypeError(`a path parameter of ${pathTemplate} is "." or "..": the URL would resolve it away and reach another path`);
  }
}

/** A filled path template's path, and the query pairs it writes itself. */
function splitPathQuery(filled: string): { url: string; query: string[] } {
  const question = filled.indexOf('?');
  if (question < 0) return { url: filled, query: [] };
  return { url: filled.slice(0, question), query: filled.slice(question + 1).split('&').filter((pair) => pair !== '') };
}
