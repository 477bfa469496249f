/**
 * Where a generated client sends its requests: the server URL the document gives, or the caller's `baseUrl`,
 * and the servers of operations that have their own.
 *
 * This file is copied into users' generated output: it imports nothing outside `runtime/client`.
 */

const ABSOLUTE = /^https?:\/\//i;
/** A scheme other than `http(s)` (or `localhost:8080` written without one, which URL parsers read as a scheme). */
const SCHEME = /^[a-z][a-z0-9+.-]*:/i;

const trimSlashes = (url: string): string => url.replace(/\/+$/, '');

/** A URL split at its `?`: what comes before (no trailing `/`), and its query's `name=value` pairs as written. */
export interface SplitUrl {
  readonly url: string;
  readonly query: readonly string[];
}

/** `url` split at its first `?` (the pairs of its query as written, empty ones left out). */
export function splitQuery(url: string): SplitUrl {
  const cut = url.indexOf('?');
  if (cut < 0) return { url: trimSlashes(url), query: [] };
  return { url: trimSlashes(url.slice(0, cut)), query: url.slice(cut + 1).split('&').filter((pair) => pair !== '') };
}

/** The decoded name of a query pair (as written when it does not decode). */
function nameOf(pair: string): string {
  const raw = pair.split('=', 1)[0]!;
  try {
    return decodeURIComponent(raw.replace(/\+/g, ' '));
  } catch {
    return raw;
  }
}

/**
 * The pairs of `groups` in order, except that a name a later group has replaces every pair of that name in the
 * earlier ones (an operation's own `api-version` parameter replaces the server URL's `?api-version=…`).
 */
export function mergeQuery(...groups: readonly (readonly string[])[]): string[] {
  const later = new Set<string>();
  const kept: string[][] = [];
  for (const group of [...groups].reverse()) {
    kept.unshift(group.filter((pair) => !later.has(nameOf(pair))));
    for (const pair of group) later.add(nameOf(pair));
  }
  return kept.flat();
}

const withQuery = (url: string, query: readonly string[]): string => (query.length === 0 ? url : `${url}?${query.join('&')}`);

/** The path of a URL as the URL parser reads it (a default port or a non-ASCII host changes nothing), no trailing `/`. */
const pathOf = (url: string): string => (ABSOLUTE.test(url) ? trimSlashes(new URL(url).pathname) : url);
/** The origin of an absolute URL (`https://api.example.com`), `''` for a path. */
const originOf = (url: string): string => (ABSOLUTE.test(url) ? new URL(url).origin : '');

/**
 * A URL the caller gives (`baseUrl`, an `operationServers` entry) checked and split: an `http(s)` URL (normalised
 * by the URL parser) or a path, with no fragment and no credentials. Throws `TypeError` naming `option` otherwise.
 */
function callerUrl(option: string, value: string): SplitUrl {
  if (typeof value !== 'string') throw new TypeError(`${option} must be a string: the URL of the server`);
  const quoted = `${option} ${JSON.stringify(value)}`;
  if (value.includes('#')) throw new TypeError(`${quoted} has a fragment (#…), which is never sent to a server: leave it out`);
  if (!ABSOLUTE.test(value) && SCHEME.test(value)) throw new TypeError(`${quoted} is not an http(s) URL or a path: write it with http:// or https://`);
  // `api.example.com/v1` would be fetched as a path relative to the page (or fail in Node): say so now.
  if (!ABSOLUTE.test(value) && value !== '' && !value.startsWith('/') && !value.startsWith('.')) {
    throw new TypeError(`${quoted} is neither an http(s) URL nor a path from the root: write it with https:// (or http://), or start a path with /`);
  }
  const split = splitQuery(value);
  if (!ABSOLUTE.test(value)) return split;
  let parsed: URL;
  try {
    parsed = new URL(split.url);
  } catch {
    throw new TypeError(`${quoted} is not a valid URL`);
  }
  if (parsed.username !== '' || parsed.password !== '') throw new TypeError(`${option} has credentials in it: send them in a header (options.headers) instead`);
  return { url: trimSlashes(parsed.origin + parsed.pathname), query: split.query };
}

/**
 * The last whole leading part of `documentPath` (`/api` of `/api/v1`; never all of it) that `path` ends with,
 * else `undefined`.
 */
function partialOverlap(path: string, documentPath: string): string | undefined {
  let found: string | undefined;
  for (let i = documentPath.indexOf('/', 1); i > 0; i = documentPath.indexOf('/', i + 1)) {
    const lead = documentPath.slice(0, i);
    if (path.endsWith(lead)) found = lead;
  }
  return found;
}

/** Where a client's requests go, from {@link clientBase}. */
export interface ClientBase {
  /** The URL each operation's path is appended to (no trailing `/`), with the query every request carries. */
  readonly url: string;
  /** Where an operation's relative server path goes in place of the document's path (with `baseUrl`'s query). */
  readonly root: string;
  /** The caller's `operationServers`, checked, by operation. */
  readonly operationServers: ReadonlyMap<string, string>;
  /**
   * Whether `baseUrl` moves the whole API (given while the document names an absolute server, on another origin: a
   * staging host, a local mock), so operations with an absolute server of their own move with it; not when
   * `baseUrl` names the documented server's own origin, nor when it only supplies the host a path-only document
   * leaves out.
   */
  readonly moved: boolean;
}

