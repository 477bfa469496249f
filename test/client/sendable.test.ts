import assert from 'node:assert/strict';
import { assertSendable } from '../../src/runtime/client/sendable.js';

describe('runtime/client/sendable: what fetch would refuse, said before anything is sent', () => {
  it('names a URL that is not absolute without its query or fragment, where a key or a credential may travel', () => {
    assert.throws(
      () => assertSendable('/api/v1/projects/p/clusters?requestId=SECRET-KEY-123#frag', 'POST', {}),
      (error: unknown) => {
        assert.ok(error instanceof TypeError);
        assert.equal(error.message, 'the request URL "/api/v1/projects/p/clusters" is not absolute: pass baseUrl as an http(s) URL (a path is only resolved in a web page)');
        return true;
      },
    );
  });

  it('names a header it cannot send, never its value', () => {
    assert.throws(() => assertSendable('http://api.test/x', 'POST', { 'Idempotency-Key': 'SECRET\nKEY' }), (error: unknown) => {
      assert.ok(error instanceof TypeError && error.message.includes('Idempotency-Key') && !error.message.includes('SECRET'));
      return true;
    });
  });
});
