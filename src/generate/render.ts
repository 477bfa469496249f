/**
 * The one Handlebars instance every generator renders with.
 *
 * Templates are compiled `strict` (a missing view-model field throws; `json` also refuses `undefined`), `noEscape` (no HTML escaping: this is
 * TypeScript, not markup) and `knownHelpersOnly`. Spec text reaches generated code only through the `json`
 * helper (a JS literal) or the `comment` helper (a comment-safe quoted string): a bare `{{field}}` mustache
 * is rejected when the template is loaded, so a template cannot paste a spec string into code by mistake.
 */
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import Handlebars from 'handlebars';
import { InternalError } from '../errors.js';

/**
 * Characters that are legal in JSON strings but must not appear raw in JS source or in a `//` comment: line
 * terminators, `<`, `>`, `*\/`, and the bidirectional controls (U+061C, U+200E, U+200F, U+202A–U+202E,
 * U+2066–U+2069) that make an editor or a review show code in another order than it runs ("Trojan Source").
 */
const UNSAFE_IN_SOURCE = /[\u2028\u2029<>\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]|\*\//g;

function escapeForSource(match: string): string {
  // `*/` only occurs inside string literals of JSON output; `\/` is the same character in a JS string.
  if (match === '*/') return '*\\/';
  return `\\u${match.charCodeAt(0).toString(16).padStart(4, '0')}`;
}

/**
 * A JavaScript literal for `value`: strings, numbers, booleans, `null`, arrays and plain objects (as JSON),
 * `undefined` as `undefined`. The result never contains a raw line terminator, `*\/`, `<`, `>` or bidirectional control, so it is
 * safe in any expression position (and inside a `<script>` if someone ever embeds it).
 */
