/**
 * Schema shapes that real documents get slightly wrong and that have nothing to do with idempotency: a null
 * schema, and JSON Schema 2020-12 idioms (`type: 'null'`, `type` arrays) in OpenAPI 3.0 or Swagger 2.0
 * documents. They never stop a lint; they are returned as document warnings, one per node, for the engine
 * to report as `document-invalid`.
 */
import { isSpace } from '../parser/json-errors.js';
import type { ApiDocument, DocumentWarning, Location } from '../parser/model.js';
import { escapePointerToken, isObject } from './views.js';

// What a key's value is: one schema, a map of names to schemas, a list of schemas, or data (an example may
// well contain a key named `schema`), which is not walked. One Map lookup per key instead of four Sets.
const ONE_SCHEMA = 1;
const SCHEMA_MAP = 2;
const SCHEMA_LIST = 3;
const DATA = 4;
const KEY_KINDS = new Map<string, number>([
  ...['schema', 'items', 'additionalProperties', 'not', 'additionalItems', 'contains', 'if', 'then', 'else', 'propertyNames', 'unevaluatedProperties', 'unevaluatedItems'].map((key) => [key, ONE_SCHEMA] as const),
  ...['properties', 'patternProperties', 'schemas', 'definitions', '$defs', 'dependentSchemas'].map((key) => [key, SCHEMA_MAP] as const),
  ...['allOf', 'oneOf', 'anyOf', 'prefixItems'].map((key) => [key, SCHEMA_LIST] as const),
  ...['example', 'examples', 'default', 'enum', 'const', '$ref'].map((key) => [key, DATA] as const),
]);

/**
 * The schema-shape problems of a document's entry file (unordered: the engine sorts findings by position).
 * One walk over the whole tree: the pointer of a node is built only when it gets a warning, so a 10 MB
 * document costs a visit per object, not a string per node.
 */
export function schemaShapeWarnings(doc: ApiDocument): DocumentWarning[] {
  const warnings: DocumentWarning[] = [];
  if (!mayHoldShapeProblems(doc)) return warnings;
  const pre31 = doc.version !== '3.1';
  const tokens: (string | number)[] = [];
  const here = (...more: (string | number | undefined)[]): Location => {
    let pointer = '';
    for (const token of tokens) pointer += `/${escapePointerToken(token)}`;
    for (const token of more) if (token !== undefined) pointer += `/${escapePointerToken(token)}`;
    return { file: doc.file, pointer };
  };
  // `key` (and `member`, for a schema map or list) is where the schema sits, relative to the object being
  // walked. Fixed parameters, not a rest array: this runs for every schema of the document.
  const checkSchema = (value: unknown, key: string, member?: string | number): void => {
    if (value === null) {
      warnings.push({ at: here(key, member), message: 'a schema is null here: write {} for "any value" (a null schema is not a Schema Object)' });
      return;
    }
    if (!pre31 || typeof value !== 'object' || Array.isArray(value)) return;
    const type = (value as Record<string, unknown>)['type'];
    if (type === 'null') {
      warnings.push({
        at: here(key, member, 'type'),
        message: `type 'null' is OpenAPI 3.1 (JSON Schema 2020-12); in ${doc.version} mark the other alternative \`nullable: true\`${doc.version === '2.0' ? ' (x-nullable)' : ''} instead`,
      });
    } else if (Array.isArray(type)) {
      warnings.push({ at: here(key, member, 'type'), message: `type arrays are OpenAPI 3.1; in ${doc.version} write one type${doc.version === '3.0' ? ' and \`nullable: true\` for null' : ''}` });
    }
  };
  // YAML aliases share one parsed object however many times they are written: each is walked once (16 levels of 4
  // aliases, a 1.3 KB file, are 4^16 paths). JSON shares none, and pays no set.
  const walked = doc.source?.()?.format === 'json' ? undefined : new Set<object>();
  const walk = (value: object, depth: number): void => {
    if (depth > 256) return;
    if (walked !== undefined) {
      if (walked.has(value)) return;
      walked.add(value);
    }
    if (Array.isArray(value)) {
      for (let i = 0; i < value.length; i++) {
        const item: unknown = value[i];
        if (item === null || typeof item !== 'object') continue;
        tokens.push(i);
        walk(item, depth + 1);
        tokens.pop();
      }
      return;
    }
    const node = value as Record<string, unknown>;
    // `for…in` over a parsed document (plain objects, no inherited enumerable keys) allocates no key array.
    for (const key in node) {
      const kind = KEY_KINDS.get(key);
      if (kind === DATA || (key.charCodeAt(0) === 120 /* x */ && key.charCodeAt(1) === 45) /* - */) continue;
      const entry = node[key];
      if (kind !== undefined) {
        if (kind === ONE_SCHEMA) {
          if (entry === null || isObject(entry)) checkSchema(entry, key);
        } else if (kind === SCHEMA_MAP) {
          if (isObject(entry)) for (const name in entry) checkSchema(entry[name], key, name);
        } else if (Array.isArray(entry)) {
          for (let i = 0; i < entry.length; i++) checkSchema(entry[i], key, i);
        }
      }
      if (entry === null || typeof entry !== 'object') continue;
      tokens.push(key);
      walk(entry, depth + 1);
      tokens.pop();
    }
  };
  walk(doc.root, 0);
  return warnings;
}

