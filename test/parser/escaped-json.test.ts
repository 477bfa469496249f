/**
 * Big JSON files with non-ASCII characters are parsed from their bytes with those characters rewritten as `\u`
 * escapes (one-byte text instead of two-byte), and their own text is made only when asked for. Everything a
 * user sees must be what decoding the file as UTF-8 gives: values, text, every position, every error.
 */
import assert from 'node:assert/strict';
import { isUtf8 } from 'node:buffer';
import { mkdtempSync, readFileSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { DocumentError } from '../../src/errors.js';
import { loadDocument } from '../../src/parser/load.js';
import { appendPointer } from '../../src/parser/pointer.js';
import { parseSource, readSource, type SourceFile } from '../../src/parser/source.js';
import { spot } from './helpers.js';

/** Every JSON Pointer of a value, the root first. */
function pointers(value: unknown, at = '', out: string[] = []): string[] {
  out.push(at);
  if (Array.isArray(value)) value.forEach((item, i) => pointers(item, appendPointer(at, String(i)), out));
  else if (value !== null && typeof value === 'object') for (const [key, item] of Object.entries(value)) pointers(item, appendPointer(at, key), out);
  return out;
}

/** What the file gives when decoded as UTF-8 and parsed as text (the path small files and YAML take). */
function decoded(file: string): SourceFile {
  return parseSource(file, readFileSync(file).toString('utf8'));
}

/** Line and column (UTF-16 code units, a leading BOM not counted) of the first U+FFFD that decoding the file gives. */
function firstReplacement(file: string): { line: number; column: number } {
  let text = readFileSync(file).toString('utf8');
  if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
  const before = text.slice(0, text.indexOf('\ufffd'));
  const lines = before.split(/\r\n|\n|\r/);
  return { line: lines.length, column: lines.at(-1)!.length + 1 };
}

function errorOf(read: () => unknown): DocumentError {
  try {
    read();
  } catch (error) {
    assert.ok(error instanceof DocumentError, String(error));
    return error;
  }
  assert.fail('expected a DocumentError');
}

/** A document of ~600 KB (over the size from which files are read this way): non-ASCII every 50 lines. */
function bigDocument(extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    openapi: '3.0.3',
    // A long run of 4-byte characters: the search for non-ASCII bytes cuts it into spans, and it must come out whole.
    info: { title: 'Démo — “quotes”', version: '1', description: 'naïve café 😀 𝄞 ä', 'x-emoji': '😀'.repeat(1_000) },
    paths: {
      '/v1/zahlungen/{id}': {
        post: {
          operationId: 'créerZahlung',
          summary: 'Zahlung anlegen — ü',
          parameters: [{ name: 'id', in: 'path', required: true, schema: { type: 'string', description: 'Kennung “id”' } }],
          'x-idempotency': { key: { in: 'header', name: 'Idempotency-Key' }, ttl: 'PT24H' },
          responses: { '201': { description: 'Angelegt ✓' } },
        },
      },
    },
    'x-filler': Array.from({ length: 12_000 }, (_, i) => (i % 50 === 0 ? { [`schlüssel-${i}`]: `wert ${i} — é 😀` } : `filler line ${i} plain ascii text`)),
    ...extra,
  };
}

