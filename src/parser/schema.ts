/**
 * Validation of `x-idempotency` values against the published JSON Schema, with the validator ajv compiled
 * from it ahead of time (`contract-validator.generated.ts`, kept fresh by a test), so no run pays for
 * loading ajv and compiling the schema.
 */
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { ErrorObject } from 'ajv';
import { InternalError } from '../errors.js';
import { summarise } from './summarise.js';
import { validate as generatedValidate } from './contract-validator.generated.js';

type ValidateFunction = ((value: unknown) => boolean) & { errors?: ErrorObject[] | null };

/** One schema violation: the path inside the `x-idempotency` value and a one-line message. */
export interface SchemaViolation {
  readonly path: readonly (string | number)[];
  readonly message: string;
}

const validator = generatedValidate as ValidateFunction;
let schemaCache: Record<string, unknown> | undefined;

/** Absolute path of `schemas/x-idempotency.schema.json` (from `src/parser` and from `dist/src/parser`). */
export function schemaPath(): string {
  for (const relative of ['../../schemas/x-idempotency.schema.json', '../../../schemas/x-idempotency.schema.json']) {
    const candidate = fileURLToPath(new URL(relative, import.meta.url));
    if (existsSync(candidate)) return candidate;
  }
  throw new InternalError('schemas/x-idempotency.schema.json is missing from the package');
}

/** The published schema as an object. */
export function loadContractSchema(): Record<string, unknown> {
  return JSON.parse(readFileSync(schemaPath(), 'utf8')) as Record<string, unknown>;
}

/** Validates one `x-idempotency` value (an operation's, or defaults merged with it). */
export function validateContractValue(value: unknown): SchemaViolation[] {
  if (validator(value)) return [];
  return describeErrors(validator.errors ?? [], value);
}

const FIELD_HINTS: Record<string, string> = {
  duration: 'an ISO 8601 duration such as PT30S or P1D',
  pointer: "a JSON Pointer into the request body, starting with '/' (e.g. /contact/email)",
  exclusion: "a JSON Pointer into the request body, starting with '/' (e.g. /contact/email), or query:NAME for a query parameter",
};

function describeErrors(errors: readonly ErrorObject[], value: unknown): SchemaViolation[] {
  // anyOf/oneOf/allOf produce an error per branch; keep the most specific ones. Every path with an error below it,
  // gathered once (asking each error of every other made a long invalid list quadratic).
  const above = new Set<string>();
  for (const { instancePath } of errors) {
    for (let at = instancePath.lastIndexOf('/'); at >= 0; at = at === 0 ? -1 : instancePath.lastIndexOf('/', at - 1)) above.add(instancePath.slice(0, at));
  }
  const deeper = (path: string) => above.has(path);
  const anyOfPaths = new Set(errors.filter((e) => e.keyword === 'anyOf').map((e) => e.instancePath));
  const seen = new Set<string>();
  const out: SchemaViolation[] = [];
  for (const error of errors) {
    if (error.keyword === 'allOf' || error.keyword === 'if') continue;
    if (anyOfPaths.has(error.instancePath)) {
      if (deeper(error.instancePath) || error.keyword !== 'anyOf') continue;
    }
    const path = error.instancePath === '' ? [] : error.instancePath.slice(1).split('/').map(unescape);
    let target = path;
    let message: string;
    const field = path.reduce((text, token) => (/^\d+$/.test(token) ? `${text}[${token}]` : `${text}.${token}`), 'x-idempotency');
    const actual = summarise(valueAtPath(value, path));
    switch (error.keyword) {
      case 'additionalProperties': {
        const extra = String((error.params as { additionalProperty: string }).additionalProperty);
        target = [...path, extra];
        const allowed = allowedProperties(error);
        message =
          extra === '$ref'
            ? `${field} holds a $ref, which is followed only for a whole contract (\`x-idempotency: {$ref: …}\`) — write the value in place, or $ref the whole contract`
            : `unknown field '${extra}' in ${field}${allowed ? ` (allowed: ${allowed})` : ''}`;
        break;
      }
      case 'enum':
        message = `${field} is ${actual}; use one of: ${((error.params as { allowedValues: unknown[] }).allowedValues ?? []).join(', ')}`;
        break;
      case 'type':
        message = `${field} is ${actual}; it must be ${String((error.params as { type: unknown }).type).replace(',', ' or ')}`;
        break;
      case 'pattern': {
        const definition = /definitions\/(\w+)\//.exec(error.schemaPath)?.[1];
        const hint =
          definition && FIELD_HINTS[definition]
            ? FIELD_HINTS[definition]
            : path[0] === 'scope'
              ? 'one of principal, global, header:NAME, path:NAME, query:NAME'
              : `a value matching ${String((error.params as { pattern: string }).pattern)}`;
        message = `${field} is ${actual}; it must be ${hint}`;
        break;
      }
      case 'required': {
        const missing = String((error.params as { missingProperty: string }).missingProperty);
        message = `${field} needs '${missing}'`;
        break;
      }
      case 'anyOf':
        message = `${field} is ${actual}; it must be "all" or a list of JSON Pointers`;
        break;
      case 'minLength': {
        const limit = Number((error.params as { limit: number }).limit);
        message = limit === 1 ? `${field} is empty; give it a value or leave the field out` : `${field} is ${actual}; it must have at least ${limit} characters`;
        break;
      }
      case 'uniqueItems': {
        // Pointed at the second of the two, which is the one to remove.
        const { i } = error.params as { i: number; j: number };
        target = [...path, String(i)];
        message = `${field} lists ${summarise(valueAtPath(value, target))} twice; remove one`;
        break;
      }
      default:
        message = `${field} ${error.message ?? 'is invalid'}`;
    }
    const dedupe = `${target.join('/')}\u0000${message}`;
    if (seen.has(dedupe)) continue;
    seen.add(dedupe);
    out.push({ path: target.map((token) => (/^(0|[1-9]\d*)$/.test(token) ? Number(token) : token)), message });
  }
  return out;
}

function unescape(token: string): string {
  return token.replace(/~1/g, '/').replace(/~0/g, '~');
}

function valueAtPath(value: unknown, path: readonly string[]): unknown {
  let node = value;
  for (const token of path) node = (node as Record<string, unknown> | undefined)?.[token];
  return node;
}

/** The property names the schema allows at the object an `additionalProperties` error is about (error path only). */
function allowedProperties(error: ErrorObject): string | undefined {
  schemaCache ??= loadContractSchema();
  const definitions = (schemaCache.definitions ?? {}) as Record<string, Record<string, unknown>>;
  const resolve = (node: Record<string, unknown> | undefined) => {
    const ref = node?.$ref;
    return typeof ref === 'string' ? definitions[ref.replace('#/definitions/', '')] : node;
  };
  let node = resolve(definitions.contract);
  const tokens = error.instancePath === '' ? [] : error.instancePath.slice(1).split('/').map(unescape);
  for (const token of tokens) {
    const properties = node?.properties as Record<string, Record<string, unknown>> | undefined;
    node = resolve(properties?.[token] ?? (node?.items as Record<string, unknown> | undefined));
  }
  const properties = node?.properties as Record<string, unknown> | undefined;
  return properties ? Object.keys(properties).join(', ') : undefined;
}
