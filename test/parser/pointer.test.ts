import assert from 'node:assert/strict';
import { appendPointer, escapeToken, parsePointer, unescapeToken } from '../../src/parser/pointer.js';

describe('JSON Pointer tokens', () => {
  it('escapes `~` and `/` (RFC 6901), `~` first, and leaves other tokens and numbers as they are', () => {
    assert.equal(escapeToken('/v1/orders/{id}'), '~1v1~1orders~1{id}');
    assert.equal(escapeToken('a~b/c~1'), 'a~0b~1c~01');
    assert.equal(escapeToken('~~//'), '~0~0~1~1');
    assert.equal(escapeToken('application/json'), 'application~1json');
    assert.equal(escapeToken('plain'), 'plain');
    assert.equal(escapeToken(3), '3');
  });

  it('round-trips every token through a pointer', () => {
    const tokens = ['paths', '/v1/a~b/{id}', 'post', 'x-idempotency', '~1', '/', '~', ''];
    assert.deepEqual(parsePointer(appendPointer('', ...tokens)), tokens);
    for (const token of tokens) assert.equal(unescapeToken(escapeToken(token)), token);
  });
});
