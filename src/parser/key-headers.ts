/** Header names that carry an idempotency key, for the loader and the lint views alike. */

/** Header names real APIs use for an idempotency key (lower case). */
export const KNOWN_KEY_HEADERS: readonly string[] = [
  'idempotency-key',
  'x-idempotency-key',
  'idempotency-token',
  'x-idempotency-token',
  'paypal-request-id',
  'cko-idempotency-key',
  'x-amzn-idempotency-token',
  'x-client-request-token',
  // OASIS Repeatable Requests (Azure Communication Services, Azure REST guidelines), with Repeatability-First-Sent.
  'repeatability-request-id',
];

/** Whether a header name is a known key header or any `*idempotenc*` one (`X-Request-Id`, one delivery's id, is not). */
export function isKnownKeyHeader(name: string): boolean {
  const lower = name.toLowerCase();
  return KNOWN_KEY_HEADERS.includes(lower) || lower.includes('idempotenc');
}