/**
 * Where a client sends its requests, from the document's server URL `server` (server variables at their defaults,
 * its query kept) and the caller's `baseUrl` and `operationServers`:
 * - `server` absolute (`https://api.example.com/v1`): `baseUrl` replaces its scheme, host and path when given (a
 *   full prefix, path included), else it is used as is;
 * - `server` a path (`/v1`: Swagger 2.0 `basePath` without `host`, a relative 3.x server URL; `/` when the
 *   document says nothing): `baseUrl` is required, the URL of the server, and the path is added to it unless
 *   `baseUrl`'s path already ends with the whole of it, so `https://api.example.com` and
 *   `https://api.example.com/v1` both give `https://api.example.com/v1`. A `baseUrl` that ends with only the start
 *   of a longer path (`https://host/api` for `/api/v1`) is refused rather than guessed at: pass `https://host`, or
 *   the whole prefix (`https://host/api/v1`, or `https://host/api/api/v1` if the API is mounted under `/api`).
 *
 * A query in `server` (`?api-version=2024-01-01`) is sent with every request; a query in `baseUrl` (`?code=KEY`)
 * too, its values replacing the server's of the same name. The root a relative operation server goes under is
 * `baseUrl` (else the server's origin) with the document's path taken off its end when it ends with it.
 *
 * Throws `TypeError` when `server` is a path and `baseUrl` is missing, when `baseUrl` only partly ends with the
 * document's path, and when `baseUrl` or an `operationServers` entry is not an `http(s)` URL or path, or has a
 * fragment or credentials.
 */
export function clientBase(server: string, baseUrl: string | undefined, operationServers: Readonly<Record<string, string | undefined>> = {}): ClientBase {
  const overrides = new Map<string, string>();
  for (const [name, value] of Object.entries(operationServers)) {
    if (value === undefined) continue;
    const checked = callerUrl(`operationServers.${name}`, value);
    overrides.set(name, withQuery(checked.url, checked.query));
  }
  const document = splitQuery(server);
  const documentPath = pathOf(document.url);
  if (baseUrl === undefined) {
    if (!ABSOLUTE.test(server)) {
      throw new TypeError(`the API's document gives only the path ${JSON.stringify(server)} for its server: pass baseUrl, the server's URL (e.g. "https://api.example.com")`);
    }
    return { url: withQuery(document.url, document.query), root: document.url.slice(0, document.url.length - documentPath.length), operationServers: overrides, moved: false };
  }
  const given = callerUrl('baseUrl', baseUrl);
  const givenPath = pathOf(given.url);
  let url = given.url;
  let root = given.url;
  if (documentPath !== '' && givenPath.endsWith(documentPath)) {
    root = given.url.slice(0, given.url.length - documentPath.length);
  } else if (documentPath !== '' && !ABSOLUTE.test(server)) {
    const lead = partialOverlap(givenPath, documentPath);
    if (lead !== undefined) {
      const without = given.url.slice(0, given.url.length - lead.length);
      throw new TypeError(
        `baseUrl ${JSON.stringify(baseUrl)} ends with ${JSON.stringify(lead)}, only the start of the document's path ${JSON.stringify(documentPath)}: ` +
          `pass the server's URL without it (${JSON.stringify(without)}), or with the whole path (${JSON.stringify(without + documentPath)}; ` +
          `${JSON.stringify(given.url + documentPath)} if the API is mounted under ${JSON.stringify(lead)})`,
      );
    }
    url = given.url + documentPath;
  }
  // A baseUrl on the documented server's own origin (`env.API_URL ?? DEFAULT_SERVER_URL`) moves nothing else.
  const moved = ABSOLUTE.test(server) && originOf(given.url) !== originOf(document.url);
  return { url: withQuery(url, mergeQuery(document.query, given.query)), root: withQuery(root, given.query), operationServers: overrides, moved };
}

/**
 * The URL the operation `operation` (one with a server of its own: 3.x path- or operation-level `servers`)
 * appends its path to, from its server URL `server` and the client's {@link ClientBase}:
 * - the caller's `operationServers` entry for it when there is one (used as is, like an absolute `baseUrl`);
 * - else, when `server` is absolute (`https://uploads.example.com`): itself, unless `baseUrl` moved the whole API
 *   (see {@link ClientBase.moved}: a test's mock must not let an upload reach the real host), then its path under
 *   `root`; a `baseUrl` that only supplies a path-only document's host is not sent to another host;
 * - else `server` (a path, `/v2`) in place of the document's path: after `root`, with `root`'s query
 *   (`https://api.example.com` + `/v2`).
 * A query in `server` is kept.
 */
export function operationBaseUrl(base: ClientBase, operation: string, server: string): string {
  const override = base.operationServers.get(operation);
  if (override !== undefined) return override;
  const own = splitQuery(server);
  if (ABSOLUTE.test(own.url) && !base.moved) return withQuery(own.url, own.query);
  const root = splitQuery(base.root);
  return withQuery(root.url + (ABSOLUTE.test(own.url) ? pathOf(own.url) : own.url), mergeQuery(own.query, root.query));
}
