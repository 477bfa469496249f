import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { runCli } from '../helpers/io.js';

/** A 3.0 document whose one POST has `contract` (YAML flow text) as its x-idempotency. */
function spec(contract: string): string {
  return `openapi: 3.0.3\ninfo: {title: refs, version: '1'}\npaths:\n  /a:\n    post:\n      operationId: a\n      responses:\n        '201': {description: ok}\n      x-idempotency: ${contract}\n`;
}

describe('idemkit messages: where a person would look, what it is, on one line', () => {
  let dir: string;
  const lint = (...argv: string[]) => runCli(['lint', ...argv], dir);
  beforeEach(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'idemkit-messages-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('a $ref to a directory is reported at the $ref, not at the directory', async () => {
    mkdirSync(path.join(dir, 'sub'));
    writeFileSync(path.join(dir, 'api.yaml'), spec("{$ref: 'sub#/C'}"));
    assert.deepEqual(await lint('api.yaml'), { code: 2, out: '', err: "api.yaml:9:23: $ref 'sub#/C' points at 'sub': a directory, not a file — point it at the YAML or JSON file\n" });
  });

  it("a $ref to a file that cannot be used as a whole (UTF-16) is reported at the $ref, saying why", async () => {
    writeFileSync(path.join(dir, 'contract.yaml'), Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from('C: {ttl: P1D}\n', 'utf16le')]));
    writeFileSync(path.join(dir, 'api.yaml'), spec("{$ref: 'contract.yaml#/C'}"));
    assert.deepEqual(await lint('api.yaml'), { code: 2, out: '', err: "api.yaml:9:23: $ref 'contract.yaml#/C' points at 'contract.yaml': the file is UTF-16 — save it as UTF-8\n" });
  });

  it('a syntax error in a file a $ref reached is reported where it is, naming the $ref that led there', async () => {
    mkdirSync(path.join(dir, 'other'));
    writeFileSync(path.join(dir, 'other', 'broken.yaml'), 'C:\n  ttl: "P1D\n');
    writeFileSync(path.join(dir, 'api.yaml'), spec("{$ref: 'other/broken.yaml#/C'}"));
    assert.deepEqual(await lint('api.yaml'), {
      code: 2,
      out: '',
      err: "other/broken.yaml:2:8: invalid YAML: Missing closing \"quote — close the quote, bracket or brace (truncated file?) (reached through $ref 'other/broken.yaml#/C' at api.yaml:9:23)\n",
    });
  });

  it('a $ref inside a contract says only a whole contract is followed, at the $ref', async () => {
    writeFileSync(path.join(dir, 'api.yaml'), spec("{ttl: P1D, effect: {$ref: '#/components/x-effect'}}"));
    const result = await lint('api.yaml', '-f', 'json');
    const invalid = (JSON.parse(result.out) as { findings: { ruleId: string; message: string; line: number; column: number }[] }).findings.filter((finding) => finding.ruleId === 'contract-invalid');
    assert.deepEqual(invalid, [
      {
        ...invalid[0]!,
        message: 'x-idempotency.effect holds a $ref, which is followed only for a whole contract (`x-idempotency: {$ref: …}`) — write the value in place, or $ref the whole contract',
        line: 9,
        column: 42,
      },
    ]);
  });

  it('control characters from the file (a key holding ESC, CR, LF) are escaped in the stylish report and in errors', async () => {
    writeFileSync(path.join(dir, 'api.json'), JSON.stringify({ openapi: '3.1.0', info: { title: 't', version: '1' }, paths: { '/a': { post: { responses: { 201: { description: 'ok' } }, 'x-idempotency': { 'a\u001b[31mb\nc\rd': 1, ttl: 'P1D' } } } } }));
    const result = await lint('api.json');
    assert.equal(result.code, 1);
    assert.doesNotMatch(result.out, /[\u0000-\u0009\u000b-\u001f]/, 'no control character but the line feeds between lines');
    assert.match(result.out, /unknown field 'a\\e\[31mb\\nc\\rd' in x-idempotency/);
    writeFileSync(path.join(dir, 'ref.yaml'), spec('{$ref: "missing\\u001b[2J.yaml#/C"}'));
    const error = await lint('ref.yaml');
    assert.equal(error.code, 2);
    assert.match(error.err, /^ref\.yaml:9:23: \$ref 'missing\\e\[2J\.yaml#\/C' points at a missing file/);
  });
});