/**
 * Whether the entry file's text can hold any of these shapes, decided by native text searches so a big
 * JSON document without them is not walked at all. JSON only (YAML spells null `~` or leaves the value
 * empty, so YAML is always walked): a null schema is a `null` literal after `:`, `,` or `[`; before 3.1 a
 * `'null'` type is the string `"null"` and a type array is `"type": [` (or a key written with `\u` escapes).
 * 3.1 type arrays naming `"null"` are valid and need no walk.
 */
function mayHoldShapeProblems(doc: ApiDocument): boolean {
  const source = doc.source?.();
  if (!source || source.format !== 'json') return true;
  // The escaped text of a big JSON file with non-ASCII characters (its own two-byte text is not made for this).
  const text = source.scanText;
  // Native substring searches, then a look at the neighbours: a regex starting with a class tries every
  // offset of a 10 MB text.
  if (findLiteral(text, 'null', (before) => before === COLON || before === COMMA || before === OPEN_BRACKET)) return true;
  if (doc.version === '3.1') return false;
  if (text.includes('"null"') || source.writesUnicodeEscape()) return true;
  return findLiteral(text, '"type"', (_before, at) => {
    let i = skipSpace(text, at + 6);
    if (text.charCodeAt(i) !== COLON) return false;
    i = skipSpace(text, i + 1);
    return text.charCodeAt(i) === OPEN_BRACKET;
  });
}

// Made once: a literal in findLiteral's loop would make a RegExp object per occurrence.
const WORD_CHARACTER = /\w/;
const COLON = 58;
const COMMA = 44;
const OPEN_BRACKET = 91;

/** Whether `needle` occurs where `accept` (given the code of the non-blank character before it) says so. */
function findLiteral(text: string, needle: string, accept: (before: number, at: number) => boolean): boolean {
  for (let at = text.indexOf(needle); at !== -1; at = text.indexOf(needle, at + needle.length)) {
    // `null` must end there (not `nullable`); a quoted needle ends with its quote.
    if (needle === 'null' && WORD_CHARACTER.test(text.charAt(at + 4))) continue;
    let before = at - 1;
    while (before >= 0 && isSpace(text.charCodeAt(before))) before -= 1;
    if (accept(before < 0 ? -1 : text.charCodeAt(before), at)) return true;
  }
  return false;
}

function skipSpace(text: string, i: number): number {
  while (i < text.length && isSpace(text.charCodeAt(i))) i += 1;
  return i;
}

