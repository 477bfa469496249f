import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { loadDocument } from '../../src/parser/load.js';
import { JsonPositionIndex, LineTable } from '../../src/parser/positions.js';
import type { ApiDocument, OperationView } from '../../src/parser/model.js';
import { fixture, spot } from './helpers.js';

function op(doc: ApiDocument, operationId: string): OperationView {
  const found = doc.operations.find((candidate) => candidate.operationId === operationId);
  assert.ok(found, `operation ${operationId}`);
  return found;
}

describe('parser positions', () => {
  describe('YAML', () => {
    const file = fixture('positions.yaml');
    let doc: ApiDocument;
    before(async () => {
      doc = await loadDocument(file);
    });

    it('points a block-style field at its key', () => {
      const contract = op(doc, 'block').contract!;
      assert.deepEqual(doc.position(contract.at('key', 'maxLength')), spot(file, 'maxLength: 128'));
      assert.deepEqual(doc.position(contract.at('key')), spot(file, '        key:'));
    });

    it('points a block sequence item at the item', () => {
      const contract = op(doc, 'block').contract!;
      assert.deepEqual(doc.position(contract.at('scope', 1)), spot(file, '"header:X-Tenant-Id"', '"'));
    });

    it('points flow-style items and fields at themselves on a one-line mapping', () => {
      const block = op(doc, 'block').contract!;
      assert.deepEqual(doc.position(block.at('fingerprint', 'include', 1)), spot(file, 'include: [/topic', '/contact/email'));
      const flow = op(doc, 'flow').contract!;
      assert.deepEqual(doc.position(flow.at('scope', 1)), spot(file, 'operationId: flow', 'global'));
      assert.deepEqual(doc.position(flow.at('ttl')), spot(file, 'operationId: flow', 'ttl'));
    });

    it('is not fooled by multi-line strings that look like keys', () => {
      const block = op(doc, 'block');
      const pathLine = spot(file, '  /block:').line;
      assert.deepEqual(doc.position(block.at), { line: pathLine + 1, column: 5 });
      assert.deepEqual(doc.position(block.contract!.at()), spot(file, /^ {6}x-idempotency:$/));
      assert.deepEqual(doc.position({ file, pointer: '/info/description' }), spot(file, 'description: |'));
      assert.deepEqual(doc.position({ file, pointer: '/x-idempotency' }), spot(file, 'x-idempotency: &defaults'));
    });

    it('follows `<<` merge keys and aliases to where the field is written', () => {
      const merged = op(doc, 'block').contract!;
      assert.equal(merged.ttl?.ms, 86_400_000);
      assert.deepEqual(doc.position(merged.at('ttl')), spot(file, 'ttl: P1D'));
      const aliased = op(doc, 'alias').contract!;
      assert.equal(aliased.lease?.ms, 30_000);
      assert.deepEqual(doc.position(aliased.at('lease')), spot(file, 'lease: PT30S'));
      // The contract itself (an alias): the line that says `x-idempotency: *defaults`.
      assert.deepEqual(doc.position(aliased.at()), spot(file, 'x-idempotency: *defaults'));
    });

    it('points a quoted key at its opening quote', () => {
      assert.deepEqual(doc.position({ file, pointer: '/paths/~1flow/post/responses/201' }), spot(file, 'operationId: flow', "'201'"));
    });

    it('maps an absent field to the nearest node that exists', () => {
      const contract = op(doc, 'block').contract!;
      assert.deepEqual(doc.position(contract.at('retry', 'deadline')), spot(file, /^ {6}x-idempotency:$/));
      assert.deepEqual(doc.position(contract.at('key', 'pattern')), spot(file, '        key:'));
      assert.deepEqual(doc.position({ file, pointer: '/paths/~1nope/post' }), spot(file, 'paths:'));
    });
  });

  describe('YAML keys the core schema reads as numbers or nulls', () => {
    it('finds `0x1F7:` as response 503, `+409:` as 409, `1e3:` as 1000 and `~:` as null, where they are written (was their parent)', async () => {
      const dir = mkdtempSync(path.join(tmpdir(), 'idemkit-positions-'));
      try {
        const file = path.join(dir, 'keys.yaml');
        writeFileSync(
          file,
          ['openapi: 3.1.0', 'info: {title: t, version: "1"}', 'paths:', '  /a:', '    post:', '      responses:', '        201: {description: ok}',
            '        +409: {description: busy}', '        0x1F7: {description: down}', '        1e3: {description: odd}', '        ~: {description: null key}',
            "        '0x10': {description: quoted stays text}", '        !!str 0x11: {description: tagged stays text}', ''].join('\n'),
        );
        const doc = await loadDocument(file);
        const responses = (doc.root.paths as Record<string, { post: { responses: Record<string, unknown> } }>)['/a']!.post.responses;
        assert.deepEqual(Object.keys(responses).sort(), ['0x10', '0x11', '1000', '201', '409', '503', 'null']);
        for (const [code, written] of [['201', '201:'], ['409', '+409:'], ['503', '0x1F7:'], ['1000', '1e3:'], ['null', '~:'], ['0x10', "'0x10'"], ['0x11', '!!str 0x11']]) {
          assert.deepEqual(doc.position({ file, pointer: `/paths/~1a/post/responses/${code}` }), spot(file, written), code);
        }
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
  });

  describe('YAML block scalars', () => {
    it('points a block scalar list item at its `|` or `>` on the header line, not at its content', async () => {
      const file = fixture('block-scalar-items.yaml');
      const doc = await loadDocument(file);
      const at = (pointer: string) => doc.position({ file, pointer: `/paths/~1orders/post/x-idempotency${pointer}` });
      assert.deepEqual(at('/scope/1'), spot(file, /^ {10}- >$/, '>'));
      assert.deepEqual(at('/fingerprint/include/0'), spot(file, '- >-   # folded', '>'));
      assert.deepEqual(at('/fingerprint/include/1'), spot(file, '- |2', '|'));
      assert.deepEqual(at('/fingerprint/include/2'), spot(file, '- &pointer |', '&'), 'an anchor, as for any node');
      assert.deepEqual(at('/description'), spot(file, 'description: |'), 'a member at its key, as before');
    });
  });

  describe('JSON', () => {
    const file = fixture('positions.json');
    let doc: ApiDocument;
    before(async () => {
      doc = await loadDocument(file);
    });

    it('points a field at its key and an array item at the item', () => {
      const contract = op(doc, 'json').contract!;
      assert.deepEqual(doc.position(contract.at('key', 'maxLength')), spot(file, '"key": {', '"maxLength"'));
      assert.deepEqual(doc.position(contract.at('scope', 1)), spot(file, '"scope":', '"header:X-Tenant-Id"'));
      assert.deepEqual(doc.position(contract.at('fingerprint', 'include', 1)), spot(file, '"/contact/email"', '"'));
    });

    it('skips strings holding brackets, quotes and escaped keys', () => {
      assert.deepEqual(doc.position({ file, pointer: '/paths/~1a"b/get' }), spot(file, '"/a\\"b"', '"get"'));
      assert.deepEqual(doc.position({ file, pointer: '/x-idempotency/ttl' }), spot(file, '"ttl": "P1D"'));
      assert.deepEqual(doc.position({ file, pointer: '/paths/~1json/post/responses/201' }), spot(file, '"responses": { "201"', '"201"'));
    });

    it('places document defaults used by an operation in the defaults', () => {
      const contract = op(doc, 'json').contract!;
      assert.deepEqual(contract.at('ttl'), { file, pointer: '/x-idempotency/ttl' });
      assert.deepEqual(doc.position(contract.at('ttl')), spot(file, '"ttl": "P1D"'));
    });
  });

  describe('JSON members of the root written after a big one', () => {
    // Over 1 MB, so a root member in the second half is found from the end instead of by indexing the root.
    const big = (marker: string) => JSON.stringify({ [marker]: 'x'.repeat(1 << 20) });
    const keyAt = (text: string, marker: string, from = 0) => {
      const at = text.indexOf(marker, from);
      assert.ok(at !== -1, marker);
      return at;
    };

    it('finds the member, and the nodes below it, at the name JSON.parse kept, without indexing the root', () => {
      const text = `{"openapi": "3.1.0", "paths": {"/a": ${big('pad')}},\n "components": {"headers": {"RetryAfter": {"schema": 1}}}\n}\n`;
      const index = new JsonPositionIndex(text);
      const located = index.locate(['components', 'headers', 'RetryAfter']);
      assert.equal(located.depth, 3);
      assert.equal(located.keyOffset, keyAt(text, '"RetryAfter"'));
      // The root (offset 0) was not scanned past the 1 MB `paths` to get there.
      assert.equal((index as unknown as { containers: Map<number, unknown> }).containers.has(0), false);
      assert.equal(index.locate(['openapi']).keyOffset, keyAt(text, '"openapi"'));
    });

    it('is not fooled by a member of the same name nested later, nor by one written twice at the root', () => {
      // The last "components" is inside a path item; the root's own is the one before it.
      const nestedLast = `{"paths": {"/a": ${big('pad')}, "/b": {"x": 1}}, "components": {"a": 1}, "tail": {"components": {"b": 2}}}`;
      const nested = new JsonPositionIndex(nestedLast).locate(['components', 'a']);
      assert.equal(nested.keyOffset, keyAt(nestedLast, '"a": 1'));
      // Only a nested one in the second half: the root's, in the first half, is found by indexing the root.
      const early = `{"components": {"a": 1}, "paths": {"/a": ${big('pad')}, "/b": {"components": {"b": 2}}}}`;
      assert.equal(new JsonPositionIndex(early).locate(['components', 'a']).keyOffset, keyAt(early, '"a": 1'));
      // Written twice at the root: JSON.parse keeps the second, so positions point there.
      const twice = `{"components": {"a": 1}, "paths": ${big('pad')}, "components": {"a": 2}}`;
      assert.deepEqual(JSON.parse(twice).components, { a: 2 });
      assert.equal(new JsonPositionIndex(twice).locate(['components', 'a']).keyOffset, keyAt(twice, '"a": 2'));
      // Written twice, the second time with an escape (`"comp\u006fnents"`): JSON.parse keeps that one, so positions
      // point there, not at the plain copy a text search finds last.
      for (const spelling of ['comp\\u006fnents', '\\u0063omponents', 'comp\\u006Fnents']) {
        const escaped = `{"paths": ${big('pad')}, "components": {"a": 1}, "${spelling}": {"a": 2}}`;
        assert.deepEqual(JSON.parse(escaped).components, { a: 2 }, spelling);
        const located = new JsonPositionIndex(escaped).locate(['components', 'a']);
        assert.equal(located.keyOffset, keyAt(escaped, '"a": 2'), spelling);
      }
      // A name that appears only as a string value, or escaped inside a string, is not a member.
      const strings = `{"paths": ${big('pad')}, "info": {"title": "components", "description": "\\"components\\": no"}}`;
      const missing = new JsonPositionIndex(strings).locate(['components']);
      assert.equal(missing.depth, 0);
    });
  });

  describe('line table', () => {
    it('maps offsets asked in any order (it grows only as far as asked) like a full scan', () => {
      const text = 'ab\n\ncd\nefg\n';
      const expected = (offset: number) => {
        const before = text.slice(0, offset).split('\n');
        return { line: before.length, column: before[before.length - 1]!.length + 1 };
      };
      const order = [5, 0, 2, 3, 11, 4, 8, 10, 1, 9];
      const table = new LineTable(text);
      for (const offset of order) assert.deepEqual(table.position(offset), expected(offset), `offset ${offset}`);
      const backwards = new LineTable(text);
      for (const offset of [...order].sort((a, b) => b - a)) assert.deepEqual(backwards.position(offset), expected(offset), `offset ${offset}`);
    });

    it('maps every offset of a text of thousands of lines, blank ones included, asked forwards, backwards and at random', () => {
      // Line lengths 0–9 (blank lines in runs), so offsets fall on and beside every checkpoint the table keeps.
      const text = Array.from({ length: 3000 }, (_, i) => 'x'.repeat((i * 7) % 10)).join('\n');
      const lines: { line: number; column: number }[] = [];
      for (let offset = 0, line = 1, column = 1; offset <= text.length; offset++) {
        lines.push({ line, column });
        if (text[offset] === '\n') [line, column] = [line + 1, 1];
        else column += 1;
      }
      const offsets = lines.map((_, offset) => offset);
      let seed = 7;
      const shuffled = [...offsets].sort(() => ((seed = (seed * 16807) % 2147483647) % 3) - 1);
      for (const order of [offsets, [...offsets].reverse(), shuffled]) {
        const table = new LineTable(text);
        for (const offset of order) assert.deepEqual(table.position(offset), lines[offset], `offset ${offset}`);
      }
    });

    it('counts columns in UTF-16 units past accented and astral characters, lines after checkpoint boundaries included', () => {
      // 200 lines (past several checkpoints), each with an accented letter and an emoji (two UTF-16 units).
      const text = Array.from({ length: 200 }, (_, i) => `é${'x'.repeat(i % 5)}😀:`).join('\n');
      const colons = [...text.matchAll(/:/g)].map((match) => match.index);
      const table = new LineTable(text);
      for (const line of [200, 1, 65, 64, 129, 2]) {
        assert.deepEqual(table.position(colons[line - 1]!), { line, column: 1 + ((line - 1) % 5) + 2 + 1 }, `line ${line}`);
      }
    });
  });

  describe('JSON members named anywhere in the text', () => {
    it('counts every member of that name and the names its value holds, whatever the blanks before the colon', () => {
      const text = '{"a": {"x-idempotency" :\n {"k": 1, "m": {"n": 2}}}, "b": [{"x-idempotency":{"k":1}}], "x-idempotency"\t: 3}';
      assert.deepEqual(new JsonPositionIndex(text).membersNamed('x-idempotency'), { count: 3, names: 4 });
    });

    it('does not count the name written as a string value, an array item, or inside another string', () => {
      const text = '{"a": "x-idempotency", "b": ["x-idempotency", "x-idempotency"], "c": "say \\"x-idempotency\\": no", "x-idempotency": {}}';
      assert.deepEqual(new JsonPositionIndex(text).membersNamed('x-idempotency'), { count: 1, names: 0 });
    });

    it('matches a name holding regex characters literally', () => {
      const text = '{"a.b": {"k": 1}, "axb": {"k": 1}, "(a)": {"k": 1, "l": 2}}';
      const index = new JsonPositionIndex(text);
      assert.deepEqual(index.membersNamed('a.b'), { count: 1, names: 1 });
      assert.deepEqual(index.membersNamed('(a)'), { count: 1, names: 2 });
    });
  });

  describe('line table: a lone CR is a line break (YAML 1.2, editors)', () => {
    /** Line and column of every offset of `text`, counting LF, CRLF and a lone CR as one line break each. */
    function expectedPositions(text: string): { line: number; column: number }[] {
      const positions: { line: number; column: number }[] = [];
      for (let offset = 0, line = 1, column = 1; offset <= text.length; offset++) {
        positions.push({ line, column });
        const breaks = text[offset] === '\n' || (text[offset] === '\r' && text[offset + 1] !== '\n');
        if (breaks) [line, column] = [line + 1, 1];
        else column += 1;
      }
      return positions;
    }

    it('maps every offset of LF, CRLF, CR-only and mixed texts with a stray CR, asked in any order', () => {
      const lines = Array.from({ length: 400 }, (_, i) => 'x'.repeat((i * 7) % 10));
      const texts = {
        crOnly: lines.join('\r'),
        crlf: lines.join('\r\n'),
        // A stray CR late in the text: asked first near the top, the table counts LFs; asked past the CR, it starts over.
        strayLate: [...lines.slice(0, 300), `${lines[300]}\r${lines[301]}`, ...lines.slice(302)].join('\n'),
        mixed: lines.map((line, i) => `${line}${['\n', '\r\n', '\r'][i % 3]}`).join(''),
        crAtEnd: `${lines.slice(0, 50).join('\r\n')}\r`,
      };
      for (const [name, text] of Object.entries(texts)) {
        const expected = expectedPositions(text);
        const offsets = expected.map((_, offset) => offset);
        let seed = 11;
        const shuffled = [...offsets].sort(() => ((seed = (seed * 16807) % 2147483647) % 3) - 1);
        for (const order of [offsets, [...offsets].reverse(), shuffled]) {
          const table = new LineTable(text);
          for (const offset of order) assert.deepEqual(table.position(offset), expected[offset], `${name}: offset ${offset}`);
        }
      }
    });

    it('a finding after a stray CR is on the line an editor shows, and a CR-only file is not one long line', async () => {
      const stray = await loadDocument(fixture('lone-cr/stray-cr.yaml'));
      const operation = stray.operations.find((candidate) => candidate.operationId === 'createOrder')!;
      assert.deepEqual(stray.position({ file: operation.at.file, pointer: `${operation.at.pointer}/x-idempotency/ttl` }), { line: 9, column: 9 });
      const crOnly = await loadDocument(fixture('lone-cr/cr-only.yaml'));
      const only = crOnly.operations.find((candidate) => candidate.operationId === 'createOrder')!;
      assert.deepEqual(crOnly.position({ file: only.at.file, pointer: `${only.at.pointer}/x-idempotency/ttl` }), { line: 9, column: 9 });
    });
  });

  describe('external $refs', () => {
    it('reports nodes in the file where they are written', async () => {
      const doc = await loadDocument(fixture('external/openapi.yaml'));
      const paths = fixture('external/components/paths.yaml');
      const parameters = fixture('external/components/parameters.json');
      const create = op(doc, 'createThing');
      assert.equal(create.at.file, paths);
      assert.deepEqual(doc.position(create.at), spot(paths, '  post:'));
      const contract = create.contract!;
      assert.deepEqual(contract.at('ttl'), { file: paths, pointer: '/contracts/createThing/ttl' });
      assert.deepEqual(doc.position(contract.at('ttl')), spot(paths, 'ttl: P1D'));
      const key = create.parameters!.find((parameter) => parameter.in === 'header')!;
      assert.equal(key.name, 'Idempotency-Key');
      assert.deepEqual(key.valueAt, { file: parameters, pointer: '/IdempotencyKey' });
      assert.deepEqual(doc.position(key.valueAt), spot(parameters, '"IdempotencyKey"', '"'));
      assert.deepEqual(doc.position(key.at), spot(paths, "- $ref: 'parameters.json", '$ref'));
      assert.deepEqual(doc.files, [fixture('external/openapi.yaml'), paths, parameters]);
    });
  });
});
