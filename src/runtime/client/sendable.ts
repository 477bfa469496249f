/**
 * The checks `fetch` makes before it sends anything, made first: a request it would refuse is a programming
 * error to report at once (`TypeError`), not a network failure to retry or an outcome to look up.
 *
 * This file is copied into users' generated output: it imports nothing.
 */

/** An HTTP header name (RFC 9110 §5.1 token). */
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/** What `fetch` refuses in a header value: NUL, a line break, or a character beyond Latin-1 (not a byte string). */
const UNSENDABLE = /[\0\r\n\u0100-\uffff]/;
/** Methods `fetch` refuses. */
const FORBIDDEN_METHODS = new Set(['CONNECT', 'TRACE', 'TRACK']);
/**
 * Headers that frame the message or the connection, which `fetch` writes itself: Node's refuses them (`Expect`,
 * `Transfer-Encoding`, `Keep-Alive`, `Upgrade`, a `Connection` other than `close` or `keep-alive`) or hangs on a
 * `Content-Length` the body does not have; a browser drops them. Never an attempt, never an unknown outcome.
 */
const FRAMING = new Set(['content-length', 'transfer-encoding', 'keep-alive', 'upgrade', 'expect']);

/**
 * Throws `TypeError` unless `fetch` can send this request: `url` absolute (or, in a page, relative to it), the
 * method allowed, every header name a token and every value free of line breaks, NUL and characters beyond
 * Latin-1, and no header that frames the message ({@link FRAMING}). The message names the header, never its value, and a URL without its query (either may hold a key or a
 * credential).
 */
export function assertSendable(url: string, method: string, headers: Readonly<Record<string, string>>): void {
  for (const [name, value] of Object.entries(headers)) {
    if (!TOKEN.test(name)) throw new TypeError(`the header name ${JSON.stringify(name)} cannot be sent: a name is letters, digits and !#$%&'*+-.^_\`|~ only`);
    if (typeof value !== 'string' || UNSENDABLE.test(value)) {
      throw new TypeError(`the value of the header ${name} cannot be sent: it holds a line break, a NUL or a character beyond Latin-1 (encode it, e.g. with encodeURIComponent)`);
    }
    const lower = name.toLowerCase();
    if (FRAMING.has(lower) || (lower === 'connection' && !/^\s*(close|keep-alive)\s*$/i.test(value))) {
      throw new TypeError(`the header ${name} cannot be set: fetch frames the message and the connection itself (leave it out)`);
    }
  }
  if (FORBIDDEN_METHODS.has(method.toUpperCase())) throw new TypeError(`fetch cannot send a ${method} request`);
  // A page resolves a path against its own address; elsewhere (Node, a worker without one) a path is no URL.
  const page = (globalThis as { location?: { href?: unknown } }).location?.href;
  try {
    new URL(url, typeof page === 'string' ? page : undefined);
  } catch {
    // Without its query: a key or a credential may travel there (`?requestId=…`), and messages end up in logs.
    // No `s` flag (ES2018): create-next-app's tsconfig targets ES2017, and tsc checks a regex's flags against it.
    const shown = url.replace(/[?#][\s\S]*$/, '');
    throw new TypeError(`the request URL ${JSON.stringify(shown)} is not absolute: pass baseUrl as an http(s) URL (a path is only resolved in a web page)`);
  }
}
