/**
 * The lint configuration file: discovery upward from the spec, parsing with positions, and validation once
 * at load. A config file that cannot be used is a {@link UsageError} that names the bad line.
 */
import { existsSync, readFileSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import type * as AjvModule from 'ajv';
import type { ErrorObject, ValidateFunction } from 'ajv';
import type * as YamlModule from 'yaml';
import type { Document, Node as YamlNode } from 'yaml';
import { UsageError } from '../errors.js';
import { encodingProblem, notUtf8 } from '../parser/encoding.js';
import { describeJsonSyntaxError } from '../parser/json-errors.js';
import { describeYamlSyntaxError } from '../parser/yaml-errors.js';
import { suggestionSuffix } from './did-you-mean.js';
import type { LintSettings, Severity } from './rule.js';

/** File names looked for in each directory, first match wins. */
export const CONFIG_FILE_NAMES = ['.idemkitrc.yaml', '.idemkitrc.yml', '.idemkitrc.json', 'idemkit.config.json'] as const;

/** A rule's configured level: a severity, or `off`. */
export type RuleLevel = Severity | 'off';

/** The settings rules see when no config file changes them. */
export const DEFAULT_SETTINGS: LintSettings = { unsafeMethods: ['post', 'patch'], keyHeaders: [] };

/** A loaded, validated configuration. */
export interface LintConfig {
  /** Absolute path of the file it came from; `undefined` for the built-in defaults. */
  readonly file: string | undefined;
  /** Level per rule id, only for the rules the file names. */
  readonly rules: Readonly<Record<string, RuleLevel>>;
  readonly settings: LintSettings;
}

const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace', 'query'];

const configSchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    $schema: { type: 'string' },
    rules: { type: 'object', additionalProperties: { enum: ['off', 'info', 'warn', 'error'] } },
    unsafeMethods: { type: 'array', items: { type: 'string' } },
    keyHeaders: { type: 'array', items: { type: 'string', pattern: "^[!#$%&'*+.^_`|~0-9A-Za-z-]+$" } },
  },
} as const;

// yaml and ajv are loaded (and the schema compiled) on first use: runs without a config never pay for them.
const require = createRequire(import.meta.url);
let yamlModule: typeof YamlModule | undefined;
let compiled: ValidateFunction | undefined;

function yaml(): typeof YamlModule {
  return (yamlModule ??= require('yaml') as typeof YamlModule);
}

function validateShape(value: unknown): ValidateFunction {
  compiled ??= new (require('ajv') as typeof AjvModule).Ajv({ allErrors: false, strict: true }).compile(configSchema);
  compiled(value);
  return compiled;
}

/** The built-in configuration (no file). */
export function defaultConfig(): LintConfig {
  return { file: undefined, rules: {}, settings: DEFAULT_SETTINGS };
}

/**
 * The config file found in `startDir` or the nearest directory above it — up to the root of the git repository `startDir` is
 * in, if any — or `undefined`; a directory with two is a UsageError.
 */
export function findConfigFile(startDir: string): string | undefined {
  let dir = path.resolve(startDir);
  for (;;) {
    // Two config files in one directory: which one applies would be a guess (one silently ignored).
    const here = CONFIG_FILE_NAMES.map((name) => path.join(dir, name)).filter((candidate) => existsSync(candidate) && statSync(candidate).isFile());
    if (here.length > 1) {
      throw new UsageError(`${here.map((file) => path.basename(file)).join(' and ')} are both in ${dir}: keep one config file there (or name one with --config)`);
    }
    if (here.length === 1) return here[0];
    // Not past the repository's root (the directory holding `.git`, the bound `$ref`s keep to too): a config in a
    // directory above the checkout — another project's, or one a CI machine happens to have — must not decide its lint.
    if (existsSync(path.join(dir, '.git'))) return undefined;
    const parent = path.dirname(dir);
    if (parent === dir) return undefined;
    dir = parent;
  }
}

