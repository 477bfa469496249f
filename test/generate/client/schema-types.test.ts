import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { SchemaTypes, toTypeName } from '../../../src/generate/client/schema-types.js';
import { loadDocument } from '../../../src/parser/index.js';
import type { ApiDocument } from '../../../src/parser/model.js';

describe('generate client: schema → TypeScript', () => {
  let dir: string;
  before(() => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'idemkit-schema-types-'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  async function load(name: string, text: string, extra: Record<string, string> = {}): Promise<ApiDocument> {
    for (const [file, body] of Object.entries(extra)) writeFileSync(path.join(dir, file), body);
    const file = path.join(dir, name);
    writeFileSync(file, text);
    return loadDocument(file);
  }

  /** The type of `components.schemas.<name>` (3.x) as a declaration. */
  function declared(types: SchemaTypes, name: string): string {
    const found = types.declarations().find((d) => d.name === name);
    assert.ok(found, `no declaration ${name}`);
    return found.type;
  }

  const v30 = (schemas: string) => `openapi: 3.0.3\ninfo: { title: t, version: "1" }\npaths: {}\ncomponents:\n  schemas:\n${schemas}`;
  const v31 = (schemas: string) => `openapi: 3.1.0\ninfo: { title: t, version: "1" }\npaths: {}\ncomponents:\n  schemas:\n${schemas}`;

  it('3.0: nullable, enums, required and optional properties, maps, arrays', async () => {
    const doc = await load(
      'a.yaml',
      v30(
        [
          '    A:',
          '      type: object',
          '      required: [name]',
          '      properties:',
          '        name: { type: string, nullable: true }',
          '        level: { type: integer, enum: [1, 2] }',
          '        tags: { type: array, items: { type: string } }',
          '        map: { type: object, additionalProperties: { type: number } }',
          '        free: { type: object }',
          '        closed: { type: object, additionalProperties: false }',
          '        nothing: {}',
        ].join('\n') + '\n',
      ),
    );
    const types = new SchemaTypes(doc);
    assert.equal(
      declared(types, 'A'),
      '{ "name": string | null; "level"?: 1 | 2; "tags"?: string[]; "map"?: { [key: string]: number; }; "free"?: Record<string, unknown>; "closed"?: Record<string, never>; "nothing"?: unknown; }',
    );
  });

  it('3.1: type arrays, const, and null in enums', async () => {
    const doc = await load(
      'b.yaml',
      v31(
        [
          '    B:',
          '      type: object',
          '      properties:',
          '        p: { type: [integer, "null"] }',
          '        q: { type: [string, boolean] }',
          '        k: { const: fixed }',
          '        e: { enum: [a, null] }',
          '        list: { type: [array, "null"], items: { type: string } }',
        ].join('\n') + '\n',
      ),
    );
    assert.equal(
      declared(new SchemaTypes(doc), 'B'),
      '{ "p"?: number | null; "q"?: string | boolean; "k"?: "fixed"; "e"?: "a" | null; "list"?: string[] | null; }',
    );
  });

  it('$ref becomes a named type; allOf intersects, oneOf/anyOf unite; recursion terminates', async () => {
    const doc = await load(
      'c.yaml',
      v30(
        [
          '    Pet: { oneOf: [{ $ref: "#/components/schemas/Cat" }, { $ref: "#/components/schemas/Dog" }] }',
          '    Cat: { type: object, required: [meow], properties: { meow: { type: boolean } } }',
          '    Dog: { allOf: [{ $ref: "#/components/schemas/Base" }, { type: object, properties: { bark: { type: string } } }] }',
          '    Base: { type: object, required: [id], properties: { id: { type: string } } }',
          '    Any: { anyOf: [{ type: string }, { type: number }] }',
          '    Node: { type: object, properties: { next: { $ref: "#/components/schemas/Node" } } }',
        ].join('\n') + '\n',
      ),
    );
    const types = new SchemaTypes(doc);
    assert.equal(declared(types, 'Pet'), 'Cat | Dog');
    assert.equal(declared(types, 'Dog'), 'Base & ({ "bark"?: string; })');
    assert.equal(declared(types, 'Any'), 'string | number');
    assert.equal(declared(types, 'Node'), '{ "next"?: Node; }');
  });

  it('an external $ref becomes a named type of its own', async () => {
    const doc = await load(
      'd.yaml',
      'openapi: 3.1.0\ninfo: { title: t, version: "1" }\npaths: {}\ncomponents:\n  schemas:\n    Wrapper: { type: object, properties: { money: { $ref: "./money.yaml#/Money" } } }\n',
      { 'money.yaml': 'Money: { type: object, required: [amount], properties: { amount: { type: integer } } }\n' },
    );
    const types = new SchemaTypes(doc);
    assert.equal(declared(types, 'Wrapper'), '{ "money"?: Money; }');
    assert.equal(declared(types, 'Money'), '{ "amount": number; }');
  });

  it('spec strings enter only as escaped literals; names become safe identifiers', async () => {
    const doc = await load(
      'e.yaml',
      v30(
        [
          '    "Weird */ name":',
          '      type: object',
          '      properties:',
          '        "a\\"b */ c": { type: string, enum: ["x\\u2028y", "</script>", "*/"] }',
        ].join('\n') + '\n',
      ),
    );
    const types = new SchemaTypes(doc);
    const decl = types.declarations()[0]!;
    assert.equal(decl.name, 'WeirdName');
    assert.equal(decl.type, '{ "a\\"b *\\/ c"?: "x\\u2028y" | "\\u003c/script\\u003e" | "*\\/"; }');
    assert.doesNotMatch(decl.type, /\*\//);
  });

  it('type names are unique PascalCase identifiers', () => {
    assert.equal(toTypeName('demo-request input'), 'DemoRequestInput');
    assert.equal(toTypeName('1st'), '_1st');
    assert.equal(toTypeName('delete'), 'Delete');
  });
});
