/**
 * JSON Schema (OpenAPI 2.0 / 3.0 / 3.1 dialects) → TypeScript type expressions for generated clients.
 *
 * Every `$ref` target becomes a named type alias (so recursive schemas terminate and shared schemas are
 * written once); everything else is inlined. Spec text enters the output only as JSON string literals
 * (property names, enum values) or as identifiers made by `toIdentifier`, never raw.
 */
import path from 'node:path';
import { DocumentError } from '../../errors.js';
import type { ApiDocument, Location } from '../../parser/model.js';
import { toCommentText, toIdentifier, toJsLiteral } from '../render.js';
import { ClientRefs } from './refs.js';

/** A named type alias to declare in the generated `schema.ts`. */
export interface NamedType {
  readonly name: string;
  readonly type: string;
  /**
   * Set when the schema could not keep its own name (another declaration or a name the generated code
   * reserves has it): says which schema this is and why it was renamed, for a comment above the alias.
   */
  readonly renamed?: string;
}

type Json = Record<string, unknown>;

function isObject(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function child(at: Location, ...segments: (string | number)[]): Location {
  let pointer = at.pointer;
  for (const segment of segments) pointer += '/' + String(segment).replace(/~/g, '~0').replace(/\//g, '~1');
  return { file: at.file, pointer };
}

function lastSegment(pointer: string): string {
  const parts = pointer.split('/');
  return (parts[parts.length - 1] ?? '').replace(/~1/g, '/').replace(/~0/g, '~');
}

/** PascalCase safe identifier for a type name. */
export function toTypeName(text: string): string {
  const ident = toIdentifier(text);
  const pascal = ident.charAt(0) === '_' ? ident : ident.charAt(0).toUpperCase() + ident.slice(1);
  // `toIdentifier` suffixes reserved words with `_`; no reserved word is capitalised, so drop it.
  return pascal.replace(/_$/, '') || 'Schema';
}

const MAX_DEPTH = 64;
/**
 * How many times in all schemas already written out may be written out again (inline schemas a YAML alias shares)
 * before the client is refused: 16 levels of 4 aliases, a 1.3 KB file, would write 4^16 copies.
 */
const MAX_REPEATS = 100_000;

/**
 * Converts schemas of one document to TypeScript. Create one per generated client; call {@link typeOf} for
 * each schema the client needs, then {@link declarations} for the named aliases (sorted by name).
 */
export class SchemaTypes {
  readonly #doc: ApiDocument;
  readonly #refs: ClientRefs;
  readonly #names = new Map<string, string>();
  readonly #taken = new Set<string>();
  readonly #reserved: ReadonlySet<string>;
  readonly #renamed = new Map<string, string>();
  readonly #decls = new Map<string, string>();
  readonly #pending: { key: string; value: unknown; at: Location }[] = [];
  readonly #written = new WeakSet<object>();
  #repeats = 0;

  /**
   * `reserved`: names the generated code declares next to the schema types (globals it uses, names the
   * module exports); a schema of such a name gets a numbered name instead, with a note saying so.
   * `refs` follows the `$ref`s and keeps the broken ones (typed `unknown` here): call its `throwIfBroken` after {@link declarations}.
   */
  constructor(doc: ApiDocument, reserved: Iterable<string> = [], refs: ClientRefs = new ClientRefs(doc)) {
    this.#doc = doc;
    this.#refs = refs;
    this.#reserved = new Set(reserved);
    for (const name of this.#reserved) this.#taken.add(name);
    // Component schemas keep their names, whether or not an operation uses them.
    const base: Location = { file: doc.file, pointer: '' };
    const container = doc.version === '2.0' ? ['definitions'] : ['components', 'schemas'];
    const at = child(base, ...container);
    const schemas = doc.get(at);
    if (isObject(schemas)) {
      for (const name of Object.keys(schemas).sort()) this.#register(child(at, name), schemas[name]);
    }
  }

  /** Reserves a unique type name based on `text` (used for per-operation aliases too). */
  uniqueName(text: string): string {
    return this.uniqueIdentifier(toTypeName(text));
  }

  /** Reserves a unique name based on `base`, which must already be a safe identifier (`Name`, then `Name2`, `Name3`, …). */
  uniqueIdentifier(base: string): string {
    let name = base;
    for (let n = 2; this.#taken.has(name); n++) name = `${base}${n}`;
    this.#taken.add(name);
    return name;
  }

  #register(at: Location, value: unknown): string {
    const key = `${at.file}#${at.pointer}`;
    const known = this.#names.get(key);
    if (known !== undefined) return known;
    const own = lastSegment(at.pointer) || 'Schema';
    const wanted = toTypeName(own);
    const name = this.uniqueName(own);
    if (name !== wanted) {
      const where = (at.file === this.#doc.file ? '' : path.basename(at.file)) + '#' + at.pointer;
      const why = this.#reserved.has(wanted) ? `the generated code uses the name \`${wanted}\` itself` : `another type is named \`${wanted}\``;
      this.#renamed.set(name, `The schema ${toCommentText(where)}, renamed: ${why}.`);
    }
    this.#names.set(key, name);
    this.#pending.push({ key, value, at });
    return name;
  }

  /** The TypeScript type of the schema `value` found at `at`. */
  typeOf(value: unknown, at: Location): string {
    return this.#type(value, at, 0);
  }

  /** All named aliases needed so far (emitting them may discover more), sorted by name. */
  declarations(): NamedType[] {
    while (this.#pending.length > 0) {
      const next = this.#pending.shift()!;
      const name = this.#names.get(next.key)!;
      this.#decls.set(name, this.#type(next.value, next.at, 0, true));
    }
    return [...this.#decls.entries()]
      .map(([name, type]) => {
        const renamed = this.#renamed.get(name);
        return renamed === undefined ? { name, type } : { name, type, renamed };
      })
      .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  #type(schema: unknown, at: Location, depth: number, isDeclaration = false): string {
    if (depth > MAX_DEPTH) return 'unknown';
    if (schema === true || schema === undefined) return 'unknown';
    if (schema === false) return 'never';
    if (!isObject(schema)) return 'unknown';
    if (typeof schema['$ref'] === 'string') {
      const target = this.#refs.deref(schema, at, 'definitions');
      if (target === undefined) return 'unknown';
      // A declaration whose target is itself a reference aliases the final target.
      return isDeclaration ? this.#type(target.value, target.at, depth + 1, true) : this.#register(target.at, target.value);
    }
    if (this.#written.has(schema) && ++this.#repeats > MAX_REPEATS) {
      const { line, column } = this.#doc.position(at);
      throw new DocumentError(
        `the schemas are written out more than ${MAX_REPEATS.toLocaleString('en')} times over through YAML aliases (this one among them): the client's types would not fit in a file; give the aliased schemas names under ${this.#doc.version === '2.0' ? 'definitions' : 'components/schemas'} and $ref them`,
        at.file,
        at.pointer,
        line,
        column,
      );
    }
    this.#written.add(schema);
    const d = depth + 1;
    const parts: string[] = [];

    if ('const' in schema) parts.push(literal(schema['const']));
    else if (Array.isArray(schema['enum'])) parts.push(union(schema['enum'].map(literal)));
    else {
      const own = this.#ownType(schema, at, d);
      if (own !== undefined) parts.push(own);
    }
    for (const keyword of ['oneOf', 'anyOf'] as const) {
      const list = schema[keyword];
      if (Array.isArray(list) && list.length > 0) parts.push(union(list.map((item, i) => this.#type(item, child(at, keyword, i), d))));
    }
    const allOf = schema['allOf'];
    if (Array.isArray(allOf)) for (const [i, item] of allOf.entries()) parts.push(this.#type(item, child(at, 'allOf', i), d));

    let type = parts.length === 0 ? 'unknown' : parts.length === 1 ? parts[0]! : parts.map(paren).join(' & ');
    // 3.0 `nullable`, 2.0 `x-nullable`; 3.1 says `type: [T, "null"]`, handled by #ownType.
    if ((schema['nullable'] === true || schema['x-nullable'] === true) && type !== 'unknown' && type !== 'null' && !type.endsWith(' | null')) {
      type = `${paren(type)} | null`;
    }
    return type;
  }

  /** The type from `type` / `properties` / `items`, or `undefined` when the schema says nothing about it. */
  #ownType(schema: Json, at: Location, depth: number): string | undefined {
    const declared = schema['type'];
    let types: string[];
    if (typeof declared === 'string') types = [declared];
    else if (Array.isArray(declared)) types = declared.filter((t): t is string => typeof t === 'string');
    else if (isObject(schema['properties']) || schema['additionalProperties'] !== undefined) types = ['object'];
    else if (schema['items'] !== undefined || Array.isArray(schema['prefixItems'])) types = ['array'];
    else return undefined;
    const out = types.map((t) => {
      switch (t) {
        case 'string':
          return 'string';
        case 'integer':
        case 'number':
          return 'number';
        case 'boolean':
          return 'boolean';
        case 'null':
          return 'null';
        case 'array':
          return this.#arrayType(schema, at, depth);
        case 'object':
          return this.#objectType(schema, at, depth);
        default:
          return 'unknown';
      }
    });
    return union(out);
  }

  #arrayType(schema: Json, at: Location, depth: number): string {
    const items = schema['items'];
    const prefix = schema['prefixItems'];
    if (Array.isArray(prefix)) {
      // 3.1 / 2020-12 tuple: the positions' types, then `items` for the rest (`items: false` closes it).
      const head = prefix.map((item, i) => this.#type(item, child(at, 'prefixItems', i), depth));
      const rest = items === false ? undefined : items === undefined || items === true ? 'unknown' : this.#type(items, child(at, 'items'), depth);
      return `[${[...head, ...(rest === undefined ? [] : [`...${paren(rest)}[]`])].join(', ')}]`;
    }
    if (Array.isArray(items)) {
      // Draft-4 tuple form (rare in OpenAPI): each position's type.
      return `[${items.map((item, i) => this.#type(item, child(at, 'items', i), depth)).join(', ')}]`;
    }
    if (items === undefined) return 'unknown[]';
    return `${paren(this.#type(items, child(at, 'items'), depth))}[]`;
  }

  #objectType(schema: Json, at: Location, depth: number): string {
    const properties = isObject(schema['properties']) ? schema['properties'] : {};
    const required = new Set(Array.isArray(schema['required']) ? schema['required'].filter((r): r is string => typeof r === 'string') : []);
    const members: string[] = [];
    for (const name of Object.keys(properties)) {
      const optional = required.has(name) ? '' : '?';
      members.push(`${literal(name)}${optional}: ${this.#type(properties[name], child(at, 'properties', name), depth)};`);
    }
    const extra = schema['additionalProperties'];
    if (extra === true || isObject(extra)) {
      // With named properties the index signature must admit their types too, so it widens to unknown.
      const value = members.length > 0 || extra === true ? 'unknown' : this.#type(extra, child(at, 'additionalProperties'), depth);
      members.push(`[key: string]: ${value};`);
    }
    if (members.length === 0) return schema['additionalProperties'] === false ? 'Record<string, never>' : 'Record<string, unknown>';
    return `{ ${members.join(' ')} }`;
  }
}

function literal(value: unknown): string {
  if (value === null) return 'null';
  // YAML `.inf` / `.nan` (or JSON `1e999`) have no literal type: the enum value is some number.
  if (typeof value === 'number' && !Number.isFinite(value)) return 'number';
  if (typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean') return toJsLiteral(value);
  return 'unknown';
}

function union(types: readonly string[]): string {
  const unique = [...new Set(types)];
  if (unique.length === 0) return 'never';
  if (unique.includes('unknown')) return 'unknown';
  return unique.length === 1 ? unique[0]! : unique.map(paren).join(' | ');
}

/** Parenthesises anything but an identifier, a literal or `T[]`, so it can be combined or suffixed with `[]`. */
function paren(type: string): string {
  if (/^[A-Za-z_$][A-Za-z0-9_$]*(\[\])*$/.test(type) || /^-?\d+(\.\d+)?([eE][+-]?\d+)?$/.test(type)) return type;
  if (type.startsWith('"') && type.endsWith('"')) {
    try {
      if (toJsLiteral(JSON.parse(type)) === type) return type;
    } catch {
      // not a single string literal
    }
  }
  return `(${type})`;
}