/** Options of {@link loadConfig}. */
export interface LoadConfigOptions {
  /** The spec being linted: discovery starts in its directory. */
  readonly specFile?: string;
  /** An explicit `--config FILE` (relative to `cwd`); disables discovery. */
  readonly configFile?: string;
  readonly cwd: string;
  /** Every rule id the config may name. */
  readonly knownRuleIds: readonly string[];
}

/** Finds (or takes) the config file, reads and validates it; the defaults when there is none. */
export function loadConfig(options: LoadConfigOptions): LintConfig {
  let file: string | undefined;
  if (options.configFile !== undefined) {
    file = path.resolve(options.cwd, options.configFile);
    if (!existsSync(file)) throw new UsageError(`config file ${options.configFile} does not exist (check the --config path)`);
    const stats = statSync(file);
    if (stats.isDirectory()) throw new UsageError(`config file ${options.configFile} is a directory — name the config file in it (${CONFIG_FILE_NAMES.join(', ')})`);
    // A device or a pipe (`/dev/zero`) would be read without an end.
    if (!stats.isFile()) throw new UsageError(`config file ${options.configFile} is not a regular file — name the config file`);
  } else {
    file = findConfigFile(options.specFile ? path.dirname(path.resolve(options.cwd, options.specFile)) : options.cwd);
  }
  if (file === undefined) return defaultConfig();
  let bytes: Buffer;
  try {
    bytes = readFileSync(file);
  } catch (error) {
    throw new UsageError(`cannot read config file: ${(error as Error).message}`, file);
  }
  const problem = encodingProblem(bytes);
  if (problem !== undefined) throw new UsageError(problem.replace(/^the file/, 'the config file'), file, 1, 1);
  const invalid = notUtf8(bytes);
  if (invalid !== undefined) throw new UsageError(invalid.message.replace('the file', 'the config file'), file, invalid.line, invalid.column);
  return parseConfig(bytes.toString('utf8'), file, options.knownRuleIds);
}

/** Parses and validates config text (YAML or JSON); `file` is used for positions in errors. */
export function parseConfig(text: string, file: string, knownRuleIds: readonly string[]): LintConfig {
  // A UTF-8 BOM (Notepad writes one) is not content, as in documents.
  if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
  // A lone CR is a line break, as in documents; `yaml` breaks lines at LF only (same length: offsets hold).
  text = text.replace(/\r(?!\n)/g, '\n');
  const yamlModule = yaml();
  const lineCounter = new yamlModule.LineCounter();
  const fail = (message: string, offset: number | undefined): never => {
    const pos = offset === undefined ? { line: 1, col: 1 } : lineCounter.linePos(offset);
    throw new UsageError(message, file, pos.line, pos.col);
  };
  const tooDeep = 'config is nested too deeply — a config is a few levels of rule names and options: flatten it';
  let doc: ReturnType<typeof yamlModule.parseDocument>;
  try {
    doc = yamlModule.parseDocument(text, { lineCounter, uniqueKeys: true, prettyErrors: false });
  } catch (error) {
    if (error instanceof RangeError) fail(tooDeep, undefined);
    throw error;
  }
  // A .json config is judged as JSON first: YAML reads `"level": off` and misses a quote elsewhere.
  if (file.endsWith('.json') && text.trim() !== '') {
    try {
      JSON.parse(text);
    } catch (error) {
      const { offset, message, hint } = describeJsonSyntaxError(error, text);
      fail(`config is not valid JSON: ${message} — ${hint}`, offset);
    }
  }
  const syntax = doc.errors[0];
  // The parser's own stack overflow on deep nesting, reported as an error of the text: no syntax error at all.
  if (syntax && /call stack/i.test(syntax.message)) fail(tooDeep, undefined);
  if (syntax) {
    const { offset, message } = describeYamlSyntaxError(yamlModule, text, syntax);
    fail(`config is not valid ${file.endsWith('.json') ? 'JSON' : 'YAML'}: ${message}`, offset);
  }
  let value: unknown;
  try {
    value = doc.toJS() ?? {};
  } catch (error) {
    // yaml refuses to expand aliases past a limit ("Excessive alias count"): a config has no use for them.
    fail(`config could not be read: ${(error as Error).message} — write the values out instead of through anchors and aliases`, undefined);
  }
  const validated = validateShape(value);
  if (validated.errors && validated.errors.length > 0) {
    const error = validated.errors[0]!;
    fail(describeSchemaError(error), offsetOf(doc, error));
  }
  const config = value as { rules?: Record<string, RuleLevel>; unsafeMethods?: string[]; keyHeaders?: string[] };
  for (const id of Object.keys(config.rules ?? {})) {
    if (!knownRuleIds.includes(id)) {
      fail(`unknown rule id "${id}" in rules${suggestionSuffix(id, knownRuleIds)}; run \`idemkit rules\` for the list`, offsetOf(doc, ['rules', id], true));
    }
  }
  (config.unsafeMethods ?? []).forEach((method, index) => {
    if (!HTTP_METHODS.includes(method.toLowerCase())) {
      fail(`unsafeMethods[${index}]: "${method}" is not an HTTP method (expected one of ${HTTP_METHODS.join(', ')})`, offsetOf(doc, ['unsafeMethods', index]));
    }
  });
  return {
    file,
    rules: { ...(config.rules ?? {}) },
    settings: {
      unsafeMethods: config.unsafeMethods ? [...new Set(config.unsafeMethods.map((m) => m.toLowerCase()))] : DEFAULT_SETTINGS.unsafeMethods,
      keyHeaders: config.keyHeaders ?? DEFAULT_SETTINGS.keyHeaders,
    },
  };
}

