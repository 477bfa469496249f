/**
 * Where a document says its API lives, for generated clients: OpenAPI 3 `servers` (server variables at their
 * defaults; relative URLs kept as paths) and Swagger 2.0 `schemes` / `host` / `basePath`.
 *
 * Spec text leaves here as plain strings; templates write them through the `json` / `comment` helpers only.
 */
import type { ApiDocument, OperationView } from '../../parser/model.js';

/** One server the document lists. */
export interface ServerEntry {
  /**
   * An absolute `http(s)` URL, or a path (`/v1`) relative to where the document is served; no trailing `/` (but `/`
   * itself) before its query, if it has one.
   */
  readonly url: string;
  readonly description?: string;
}

/** The servers of a document, and the one a client sends to by default. */
export interface DocumentServers {
  readonly servers: readonly ServerEntry[];
  /** The first absolute server's URL, else the first server's path (`/` when the document names none). */
  readonly server: string;
  /** `true` when {@link server} is an absolute URL (a client can use it without a `baseUrl`). */
  readonly absolute: boolean;
}

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

const HTTP = /^https?:\/\//i;
/** `true` for an absolute `http(s)` server URL (else it is a path). */
export const isAbsoluteServer = (url: string): boolean => HTTP.test(url);

/** Any other scheme (`ws:`, `ftp:`, `javascript:` …): not a server a fetch client can call. */
const OTHER_SCHEME = /^[a-z][a-z0-9+.-]*:/i;

/**
 * A server URL as a client uses it, or `undefined` when it is none: absolute `http(s)` URLs normalised by the
 * URL parser (no trailing `/`), scheme-relative `//host/…` as `https:`, anything without a scheme as the path it
 * names (`v1`, `./v1` → `/v1`). A query is kept (`?api-version=2024-01-01`: clients send it with every request);
 * a fragment is dropped (it is never sent). Substitute `{variable}`s first.
 */
function normaliseServerUrl(text: string): string | undefined {
  const url = text.trim();
  const absolute = url.startsWith('//') ? `https:${url}` : url;
  if (HTTP.test(absolute)) {
    let parsed: URL;
    try {
      parsed = new URL(absolute);
    } catch {
      return undefined;
    }
    if (parsed.username !== '' || parsed.password !== '') return undefined;
    return `${parsed.origin}${parsed.pathname.replace(/\/+$/, '')}${parsed.search}`;
  }
  if (OTHER_SCHEME.test(url)) return undefined;
  const parsed = new URL(url, 'http://localhost/');
  const path = parsed.pathname.replace(/\/+$/, '');
  return `${path === '' ? '/' : path}${parsed.search}`;
}

/** A 3.x Server Object's URL with each `{variable}` replaced by its `default`; `undefined` when one has none. */
function substitute(server: Json): string | undefined {
  if (typeof server['url'] !== 'string') return undefined;
  const variables = isObject(server['variables']) ? server['variables'] : {};
  let complete = true;
  const url = server['url'].replace(/\{([^{}]*)\}/g, (_whole, name: string) => {
    const variable = Object.hasOwn(variables, name) ? variables[name] : undefined;
    if (isObject(variable) && typeof variable['default'] === 'string') return variable['default'];
    complete = false;
    return '';
  });
  return complete ? url : undefined;
}

/** The usable entries of a 3.x `servers` list (none when it is absent or not a list). */
function serverList(list: unknown): ServerEntry[] {
  if (!Array.isArray(list)) return [];
  return list.flatMap((server): ServerEntry[] => {
    if (!isObject(server)) return [];
    const raw = substitute(server);
    const url = raw === undefined ? undefined : normaliseServerUrl(raw);
    if (url === undefined) return [];
    const description = typeof server['description'] === 'string' ? server['description'] : undefined;
    return [description === undefined ? { url } : { url, description }];
  });
}

/** Swagger 2.0: one server per `http` / `https` scheme (`https` first; `https` alone when none is listed), or `basePath` alone without `host`. */
function swaggerServers(root: Json): ServerEntry[] {
  const basePath = typeof root['basePath'] === 'string' ? root['basePath'].trim() : '';
  // `basePath` MUST start with `/`; documents that leave it out (`open-banking/v2.1/`) still mean a path from the root.
  const path = basePath === '' ? '' : normaliseServerUrl(basePath.startsWith('/') ? basePath : `/${basePath}`) ?? '';
  const host = typeof root['host'] === 'string' ? root['host'].trim() : '';
  if (host === '' || /[/?#@\s]/.test(host)) return [{ url: path === '' ? '/' : path }];
  const listed = Array.isArray(root['schemes']) ? root['schemes'].filter((s): s is string => typeof s === 'string').map((s) => s.toLowerCase()) : [];
  const schemes = ['https', 'http'].filter((scheme) => listed.includes(scheme));
  return (schemes.length === 0 ? ['https'] : schemes).flatMap((scheme) => {
    const url = normaliseServerUrl(`${scheme}://${host}${path === '/' ? '' : path}`);
    return url === undefined ? [] : [{ url }];
  });
}

/** The document's servers, and the client's default one. */
export function documentServers(doc: ApiDocument): DocumentServers {
  const listed = doc.version === '2.0' ? swaggerServers(doc.root) : serverList(doc.root['servers']);
  // OpenAPI 3: an absent or empty `servers` means one server at `/`.
  const servers = listed.length === 0 ? [{ url: '/' }] : listed;
  const chosen = servers.find((entry) => HTTP.test(entry.url)) ?? servers[0]!;
  return { servers, server: chosen.url, absolute: HTTP.test(chosen.url) };
}

/**
 * The server an operation overrides the document's with (3.x operation-level `servers`, else path-level): the
 * first usable one's URL, or `null` when it names none, or the same as `documentServer` (when given).
 */
export function operationServer(doc: ApiDocument, op: OperationView, documentServer?: string): string | null {
  if (doc.version === '2.0') return null;
  const own = serverList(op.node['servers']);
  const list = own.length > 0 ? own : serverList(op.pathItem['servers']);
  const chosen = list.find((entry) => HTTP.test(entry.url)) ?? list[0];
  return chosen === undefined || chosen.url === documentServer ? null : chosen.url;
}
