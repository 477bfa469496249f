/**
 * Where a generated client sends its requests: the server URL the document gives, or the caller's `baseUrl`.
 *
 * This file is copied into users' generated output: it imports nothing outside `runtime/client`.
 */

const ABSOLUTE = /^https?:\/\//i;

const trimSlashes = (url: string): string => url.replace(/\/+$/, '');

/** The path of `url`; a relative `url` (a browser page's `/api`) is a path itself. */
const pathOf = (url: string): string => new URL(url, 'http://localhost').pathname;

/**
 * The URL every operation's path is appended to (no trailing `/`), from the document's server URL `server`
 * (server variables at their defaults) and the caller's `baseUrl`:
 * - `server` absolute (`https://api.example.com/v1`): `baseUrl` replaces it when given (a full prefix, path
 *   included), else it is used as is;
 * - `server` a path (`/v1`: Swagger 2.0 `basePath` without `host`, a relative 3.x server URL; `/` when the
 *   document says nothing): `baseUrl` is the URL of the server, and the path is added to it unless `baseUrl`
 *   already ends with it, so `https://api.example.com` and `https://api.example.com/v1` both give
 *   `https://api.example.com/v1`.
 *
 * Throws `TypeError` when `server` is a path and `baseUrl` is missing.
 */
export function baseUrlOf(server: string, baseUrl: string | undefined): string {
  if (ABSOLUTE.test(server)) return trimSlashes(baseUrl ?? server);
  if (baseUrl === undefined) {
    throw new TypeError(`the API's document gives only the path ${JSON.stringify(server)} for its server: pass baseUrl, the server's URL (e.g. "https://api.example.com")`);
  }
  const base = trimSlashes(baseUrl);
  const path = trimSlashes(server);
  return path === '' || trimSlashes(pathOf(base)).endsWith(path) ? base : base + path;
}

/**
 * The URL an operation with servers of its own (3.x path- or operation-level `servers`) appends its path to:
 * the caller's `baseUrl` when given (it applies to every operation), else the operation's `server` itself
 * when absolute, else `server` resolved as a URL reference against the client's base URL `clientBase`
 * (`/uploads` against `https://api.example.com/v1` is `https://api.example.com/uploads`; against a relative
 * base, as in a browser page, it stays relative to the page).
 */
export function operationBaseUrl(server: string, baseUrl: string | undefined, clientBase: string): string {
  if (baseUrl !== undefined) return trimSlashes(baseUrl);
  if (ABSOLUTE.test(server) || !ABSOLUTE.test(clientBase)) return trimSlashes(server);
  return trimSlashes(new URL(server, clientBase).href);
}