function pathOf(instancePath: string): (string | number)[] {
  if (instancePath === '') return [];
  return instancePath
    .slice(1)
    .split('/')
    .map((token) => token.replace(/~1/g, '/').replace(/~0/g, '~'));
}

function describeSchemaError(error: ErrorObject): string {
  const where = pathOf(error.instancePath).join('.') || 'the config';
  switch (error.keyword) {
    case 'additionalProperties': {
      const extra = (error.params as { additionalProperty: string }).additionalProperty;
      return `unknown setting "${extra}"${suggestionSuffix(extra, ['rules', 'unsafeMethods', 'keyHeaders'])} (allowed: rules, unsafeMethods, keyHeaders)`;
    }
    case 'enum':
      return `${where} must be one of off, info, warn, error`;
    case 'type':
      return `${where} must be ${(error.params as { type: string }).type === 'object' ? 'a mapping' : `of type ${(error.params as { type: string }).type}`}`;
    case 'pattern':
      return `${where} is not a valid HTTP header name`;
    default:
      return `${where} ${error.message ?? 'is invalid'}`;
  }
}

/** Offset of the node an ajv error (or a path) is about; for an unknown member, its key. */
function offsetOf(doc: Document, target: ErrorObject | (string | number)[], preferKey = false): number | undefined {
  let segments: (string | number)[];
  let key = preferKey;
  if (Array.isArray(target)) segments = target;
  else {
    segments = pathOf(target.instancePath);
    if (target.keyword === 'additionalProperties') {
      segments = [...segments, (target.params as { additionalProperty: string }).additionalProperty];
      key = true;
    }
  }
  const { isMap, isSeq } = yaml();
  let node: YamlNode | null | undefined = doc.contents as YamlNode | null;
  let keyNode: YamlNode | undefined;
  for (const segment of segments) {
    if (isMap(node)) {
      const pair = node.items.find((item) => String((item.key as { value?: unknown } | null)?.value ?? item.key) === String(segment));
      if (!pair) break;
      keyNode = pair.key as YamlNode;
      node = pair.value as YamlNode | null;
    } else if (isSeq(node)) {
      keyNode = undefined;
      node = node.items[Number(segment)] as YamlNode | undefined;
    } else break;
  }
  const chosen = key && keyNode ? keyNode : (node ?? keyNode);
  return chosen?.range?.[0];
}
