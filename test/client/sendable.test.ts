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

  it("refuses the headers fetch frames itself (Node's fetch rejects them, or hangs on a wrong Content-Length), in any letter case, before anything is counted", () => {
    for (const [name, value] of [['Transfer-Encoding', 'chunked'], ['keep-alive', 'timeout=5'], ['Upgrade', 'websocket'], ['EXPECT', '100-continue'], ['Content-Length', '3'], ['Connection', 'upgrade']]) {
      assert.throws(() => assertSendable('http://api.test/x', 'POST', { [name]: value }), new TypeError(`the header ${name} cannot be set: fetch frames the message and the connection itself (leave it out)`), name);
    }
    for (const value of ['close', 'keep-alive', ' Keep-Alive ']) assert.doesNotThrow(() => assertSendable('http://api.test/x', 'POST', { Connection: value }));
    assert.doesNotThrow(() => assertSendable('http://api.test/x', 'POST', { TE: 'trailers', 'X-Content-Length': '3' }));
  });
});
