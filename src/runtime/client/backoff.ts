/**
 * Pauses between attempts: capped exponential backoff with jitter, and the `Retry-After` header.
 *
 * This file is copied into users' generated output: it imports only the compiled contract types.
 */
import type { CompiledBackoff } from '../contract.js';

/**
 * The pause before attempt number `attempt + 1`, after `attempt` attempts (1-based), in milliseconds.
 * The cap grows `initialMs · 2^(attempt-1)` up to `maxMs`; `full` jitter draws uniformly from `[0, cap)`,
 * `equal` from `[cap/2, cap)`, `none` waits the cap.
 * @param random a uniform source in `[0, 1)` (injectable for tests).
 */
export function backoffDelay(backoff: CompiledBackoff, attempt: number, random: () => number): number {
  const exp = Math.min(30, Math.max(0, attempt - 1));
  const cap = Math.min(backoff.maxMs, backoff.initialMs * 2 ** exp);
  if (cap <= 0) return 0;
  const r = Math.min(Math.max(random(), 0), 1);
  switch (backoff.jitter) {
    case 'none':
      return cap;
    case 'equal':
      return Math.floor(cap / 2 + (r * cap) / 2);
    default:
      return Math.floor(r * cap);
  }
}

/**
 * Reads a `Retry-After` value (RFC 9110 §10.2.3: delay-seconds or an HTTP-date) as milliseconds from `now`.
 * Returns `undefined` when absent or unparsable; a date in the past gives `0`. An HTTP-date is the server's clock:
 * with `served`, the answer's own `Date` header, the wait is measured from that (a server whose clock runs 5 s
 * ahead means "in 1 s" by `Date` + 1 s, not "in 6 s"), and from `now` without it.
 */
export function parseRetryAfter(value: string | null | undefined, now: number, served?: string | null): number | undefined {
  if (value === null || value === undefined) return undefined;
  const text = value.trim();
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  const at = parseHttpDate(text);
  if (at === undefined) return undefined;
  const from = served === null || served === undefined ? undefined : parseHttpDate(served.trim());
  return Math.max(0, at - (from ?? now));
}

/** An HTTP-date (RFC 9110 §5.6.7) as ms since the epoch, or `undefined`. */
function parseHttpDate(text: string): number | undefined {
  // The three forms: IMF-fixdate and RFC 850's end in "GMT"; asctime's (`Wed Dec  2 09:21:15 2026`) has no zone and
  // is UTC, which Date.parse would read as local time.
  const asctime = /^[A-Za-z]{3} ([A-Za-z]{3}) ( \d|\d\d) (\d\d:\d\d:\d\d) (\d{4})$/.exec(text);
  if (!asctime && !/GMT$/i.test(text)) return undefined;
  const at = Date.parse(asctime ? `${asctime[2]!.trim()} ${asctime[1]} ${asctime[4]} ${asctime[3]} GMT` : text);
  return Number.isNaN(at) ? undefined : at;
}
