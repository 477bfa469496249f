import assert from 'node:assert/strict';
import { describeJsonSyntaxError, firstJsonError } from '../../src/parser/json-errors.js';
import { printable } from '../../src/parser/printable.js';

/** What describeJsonSyntaxError says about `text`, which must fail JSON.parse. */
function explain(text: string) {
  try {
    JSON.parse(text);
  } catch (error) {
    return describeJsonSyntaxError(error, text);
  }
  assert.fail(`${text} parsed`);
}

describe('JSON syntax errors', () => {
  it('finds the token V8 names without a position (Node 20: "Unexpected token" has none)', () => {
    const text = '{\n  "paths": {\n    "/a": {"post": {"x-idempotency": {"ttl": P1D}}}\n  }\n}\n';
    const { offset, message } = explain(text);
    assert.equal(offset, text.indexOf('P1D'));
    assert.equal(message, "Unexpected token 'P'", 'one line, without the excerpt of the text');
  });

  it('strips both forms of the excerpt, and the position of the forms that have one', () => {
    assert.equal(explain('[1,]').message, "Unexpected token ']'");
    assert.equal(explain('{"a":tru}').message, "Unexpected token '}'");
    assert.deepEqual(explain('{"a":1}x'), { offset: 7, message: 'more text after the end of the JSON value (a stray } or ]?)', hint: 'fix the syntax here (a missing comma, quote or bracket?)' });
    assert.deepEqual(explain('{"a" 1}').message, "Expected ':' after property name");
    assert.equal(explain('{"a":1').message, 'the JSON ends too early (truncated file?)');
  });

  it('points at a string that never closes where it opens', () => {
    const text = '{"a": "b,\n "c": 1}';
    assert.deepEqual(explain(text), { offset: text.indexOf('"b'), message: 'a string that is not closed on its line', hint: 'close the quote' });
    assert.equal(explain('{"a": "b').offset, 6);
  });

  it('says a text that does not start like JSON may be YAML', () => {
    assert.deepEqual(explain('openapi: 3.1.0\n'), { offset: 0, message: 'the text does not start with { or [', hint: 'is it YAML? name the file .yaml' });
  });

  it('the scanner agrees with JSON.parse on what is valid, at any depth', () => {
    for (const valid of ['{}', '[]', ' {"a": [1, -2.5e+3, true, false, null, "\\u00e9\\n"]} ', '"x"', '0', '[[[[]]]]', `${'['.repeat(100_000)}${']'.repeat(100_000)}`]) {
      assert.equal(firstJsonError(valid), undefined, valid.slice(0, 40));
    }
    for (const [invalid, at] of [['{"a":01}', 6], ['{"a":"\\x"}', 6], ['{"a":"\\u12"}', 6], ['{"a":"b\tc"}', 7], ['{a:1}', 1], ['{"a":1,}', 7], ['', 0], ['[1 2]', 3]] as const) {
      assert.equal(firstJsonError(invalid), at, invalid);
    }
  });

  it('printable escapes control characters so a message stays one line', () => {
    assert.equal(printable('a\nb\r\u001b[31mc\u0000'), 'a\\nb\\r\\e[31mc\\u0000');
  });
});
