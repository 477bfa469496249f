/**
 * Schema shapes that real documents get slightly wrong and that have nothing to do with idempotency: a null
 * schema, and JSON Schema 2020-12 idioms (`type: 'null'`, `type` arrays) in OpenAPI 3.0 or Swagger 2.0
 * documents. They never stop a lint; they are returned as document warnings, one per node, for the engine
 * to report as `document-invalid`.
 */
import type { ApiDocument, DocumentWarning, Location } from '../parser/model.js';
import { child, isObject } from './views.js';

// Keys whose value is one schema, keys whose value maps names to schemas, keys whose value lists schemas.
const ONE_SCHEMA = new Set(['schema', 'items', 'additionalProperties', 'not', 'additionalItems', 'contains', 'if', 'then', 'else', 'propertyNames', 'unevaluatedProperties', 'unevaluatedItems']);
const SCHEMA_MAP = new Set(['properties', 'patternProperties', 'schemas', 'definitions', '$defs', 'dependentSchemas']);
const SCHEMA_LIST = new Set(['allOf', 'oneOf', 'anyOf', 'prefixItems']);
// Subtrees that hold data, not schemas (an example may well contain a key named `schema`).
const DATA = new Set(['example', 'examples', 'default', 'enum', 'const']);

/** The schema-shape problems of a document's entry file (unordered: the engine sorts findings by position). */
export function schemaShapeWarnings(doc: ApiDocument): DocumentWarning[] {
  const warnings: DocumentWarning[] = [];
  const pre31 = doc.version !== '3.1';
  const checkSchema = (value: unknown, at: Location): void => {
    if (value === null) {
      warnings.push({ at, message: 'a schema is null here: write {} for "any value" (a null schema is not a Schema Object)' });
      return;
    }
    if (!isObject(value) || !pre31) return;
    const type = value['type'];
    if (type === 'null') {
      warnings.push({
        at: child(at, 'type'),
        message: `type 'null' is OpenAPI 3.1 (JSON Schema 2020-12); in ${doc.version} mark the other alternative \`nullable: true\`${doc.version === '2.0' ? ' (x-nullable)' : ''} instead`,
      });
    } else if (Array.isArray(type)) {
      warnings.push({ at: child(at, 'type'), message: `type arrays are OpenAPI 3.1; in ${doc.version} write one type${doc.version === '3.0' ? ' and `nullable: true` for null' : ''}` });
    }
  };
  const walk = (value: unknown, at: Location, depth: number): void => {
    if (depth > 256 || value === null || typeof value !== 'object') return;
    if (Array.isArray(value)) {
      value.forEach((item, i) => walk(item, child(at, i), depth + 1));
      return;
    }
    for (const [key, entry] of Object.entries(value)) {
      if (DATA.has(key) || key.startsWith('x-') || key === '$ref') continue;
      const entryAt = child(at, key);
      if (ONE_SCHEMA.has(key) && (entry === null || isObject(entry))) checkSchema(entry, entryAt);
      else if (SCHEMA_MAP.has(key) && isObject(entry)) for (const [name, schema] of Object.entries(entry)) checkSchema(schema, child(entryAt, name));
      else if (SCHEMA_LIST.has(key) && Array.isArray(entry)) entry.forEach((schema, i) => checkSchema(schema, child(entryAt, i)));
      walk(entry, entryAt, depth + 1);
    }
  };
  walk(doc.root, { file: doc.file, pointer: '' }, 0);
  return warnings;
}
