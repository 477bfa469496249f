import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { UsageError } from '../../src/errors.js';
import { DEFAULT_SETTINGS, findConfigFile, loadConfig, parseConfig } from '../../src/lint/config.js';

const known = ['scope-missing', 'scope-too-wide', 'key-unbounded'];

function usageError(fn: () => unknown): UsageError {
  try {
    fn();
  } catch (error) {
    assert.ok(error instanceof UsageError, `expected UsageError, got ${String(error)}`);
    return error;
  }
  assert.fail('expected a UsageError');
}

describe('lint config', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'idemkit-config-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('reads severities, unsafe methods and key headers from YAML', () => {
    const config = parseConfig(
      '# team config\nrules:\n  scope-missing: warn\n  key-unbounded: off\nunsafeMethods: [POST, put, patch]\nkeyHeaders: [X-Request-Token]\n',
      '/x/.idemkitrc.yaml',
      known,
    );
    assert.deepEqual(config.rules, { 'scope-missing': 'warn', 'key-unbounded': 'off' });
    assert.deepEqual(config.settings.unsafeMethods, ['post', 'put', 'patch']);
    assert.deepEqual(config.settings.keyHeaders, ['X-Request-Token']);
    assert.equal(config.file, '/x/.idemkitrc.yaml');
  });

  it('keeps the default settings for what the file leaves out', () => {
    const config = parseConfig('{ "rules": { "scope-too-wide": "info" } }', '/x/idemkit.config.json', known);
    assert.deepEqual(config.settings, DEFAULT_SETTINGS);
    assert.deepEqual(config.rules, { 'scope-too-wide': 'info' });
  });

  it('says a config nested thousands deep is nested too deeply — not "Maximum call stack … fix the YAML syntax" of valid JSON, nor an internal error', () => {
    for (const [text, file] of [
      [`{"rules": ${'['.repeat(3000)}${']'.repeat(3000)}}`, '/x/idemkit.config.json'],
      [`rules:\n${Array.from({ length: 3000 }, (_, i) => `${' '.repeat(i + 2)}a:\n`).join('')}`, '/x/.idemkitrc.yaml'],
    ] as const) {
      const error = usageError(() => parseConfig(text, file, known));
      assert.match(error.message, /^config is nested too deeply/, file);
    }
  });

  it('names the line of an unknown rule id and suggests the right one', () => {
    const error = usageError(() => parseConfig('rules:\n  scope-missing: warn\n  scope-to-wide: error\n', '/x/.idemkitrc.yaml', known));
    assert.equal(error.file, '/x/.idemkitrc.yaml');
    assert.equal(error.line, 3);
    assert.equal(error.column, 3);
    assert.match(error.message, /unknown rule id "scope-to-wide".*did you mean "scope-too-wide"/);
  });

  it('reads a config with lone-CR line breaks (a classic Mac file), YAML or JSON, and names the right line', () => {
    assert.deepEqual(parseConfig('rules:\r  scope-missing: warn\r', '/x/.idemkitrc.yaml', known).rules, { 'scope-missing': 'warn' });
    assert.deepEqual(parseConfig('{\r  "rules": {\r    "scope-missing": "warn"\r  }\r}\r', '/x/idemkit.config.json', known).rules, { 'scope-missing': 'warn' });
    const error = usageError(() => parseConfig('{\r  "rules": {\r    "scope-to-wide": "warn"\r  }\r}\r', '/x/idemkit.config.json', known));
    assert.deepEqual([error.line, error.column], [3, 5]);
    assert.match(error.message, /unknown rule id "scope-to-wide"/);
  });

  it('names the line of a bad severity', () => {
    const error = usageError(() => parseConfig('rules:\n  scope-missing: fatal\n', '/x/.idemkitrc.yaml', known));
    assert.equal(error.line, 2);
    assert.equal(error.column, 18);
    assert.match(error.message, /rules\.scope-missing must be one of off, info, warn, error/);
  });

  it('names the line of an unknown setting, in JSON too', () => {
    const error = usageError(() => parseConfig('{\n  "rules": {},\n  "unsafeMethod": ["put"]\n}\n', '/x/.idemkitrc.json', known));
    assert.equal(error.line, 3);
    assert.equal(error.column, 3);
    assert.match(error.message, /unknown setting "unsafeMethod" \(did you mean "unsafeMethods"\?\)/);
  });

  it('rejects something that is not an HTTP method, and a bad header name', () => {
    const method = usageError(() => parseConfig('unsafeMethods:\n  - post\n  - send\n', '/x/.idemkitrc.yaml', known));
    assert.equal(method.line, 3);
    assert.match(method.message, /"send" is not an HTTP method/);
    const header = usageError(() => parseConfig('keyHeaders: ["Bad Header"]\n', '/x/.idemkitrc.yaml', known));
    assert.equal(header.line, 1);
    assert.match(header.message, /keyHeaders\.0 is not a valid HTTP header name/);
  });

  it('reports malformed YAML and JSON with a position', () => {
    const yaml = usageError(() => parseConfig('rules:\n  scope-missing: warn\n   bad: [\n', '/x/.idemkitrc.yaml', known));
    assert.match(yaml.message, /^config is not valid YAML/);
    assert.ok(yaml.line !== undefined && yaml.line >= 2);
    const json = usageError(() => parseConfig('{ "rules": { "scope-missing": "warn", } }', '/x/idemkit.config.json', known));
    assert.match(json.message, /^config is not valid JSON/);
    assert.equal(json.line, 1);
  });

  /** Where parsing `text` as the config file `file` fails: the usage error's message, line and column. */
  const syntaxError = (text: string, file: string) => {
    const error = usageError(() => parseConfig(text, file, known));
    return { message: error.message, line: error.line, column: error.column };
  };

  it('points at the token of a JSON syntax error V8 gives no position for (YAML reads it fine), on one line', () => {
    assert.deepEqual(syntaxError('{\n  "rules": {\n    "key-unbounded": off\n  }\n}\n', '/x/.idemkitrc.json'), {
      message: "config is not valid JSON: Unexpected token 'o' — fix the syntax here (a missing comma, quote or bracket?)",
      line: 3,
      column: 22,
    });
  });

  it('points at an unclosed quote where it opens, and says to close it', () => {
    assert.deepEqual(syntaxError('rules:\n  scope-missing: "warn\n', '/x/.idemkitrc.yaml'), {
      message: 'config is not valid YAML: Missing closing "quote — close the quote, bracket or brace (truncated file?)',
      line: 2,
      column: 18,
    });
  });

  it('reads a config with a UTF-8 BOM (Notepad), and refuses a UTF-16 one saying so', () => {
    assert.deepEqual(parseConfig('\ufeff{"rules": {"scope-missing": "off"}}', '/x/.idemkitrc.json', known).rules, { 'scope-missing': 'off' });
    writeFileSync(path.join(dir, '.idemkitrc.json'), Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('{"rules": {"scope-missing": "off"}}')]));
    assert.deepEqual(loadConfig({ configFile: '.idemkitrc.json', cwd: dir, knownRuleIds: known }).rules, { 'scope-missing': 'off' });
    writeFileSync(path.join(dir, 'utf16.yaml'), Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from('rules: {}\n', 'utf16le')]));
    const error = usageError(() => loadConfig({ configFile: 'utf16.yaml', cwd: dir, knownRuleIds: known }));
    assert.equal(error.message, 'the config file is UTF-16 — save it as UTF-8');
  });

  it('rejects a config that is not a mapping', () => {
    const error = usageError(() => parseConfig('- rules\n', '/x/.idemkitrc.yaml', known));
    assert.match(error.message, /the config must be a mapping/);
  });

  it('is not discovered above the git repository the spec is in: a config outside the checkout decides nothing', () => {
    // The CLI review's: a .idemkitrc.yaml in a directory above the checkout turned off the scope rules, and
    // generate wrote a guard it refuses otherwise.
    mkdirSync(path.join(dir, 'repo', '.git'), { recursive: true });
    mkdirSync(path.join(dir, 'repo', 'api'), { recursive: true });
    writeFileSync(path.join(dir, '.idemkitrc.yaml'), 'rules:\n  scope-missing: off\n');
    assert.equal(findConfigFile(path.join(dir, 'repo', 'api')), undefined);
    writeFileSync(path.join(dir, 'repo', 'idemkit.config.json'), '{ "rules": { "scope-missing": "info" } }');
    assert.equal(findConfigFile(path.join(dir, 'repo', 'api')), path.join(dir, 'repo', 'idemkit.config.json'));
    // Outside any repository the walk goes on up.
    assert.equal(findConfigFile(path.join(dir)), path.join(dir, '.idemkitrc.yaml'));
  });

  it('is discovered upward from the spec, nearest first', () => {
    mkdirSync(path.join(dir, 'api', 'v1'), { recursive: true });
    writeFileSync(path.join(dir, 'idemkit.config.json'), '{ "rules": { "scope-missing": "off" } }');
    const spec = path.join(dir, 'api', 'v1', 'openapi.yaml');
    assert.equal(findConfigFile(path.dirname(spec)), path.join(dir, 'idemkit.config.json'));
    assert.deepEqual(loadConfig({ specFile: spec, cwd: dir, knownRuleIds: known }).rules, { 'scope-missing': 'off' });
    writeFileSync(path.join(dir, 'api', '.idemkitrc.yaml'), 'rules:\n  scope-missing: info\n');
    const nearer = loadConfig({ specFile: spec, cwd: dir, knownRuleIds: known });
    assert.equal(nearer.file, path.join(dir, 'api', '.idemkitrc.yaml'));
    assert.deepEqual(nearer.rules, { 'scope-missing': 'info' });
  });

  it('refuses two config files in one directory (one would be silently ignored); --config names one', () => {
    writeFileSync(path.join(dir, '.idemkitrc.yml'), 'rules:\n  scope-missing: off\n');
    writeFileSync(path.join(dir, '.idemkitrc.json'), '{ "rules": { "scope-missing": "error" } }');
    assert.throws(
      () => loadConfig({ specFile: path.join(dir, 'openapi.yaml'), cwd: dir, knownRuleIds: known }),
      (error: unknown) => error instanceof UsageError && /^\.idemkitrc\.yml and \.idemkitrc\.json are both in .*: keep one config file there \(or name one with --config\)$/.test(error.message),
    );
    assert.deepEqual(loadConfig({ configFile: '.idemkitrc.json', cwd: dir, knownRuleIds: known }).rules, { 'scope-missing': 'error' });
  });

  it('uses --config instead of discovery, and fails clearly when it is missing', () => {
    writeFileSync(path.join(dir, 'custom.yaml'), 'keyHeaders: [X-Op-Token]\n');
    const config = loadConfig({ configFile: 'custom.yaml', cwd: dir, specFile: path.join(dir, 'spec.yaml'), knownRuleIds: known });
    assert.deepEqual(config.settings.keyHeaders, ['X-Op-Token']);
    const error = usageError(() => loadConfig({ configFile: 'nope.yaml', cwd: dir, knownRuleIds: known }));
    assert.match(error.message, /config file nope\.yaml does not exist/);
    mkdirSync(path.join(dir, 'conf'));
    const directory = usageError(() => loadConfig({ configFile: 'conf', cwd: dir, knownRuleIds: known }));
    assert.equal(directory.message, 'config file conf is a directory — name the config file in it (.idemkitrc.yaml, .idemkitrc.yml, .idemkitrc.json, idemkit.config.json)');
  });

  it('falls back to the defaults when no file is found', () => {
    const config = loadConfig({ specFile: path.join(dir, 'spec.yaml'), cwd: dir, knownRuleIds: known });
    // The temp dir has no config; a config above it (e.g. in $HOME) would show up here, so only check shape.
    if (config.file === undefined) assert.deepEqual(config.rules, {});
    else assert.ok(!config.file.startsWith(dir));
  });
});