describe('big JSON files with non-ASCII characters', () => {
  let dir: string;
  before(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'idemkit-escaped-'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  function write(name: string, content: string | Buffer): string {
    const file = path.join(dir, name);
    writeFileSync(file, content);
    return file;
  }

  it('gives the value, text and every position that decoding the file gives', () => {
    for (const [name, text] of [
      ['pretty.json', JSON.stringify(bigDocument(), null, 2)],
      ['one-line.json', JSON.stringify(bigDocument())],
      ['crlf.json', JSON.stringify(bigDocument(), null, 2).replace(/\n/g, '\r\n')],
      ['bom.json', `\ufeff${JSON.stringify(bigDocument(), null, 1)}`],
      ['own-escapes.json', JSON.stringify(bigDocument(), null, 2).replace('"Démo', '"\\u00e9t\\u00e9 Démo')],
    ] as const) {
      const file = write(name, text);
      const source = readSource(file);
      const reference = decoded(file);
      // The escaped path was taken: what JSON.parse read is ASCII, and is not the file's text.
      assert.match(source.scanText, /^[\x00-\x7f]*$/, name);
      assert.notEqual(source.scanText, source.text, name);
      assert.deepEqual(source.value, reference.value, name);
      assert.equal(source.text, reference.text, name);
      assert.equal(source.writesUnicodeEscape(), name === 'own-escapes.json', name);
      const all = pointers(reference.value);
      assert.ok(all.length > 12_000, name);
      for (const pointer of all) assert.deepEqual(source.position(pointer), reference.position(pointer), `${name} ${pointer}`);
      assert.deepEqual(source.membersNamed('x-idempotency'), reference.membersNamed('x-idempotency'), name);
    }
  });

  it('refuses bytes that are not UTF-8 at the first of them, as decoding counts the line and column; astral characters are read', () => {
    const text = Buffer.from(JSON.stringify(bigDocument(), null, 2));
    const valid = readSource(write('astral.json', text));
    assert.equal((valid.value as { info: { description: string } }).info.description, 'naïve café 😀 𝄞 ä');
    assert.equal(valid.text, decoded(path.join(dir, 'astral.json')).text);
    const at = text.indexOf('Démo');
    // A lead byte followed by a non-continuation, and a sequence cut short right before a closing quote.
    const broken = Buffer.concat([text.subarray(0, at), Buffer.from([0x44, 0xc3, 0x28, 0xf0, 0x9f]), text.subarray(at + 1)]);
    const end = broken.lastIndexOf('"');
    const file = write('not-utf8.json', Buffer.concat([broken.subarray(0, end), Buffer.from([0xe2, 0x82]), broken.subarray(end)]));
    const error = errorOf(() => readSource(file));
    assert.match(error.message, /^byte 0xC3 is not UTF-8 \(the file is in another encoding, such as Latin-1 or Windows-1252\) — save it as UTF-8$/);
    assert.deepEqual({ line: error.line, column: error.column }, firstReplacement(file));
  });

  it('reports invalid JSON exactly as decoding the file does', () => {
    const text = JSON.stringify(bigDocument(), null, 2);
    for (const [name, content] of [
      // A non-ASCII character right after a backslash: an invalid escape the rewrite must not make valid.
      ['backslash.json', text.replace('"Démo', '"D\\émo')],
      // A non-ASCII character outside a string.
      ['outside.json', text.replace('"info": {', '"info": ä {')],
      // A syntax error after the non-ASCII characters: its column counts characters, not escapes.
      ['after.json', text.replace('"x-filler": [', '"x-filler": [ ,')],
      ['same-line.json', JSON.stringify(bigDocument()).replace('"paths":{', '"paths":{ ,')],
    ] as const) {
      const file = write(name, content);
      const error = errorOf(() => readSource(file));
      const expected = errorOf(() => decoded(file));
      assert.deepEqual({ message: error.message, line: error.line, column: error.column }, { message: expected.message, line: expected.line, column: expected.column }, name);
    }
  });

  it('points a duplicate key inside a contract at its line and column', async () => {
    const text = JSON.stringify(bigDocument(), null, 2).replace('"ttl": "PT24H"', '"ttl": "PT24H", "ttl": "PT1H"');
    const file = write('duplicate.json', text);
    await assert.rejects(loadDocument(file), (error: unknown) => {
      assert.ok(error instanceof DocumentError);
      assert.equal(error.message, `duplicate key \`ttl\` (first at line ${spot(file, '"ttl": "PT1H"').line}) — keep one`);
      assert.deepEqual({ line: error.line, column: error.column }, spot(file, '"ttl": "PT1H"', '"ttl": "PT1H"'));
      return true;
    });
  });

  it('agrees with decoding on random documents: escapes, backslashes, bytes that are not UTF-8, damaged ends', () => {
    // mulberry32: the same documents on every run.
    let seed = 20261201;
    const random = (): number => {
      seed = (seed + 0x6d2b79f5) | 0;
      let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
      t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
    const pick = <T>(list: readonly T[]): T => list[Math.floor(random() * list.length)]!;
    const utf8Pieces = ['abc', 'é', '😀', '𝄞', '—', '\u2028', '\ufeff', ' ', '\\\\', '\\"', '\\n', '\\u00e9', '\\ud83d\\ude00'].map((text) => Buffer.from(text));
    const allPieces = utf8Pieces.concat([[0xc3], [0xe2, 0x82], [0xff], [0x80, 0x80], [0xf0, 0x9f, 0x98], [0xed, 0xa0, 0x80]].map((bytes) => Buffer.from(bytes)));
    // Half the documents hold bytes that are not UTF-8 (refused), half only UTF-8 (parsed as decoding does).
    let pieces = allPieces;
    // A lone backslash makes an escape of whatever follows (often invalid): in a few documents only, or all would be errors.
    let loneBackslashes = false;
    const piece = (): Buffer => (loneBackslashes && random() < 0.01 ? Buffer.from('\\') : pick(pieces));
    const string = (): Buffer => Buffer.concat([Buffer.from('"'), ...Array.from({ length: Math.floor(random() * 6) }, piece), Buffer.from('"')]);
    const value = (depth: number): Buffer => {
      const r = random();
      if (depth > 3 || r < 0.3) return pick([string, () => Buffer.from(String(Math.floor(random() * 1000))), () => Buffer.from('null')])();
      const items = Array.from({ length: Math.floor(random() * 5) }, () => (r < 0.65 ? Buffer.concat([string(), Buffer.from(pick([':', ' : ', ':\n'])), value(depth + 1)]) : value(depth + 1)));
      const [open, close] = r < 0.65 ? ['{', '}'] : ['[', ']'];
      return Buffer.concat([Buffer.from(open), ...items.flatMap((item, i) => (i === 0 ? [item] : [Buffer.from(pick([',', ',\n'])), item])), Buffer.from(close)]);
    };
    let parsed = 0;
    let refused = 0;
    for (let round = 0; round < 40; round++) {
      loneBackslashes = random() < 0.15;
      pieces = round % 2 === 0 ? utf8Pieces : allPieces;
      const members = Array.from({ length: 30 }, () => Buffer.concat([string(), Buffer.from(':'), value(0)]));
      members.splice(Math.floor(random() * members.length), 0, Buffer.from(`"pad":"${'x'.repeat(270_000)}"`));
      let bytes = Buffer.concat([Buffer.from(pick(['{', '\ufeff{', ' \n{'])), ...members.flatMap((member, i) => (i === 0 ? [member] : [Buffer.from(',\n'), member])), Buffer.from('}')]);
      if (random() < 0.1) bytes = Buffer.concat([bytes.subarray(0, Math.floor(bytes.length * random())), pick(pieces)]);
      const file = write(`random-${round}.json`, bytes);
      if (!isUtf8(bytes)) {
        // Bytes that are not UTF-8 are refused where decoding first puts a U+FFFD (no piece holds one itself).
        const got = errorOf(() => readSource(file));
        assert.match(got.message, /^byte 0x[0-9A-F]{2} is not UTF-8/, `round ${round}`);
        assert.deepEqual({ line: got.line, column: got.column }, firstReplacement(file), `round ${round}`);
        refused += 1;
        continue;
      }
      let expected: SourceFile;
      try {
        expected = decoded(file);
      } catch (error) {
        const got = errorOf(() => readSource(file));
        assert.ok(error instanceof DocumentError);
        assert.deepEqual([got.message, got.line, got.column], [error.message, error.line, error.column], `round ${round}`);
        continue;
      }
      const source = readSource(file);
      parsed += 1;
      assert.equal(source.text, expected.text, `round ${round}`);
      assert.deepEqual(source.value, expected.value, `round ${round}`);
      for (const pointer of pointers(expected.value)) assert.deepEqual(source.position(pointer), expected.position(pointer), `round ${round} ${pointer}`);
    }
    assert.ok(parsed >= 5, `${parsed} of 40 random documents parsed`);
    assert.ok(refused >= 5, `${refused} of 40 random documents refused as not UTF-8`);
  });

  it('says a file too long for one string cannot be read, ASCII or not, as it always did', function () {
    this.timeout(120_000);
    // Sparse files of 600 MiB (past V8's longest string, ~512 MiB): written in a moment, read as zeros after the
    // first 10,000 characters (no NUL where the binary-file check looks).
    for (const name of ['long-ascii.json', 'long-escaped.json']) {
      const file = write(name, `{"openapi":"3.0.3","x":"${name === 'long-escaped.json' ? 'é' : 'e'}${'a'.repeat(10_000)}`);
      truncateSync(file, 600 * 1024 * 1024);
      const error = errorOf(() => readSource(file));
      assert.equal(error.message, 'cannot read the file (ERR_STRING_TOO_LONG) — check the path and permissions', name);
      rmSync(file);
    }
  });

  it('finds a key written twice whose dropped value held a member with a non-ASCII name, where decoding finds it', () => {
    const text = JSON.stringify(bigDocument(), null, 2).replace('"x-filler": [', '"x-zwei": { "schlüssel": 1 },\n  "x-zwei": { "ändern": 2 },\n  "x-filler": [');
    const file = write('dropping.json', text);
    const source = readSource(file);
    assert.notEqual(source.scanText, source.text);
    const reference = decoded(file);
    for (const name of ['schlüssel', 'ändern', 'x-zwei']) assert.deepEqual(source.duplicateKeyDropping('', name), reference.duplicateKeyDropping('', name), name);
    assert.deepEqual(source.duplicateKeyDropping('', 'schlüssel'), { key: 'x-zwei', first: spot(file, '"schlüssel"', '"x-zwei"'), second: spot(file, '"ändern"', '"x-zwei"') });
  });

  it('leaves YAML-named files, files that do not start like JSON and small files to decoding', () => {
    const text = JSON.stringify(bigDocument(), null, 2);
    for (const name of ['named.yaml', 'small.json']) {
      const file = write(name, name === 'small.json' ? JSON.stringify({ openapi: '3.0.3', info: { title: 'é', version: '1' }, paths: {} }) : text);
      const source = readSource(file);
      assert.equal(source.scanText, source.text, name);
    }
    // More non-ASCII bytes than the room after them: decoded as a whole, with the same value.
    const dense = write('dense.json', JSON.stringify(bigDocument({ 'x-dense': 'ä'.repeat(40_000) })));
    const source = readSource(dense);
    assert.equal(source.scanText, source.text);
    assert.deepEqual(source.value, decoded(dense).value);
    const file = write('nbsp.json', `\u00a0${text}`);
    assert.deepEqual(errorOf(() => readSource(file)).message, errorOf(() => decoded(file)).message);
  });
});
