/**
 * Redirects of requests that must not change: a command is sent with `redirect: 'manual'`, and only a redirect
 * that keeps its method, body and origin is followed (by the caller, as one more request).
 *
 * This file is copied into users' generated output: it imports nothing.
 */

/** The statuses `fetch` follows (RFC 9110 §15.4; 300, 304 and the unused 305/306 are answers of their own). */
const REDIRECT = new Set([301, 302, 303, 307, 308]);

/** What to do with a redirect answer: send the same request to `follow`, or stop (`location`: where it pointed, if known). */
export type Redirect = { readonly follow: string } | { readonly stop: true; readonly location: string | undefined };

/**
 * What the answer `res` to a request for `url` means as a redirect, or `undefined` when it is none.
 * A 307 or 308 (which keep the method and body) to `url`'s own origin is followed — any redirect there when the
 * request is `safe` (a GET or HEAD, which every redirect keeps as it is); every other redirect stops:
 * a 301, 302 or 303 (`fetch` would resend a `POST` as a `GET`), a 307 or 308 to another origin (the request's
 * headers and body would go there), one without a usable `Location` or with credentials in it (its `location` is
 * given without them), and one a browser hides (`opaqueredirect`,
 * status 0, under `redirect: 'manual'`). An answer that a `fetch` reached by following redirects anyway
 * (`res.redirected`) is no redirect but the answer of the request it landed on: `undefined`.
 */
export function redirectOf(res: Response, url: string, safe = false): Redirect | undefined {
  // Widened: Cloudflare's workers-types leave 'opaqueredirect' out of ResponseType (Workers never answer with one).
  if ((res.type as string) === 'opaqueredirect') return { stop: true, location: undefined };
  if (res.redirected || !REDIRECT.has(res.status)) return undefined;
  const location = res.headers.get('location');
  if (location === null) return { stop: true, location: undefined };
  let from: URL;
  let to: URL;
  try {
    from = new URL(url);
    to = new URL(location, from);
  } catch {
    return { stop: true, location };
  }
  // A `Location` with credentials (`user:pw@`) is one `fetch` refuses to request: never followed, never repeated.
  const credentials = to.username !== '' || to.password !== '';
  to.username = '';
  to.password = '';
  if ((safe || res.status === 307 || res.status === 308) && to.origin === from.origin && !credentials) return { follow: to.href };
  return { stop: true, location: to.href };
}

/** Lets go of a body that will not be read (a redirect's), so its connection is freed; never fails. */
export async function discardBody(res: Response): Promise<void> {
  try {
    await res.body?.cancel();
  } catch {
    // Already read, locked or errored: nothing is held.
  }
}