export function toJsLiteral(value: unknown, indent?: number): string {
  if (value === undefined) return 'undefined';
  if (typeof value === 'number' && !Number.isFinite(value)) {
    throw new InternalError(`cannot emit the non-finite number ${String(value)} as a literal`);
  }
  if (typeof value === 'bigint' || typeof value === 'function' || typeof value === 'symbol') {
    throw new InternalError(`cannot emit a ${typeof value} as a literal`);
  }
  const text = JSON.stringify(value, null, indent);
  // `"__proto__": …` in an object literal sets the prototype instead of a member: a spec's field of that name
  // is written as a computed key, an own member like the others. (In JSON text a string followed by `:` right
  // after `{` or `,` is always a member name.)
  return text.replace(UNSAFE_IN_SOURCE, escapeForSource).replace(/([{,]\s*)"__proto__":/g, '$1["__proto__"]:');
}

/** A double-quoted string literal as toJsLiteral writes it, written in single quotes instead (the same value). */
function singleQuoted(literal: string): string {
  return `'${literal.slice(1, -1).replace(/\\.|'/g, (match) => (match === '\\"' ? '"' : match === "'" ? "\\'" : match))}'`;
}

/** A string that is safe inside a `//` line comment: the quoted, escaped literal of `text`. */
export function toCommentText(text: string): string {
  return toJsLiteral(String(text));
}

const RESERVED = new Set(
  (
    'break case catch class const continue debugger default delete do else enum export extends false finally for ' +
    'function if import in instanceof new null return super switch this throw true try typeof var void while with ' +
    'yield let static implements interface package private protected public await arguments eval undefined NaN ' +
    'Infinity any boolean number string symbol object never unknown type namespace declare module as async of'
  ).split(' '),
);

/**
 * Names that are not to be members of an object the generated code returns (the client, the guards): `then` makes
 * it a thenable (`await getClient()` would call the operation and never settle), `toJSON`, `toString` and
 * `valueOf` are called by `JSON.stringify`, templates and comparisons, the rest shadow `Object.prototype`. An
 * operation named so gets a numbered name (`then2`).
 */
export const OBJECT_PROTOCOL_NAMES: readonly string[] = [
  'then', 'toJSON', 'toString', 'valueOf', 'toLocaleString', 'constructor', 'hasOwnProperty', 'isPrototypeOf', 'propertyIsEnumerable',
];

/**
 * A safe TypeScript identifier (camelCase, ASCII letters, digits, `_`) derived from `text`, e.g. an
 * operationId. Never empty, never a reserved word, never starts with a digit. Not unique on its own:
 * the view model deduplicates.
 */
export function toIdentifier(text: string): string {
  const words = String(text)
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .split(/[^A-Za-z0-9]+/)
    .filter((word) => word.length > 0);
  let ident = words
    .map((word, index) => {
      if (index > 0) return word.charAt(0).toUpperCase() + word.slice(1);
      // `POST` reads better as `post` than `pOST`.
      return word === word.toUpperCase() ? word.toLowerCase() : word.charAt(0).toLowerCase() + word.slice(1);
    })
    .join('');
  if (ident === '') ident = 'operation';
  if (/^[0-9]/.test(ident)) ident = `_${ident}`;
  if (RESERVED.has(ident)) ident = `${ident}_`;
  return ident;
}

/** True for the identifiers {@link toIdentifier} produces (and other plain ASCII identifiers). */
export function isIdentifier(text: unknown): text is string {
  return typeof text === 'string' && /^[A-Za-z_$][A-Za-z0-9_$]*$/.test(text) && !RESERVED.has(text);
}

const hbs = Handlebars.create();

hbs.registerHelper('json', function json(value: unknown, options: Handlebars.HelperOptions) {
  // Handlebars' strict mode does not cover helper arguments, so a misspelt field would silently become
  // `undefined`; view models say `null` where they mean "absent".
  if (value === undefined) throw new InternalError('{{json}} got undefined: the view model lacks this field');
  const indent = options.hash['indent'];
  const literal = toJsLiteral(value, typeof indent === 'number' ? indent : undefined);
  // quote='single': a string in single quotes, as the copied runtime writes its import specifiers.
  return options.hash['quote'] === 'single' && typeof value === 'string' ? singleQuoted(literal) : literal;
});
hbs.registerHelper('comment', (value: unknown) => toCommentText(String(value)));
hbs.registerHelper('ident', (value: unknown) => {
  // View models compute unique identifiers; the helper refuses anything that is not already one.
  if (!isIdentifier(value)) throw new InternalError(`not a safe identifier: ${toJsLiteral(String(value))}`);
  return value;
});
hbs.registerHelper('eq', (left: unknown, right: unknown) => left === right);

const KNOWN_HELPERS = { json: true, comment: true, ident: true, eq: true } as const;
const OUTPUT_HELPERS = new Set(['json', 'comment', 'ident']);

type AstNode = { type: string; [key: string]: unknown };

/** Rejects `{{path}}` mustaches that would paste a value into code without a quoting helper. */
function assertQuotedOutput(node: unknown, name: string): void {
  if (node === null || typeof node !== 'object') return;
  if (Array.isArray(node)) {
    for (const child of node) assertQuotedOutput(child, name);
    return;
  }
  const ast = node as AstNode;
  if (ast.type === 'MustacheStatement') {
    const pathNode = ast['path'] as { original?: unknown };
    const helper = typeof pathNode.original === 'string' ? pathNode.original : '';
    if (!OUTPUT_HELPERS.has(helper)) {
      const loc = ast['loc'] as { start?: { line: number; column: number } } | undefined;
      const at = loc?.start ? `${loc.start.line}:${loc.start.column + 1}` : '?';
      throw new InternalError(
        `template ${name}:${at}: output must go through {{json …}}, {{comment …}} or {{ident …}}, not {{${helper || '…'}}}`,
      );
    }
  }
  if (ast.type === 'PartialStatement' || ast.type === 'PartialBlockStatement') return;
  for (const key of ['body', 'program', 'inverse']) {
    const child = ast[key];
    if (child !== undefined) assertQuotedOutput(child, name);
  }
}

let rootCache: string | undefined;

/**
 * The package root (the directory holding `package.json`, `templates/` and `src/runtime/`), found from
 * this module's location so it works from `src/` under tsx and from `dist/` after a build.
 */
export function packageRoot(): string {
  if (rootCache !== undefined) return rootCache;
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (;;) {
    if (existsSync(path.join(dir, 'package.json')) && existsSync(path.join(dir, 'templates'))) {
      rootCache = dir;
      return dir;
    }
    const parent = path.dirname(dir);
    if (parent === dir) throw new InternalError('cannot find the idemkit package root (templates/ is missing)');
    dir = parent;
  }
}

const COMPILE_OPTIONS: CompileOptions = {
  strict: true,
  noEscape: true,
  knownHelpersOnly: true,
  knownHelpers: KNOWN_HELPERS,
};

const compiled = new Map<string, HandlebarsTemplateDelegate>();
let partialsLoaded = false;

function loadPartials(): void {
  if (partialsLoaded) return;
  const dir = path.join(packageRoot(), 'templates', 'partials');
  if (existsSync(dir)) {
    for (const file of readdirSync(dir).sort()) {
      if (!file.endsWith('.hbs')) continue;
      const name = file.replace(/\.[^.]*\.hbs$|\.hbs$/, '');
      const source = readFileSync(path.join(dir, file), 'utf8');
      assertQuotedOutput(hbs.parse(source), `partials/${file}`);
      hbs.registerPartial(name, hbs.compile(source, COMPILE_OPTIONS));
    }
  }
  partialsLoaded = true;
}

/** Compiles a template source with the house options, after checking that every output is quoted. */
export function compileTemplate(source: string, name = '<inline>'): (data: unknown) => string {
  assertQuotedOutput(hbs.parse(source), name);
  const template = hbs.compile(source, COMPILE_OPTIONS);
  return (data: unknown) => template(data);
}

/**
 * Renders `templates/<name>.hbs` (e.g. `server/contracts.ts`) with `data`.
 * Throws {@link InternalError} when the template is missing or reads a field the view model lacks.
 */
export function renderTemplate(name: string, data: unknown): string {
  loadPartials();
  let template = compiled.get(name);
  if (template === undefined) {
    const file = path.join(packageRoot(), 'templates', `${name}.hbs`);
    if (!existsSync(file)) throw new InternalError(`template not found: templates/${name}.hbs`);
    const source = readFileSync(file, 'utf8');
    assertQuotedOutput(hbs.parse(source), name);
    template = hbs.compile(source, COMPILE_OPTIONS);
    compiled.set(name, template);
  }
  try {
    return template(data);
  } catch (error) {
    if (error instanceof InternalError) throw error;
    throw new InternalError(`template ${name}: ${error instanceof Error ? error.message : String(error)}`);
  }
}
