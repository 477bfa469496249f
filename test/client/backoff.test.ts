import assert from 'node:assert/strict';
import { backoffDelay, parseRetryAfter } from '../../src/runtime/client/backoff.js';

describe('client backoff', () => {
  const b = { initialMs: 200, maxMs: 1_000, jitter: 'full' as const };

  it('full jitter draws from [0, cap) where the cap doubles up to max', () => {
    assert.equal(backoffDelay(b, 1, () => 0.999), 199);
    assert.equal(backoffDelay(b, 2, () => 0.5), 200);
    assert.equal(backoffDelay(b, 3, () => 0.5), 400);
    assert.equal(backoffDelay(b, 4, () => 0.999), 999); // capped at max
    assert.equal(backoffDelay(b, 40, () => 0.999), 999);
    assert.equal(backoffDelay(b, 3, () => 0), 0);
  });

  it('equal and no jitter', () => {
    assert.equal(backoffDelay({ ...b, jitter: 'none' }, 2, () => 0.1), 400);
    assert.equal(backoffDelay({ ...b, jitter: 'equal' }, 2, () => 0), 200);
    assert.equal(backoffDelay({ ...b, jitter: 'equal' }, 2, () => 0.5), 300);
  });

  it('reads Retry-After as delay-seconds and as an HTTP-date', () => {
    const now = Date.parse('Sun, 06 Nov 1994 08:49:30 GMT');
    assert.equal(parseRetryAfter('3', now), 3_000);
    assert.equal(parseRetryAfter(' 0 ', now), 0);
    assert.equal(parseRetryAfter('Sun, 06 Nov 1994 08:49:37 GMT', now), 7_000);
    assert.equal(parseRetryAfter('Sun, 06 Nov 1994 08:49:00 GMT', now), 0);
    assert.equal(parseRetryAfter(null, now), undefined);
    assert.equal(parseRetryAfter('soon', now), undefined);
    assert.equal(parseRetryAfter('-1', now), undefined);
    assert.equal(parseRetryAfter('1.5', now), undefined);
  });

  it("reads Retry-After in RFC 9110's obsolete forms too: RFC 850's and asctime's (UTC, though it names no zone)", () => {
    const now = Date.parse('Sun, 06 Nov 1994 08:49:30 GMT');
    assert.equal(parseRetryAfter('Sunday, 06-Nov-94 08:49:37 GMT', now), 7_000);
    assert.equal(parseRetryAfter('Sun Nov  6 08:49:37 1994', now), 7_000);
    assert.equal(parseRetryAfter('Sun Nov 16 08:49:30 1994', now), 10 * 24 * 3_600_000);
    assert.equal(parseRetryAfter('Sun Nov 6 08:49:37 1994', now), undefined, 'asctime pads the day with a space');
    assert.equal(parseRetryAfter('Sun Nov  6 08:49:37 1994 PST', now), undefined);
  });
});
