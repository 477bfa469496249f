import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { chmodSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parse } from 'yaml';
import { main } from '../../src/cli/main.js';
import { bufferIo, runCli } from '../helpers/io.js';
import { requireBinary } from '../helpers/servers.js';

const yamlSpec = `# Payments API — hand-written; these comments must survive
openapi: 3.0.3
info: { title: Payments, version: "1" }
security:
  - bearer: []   # everyone authenticates
paths:
  /payouts:
    post:   # creates a payout
      operationId: createPayout
      parameters:
        - $ref: '#/components/parameters/IdemKey'
      responses:
        '201': { description: created }
        '400': { description: bad key }
        '422': { description: "mismatch"   }   # odd spacing, kept
      # a comment after responses
    get:
      operationId: listPayouts
      responses: { '200': { description: ok } }
  /refunds:
    post:
      operationId: createRefund
      x-fern-idempotent: true
      responses:
        '201': { description: created }
  /transfers:
    put:
      operationId: putTransfer
      security: []
      parameters:
        - { name: X-Idempotency-Key, in: header, schema: { type: string } }
      responses:
        '200': { description: ok }
      x-idempotency: false
components:
  securitySchemes:
    bearer: { type: http, scheme: bearer }
  parameters:
    IdemKey:
      name: Idempotency-Key
      in: header
      required: true
      schema: { type: string, maxLength: 64 }
`;

describe('idemkit init', () => {
  let dir: string;
  const run = (...argv: string[]) => runCli(['init', ...argv], dir);
  const read = (name: string) => readFileSync(path.join(dir, name), 'utf8');
  /** Writes `spec` as api.yaml, runs `init --write` on it (exit 0) and returns what it wrote. */
  const initWrite = async (spec: string): Promise<string> => {
    writeFileSync(path.join(dir, 'api.yaml'), spec);
    assert.equal((await run('api.yaml', '--write')).code, 0);
    return read('api.yaml');
  };
  beforeEach(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'idemkit-init-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('shows the contracts it would add and writes nothing without --write', async () => {
    writeFileSync(path.join(dir, 'api.yaml'), yamlSpec);
    const result = await run('api.yaml');
    assert.equal(result.code, 0, result.err);
    assert.equal(read('api.yaml'), yamlSpec);
    // Nothing is written, so every position is in the file as it is (the operation's method key), none past its end.
    assert.match(result.out, /^api\.yaml:8:5 {2}POST \/payouts \(createPayout\) {2}\(key header Idempotency-Key\)\n/);
    assert.match(result.out, /\napi\.yaml:21:5: skipped POST \/refunds/);
    assert.equal(yamlSpec.split('\n')[7]!.slice(4, 9), 'post:');
    assert.equal(yamlSpec.split('\n')[20]!.slice(4, 9), 'post:');
    assert.match(result.out, /\n\+ {7}x-idempotency:\n/);
    // A marker names no key: the advice says what a guard needs, not "write the same by hand".
    assert.match(result.out, /skipped POST \/refunds \(createRefund\): is marked `x-fern-idempotent` but takes no idempotency key, and a guard needs one: declare where clients send it/);
    assert.match(result.out, /\n1 contract to add; 1 operation skipped \(see above\) — write its x-idempotency by hand; nothing written — run again with --write to apply\n$/);
  });

  it('leaves out what the document-level x-idempotency defaults already say: written, it would be merged over them', async () => {
    // The real-spec review's: the team's tenant scope, 7-day ttl and 2-minute lease were replaced by the scaffold's.
    const withDefaults = yamlSpec.replace(
      /^paths:\n/m,
      'x-idempotency:\n  scope: [principal, "header:X-Tenant-Id"]\n  ttl: P7D\n  lease: PT2M\n  fingerprint: {include: all}\n  retry: {deadline: PT60S, maxAttempts: 5}\n  effect: {owner: payouts, external: false}\n  unknownOutcome: surface\n  responses:\n    replay: {header: Idempotent-Replayed}\n    mismatch: {status: 422}\npaths:\n',
    );
    assert.notEqual(withDefaults, yamlSpec);
    const written = await initWrite(withDefaults);
    const contract = parse(written).paths['/payouts'].post['x-idempotency'];
    assert.deepEqual(Object.keys(contract).sort(), ['key', 'responses']);
    assert.deepEqual(contract.key, { header: 'Idempotency-Key', required: true, maxLength: 64 });
    assert.ok(!('mismatch' in contract.responses), JSON.stringify(contract.responses));
    // The comment names only what neither says.
    const comment = written.split('\n').find((line) => line.includes('Scaffolded by'))!;
    assert.doesNotMatch(comment, /scope|effect owner|retry budget|unknown outcome|replay/);
  });

  it('writes all of its files or none: a $ref\'d file it cannot write leaves the spec as it was', async () => {
    // The CLI review's: the spec was rewritten, then the read-only path item refused, and the error did not say so.
    const op = (id: string) => `post:\n  operationId: ${id}\n  parameters:\n    - name: Idempotency-Key\n      in: header\n      schema: {type: string}\n  responses: {'201': {description: ok}}\n`;
    const spec = `openapi: 3.0.3\ninfo: {title: t, version: '1'}\npaths:\n  /a:\n${op('a').replace(/^/gm, '    ').trimEnd()}\n  /z:\n    $ref: './zpath.yaml'\n`;
    writeFileSync(path.join(dir, 'api.yaml'), spec);
    writeFileSync(path.join(dir, 'zpath.yaml'), op('z'));
    chmodSync(path.join(dir, 'zpath.yaml'), 0o444);
    const result = await run('api.yaml', '--write');
    assert.equal(result.code, 2, result.out);
    assert.match(result.err, /zpath\.yaml/);
    assert.equal(read('api.yaml'), spec, 'the spec is not changed');
    assert.equal(read('zpath.yaml'), op('z'));
  });

  it('inserts the contract keeping every comment and line of the YAML, and re-running is a no-op', async () => {
    const written = await initWrite(yamlSpec);
    // Nothing of the user's text is lost or changed: removing the inserted block gives the original back.
    const inserted = written.split('\n').filter((line) => !yamlSpec.split('\n').includes(line));
    assert.equal(written.split('\n').filter((line) => !inserted.includes(line)).join('\n'), yamlSpec);
    for (const comment of ['# Payments API — hand-written; these comments must survive', '# everyone authenticates', '# creates a payout', '# odd spacing, kept', '# a comment after responses']) {
      assert.ok(written.includes(comment), comment);
    }
    assert.ok(written.includes(`'422': { description: "mismatch"   }   # odd spacing, kept`));
    const contract = parse(written).paths['/payouts'].post['x-idempotency'];
    assert.deepEqual(contract, {
      key: { header: 'Idempotency-Key', required: true, maxLength: 64 },
      scope: ['principal'],
      fingerprint: { include: 'all' },
      ttl: 'P1D',
      lease: 'PT30S',
      responses: { missingKey: { status: 400 }, invalidKey: { status: 400 }, mismatch: { status: 422 } },
    });
    // Inserted at the operation's indentation, after its last entry.
    assert.match(written, /\n {8}'422': .*\n {6}# Scaffolded by `idemkit init`.*\n {6}x-idempotency:\n {8}key:\n/);
    // The operation that said x-idempotency: false is left alone.
    assert.equal(parse(written).paths['/transfers'].put['x-idempotency'], false);

    const again = await run('api.yaml', '--write');
    assert.equal(again.code, 0);
    assert.match(again.out, /skipped POST \/refunds \(createRefund\)/);
    assert.match(again.out, /\nnothing written to api\.yaml: 1 operation that takes an idempotency key was skipped \(see above\) — write its x-idempotency by hand\n$/);
    assert.equal(read('api.yaml'), written);
  });

  it('writes no principal scope where the security allows anonymous requests, and says the scope is open', async () => {
    const spec = yamlSpec.replace('  - bearer: []   # everyone authenticates\n', '  - bearer: []   # everyone authenticates\n  - {}\n');
    assert.notEqual(spec, yamlSpec);
    writeFileSync(path.join(dir, 'api.yaml'), spec);
    const result = await run('api.yaml', '--write');
    assert.equal(result.code, 0, result.err);
    assert.match(result.out, /\napi\.yaml: 1 contract has no scope: its operation also accepts anonymous requests \(`\{\}` in its security\), so init cannot tell whose keys collide — write `scope: \[header:X-Tenant-Id\]` \(whatever names the caller\) or `scope: \[global\]` \(see `idemkit explain scope-missing`\)\n/);
    const written = read('api.yaml');
    assert.equal(parse(written).paths['/payouts'].post['x-idempotency'].scope, undefined);
    // 400 and 422 are documented (missingKey, invalidKey, mismatch): the comment names the states still without a response.
    assert.match(
      written,
      /# Scaffolded by `idemkit init`: `idemkit lint` lists what is still open \(scope, effect owner, retry budget, unknown outcome, replay, a documented response for inProgress 409, abandoned 409, storeUnavailable 503\)\./,
    );
    // What lint says next is what the comment promised, never an error about what init wrote.
    const lint = bufferIo(dir);
    await main(['lint', 'api.yaml', '--format', 'json'], lint);
    const rules = new Set((JSON.parse(lint.out) as { findings: { ruleId: string }[] }).findings.map((finding) => finding.ruleId));
    assert.ok(rules.has('scope-missing'));
    assert.ok(!rules.has('scope-unresolvable'));
  });

  it("inserts after the commented-out lines of the operation's last block, not between them and it", async () => {
    const spec = [
      'openapi: 3.0.3',
      "info: {title: t, version: '1'}",
      'paths:',
      '  /email:',
      '    post:',
      '      operationId: sendEmail',
      '      parameters:',
      '        - {name: Idempotency-Key, in: header, required: true, schema: {type: string, maxLength: 255}}',
      '      responses:',
      "        '200':",
      '          description: ok',
      "        # '409':",
      '        #   description: in progress (not yet documented)',
      '',
      '      # TODO(api-team): document 429',
      '  # next path',
      '',
    ].join('\n');
    const lines = (await initWrite(spec)).split('\n');
    const at = lines.indexOf('        #   description: in progress (not yet documented)');
    assert.match(lines[at + 1]!, /^ {6}# Scaffolded by `idemkit init`/);
    assert.equal(lines[at + 2], '      x-idempotency:');
    assert.ok(lines.indexOf('      # TODO(api-team): document 429') > at + 2, 'a comment at the operation level stays after the contract');
    assert.equal(parse(read('api.yaml')).paths['/email'].post['x-idempotency'].key.header, 'Idempotency-Key');

    // The same file ending in those comments, without a final newline: the contract starts on a line of its own.
    writeFileSync(path.join(dir, 'eof.yaml'), spec.slice(0, spec.indexOf('\n\n      # TODO')));
    assert.equal((await run('eof.yaml', '--write')).code, 0);
    const eof = read('eof.yaml').split('\n');
    const last = eof.indexOf('        #   description: in progress (not yet documented)');
    assert.match(eof[last + 1]!, /^ {6}# Scaffolded by `idemkit init`/);
    assert.equal(parse(read('eof.yaml')).paths['/email'].post['x-idempotency'].key.header, 'Idempotency-Key');
  });

  it('leaves a safe GET that takes a key header alone, saying why', async () => {
    const spec = yamlSpec.replace(
      "    get:\n      operationId: listPayouts\n",
      "    get:\n      operationId: listPayouts\n      parameters:\n        - { name: X-Idempotency-Key, in: header, schema: { type: string } }\n",
    );
    assert.notEqual(spec, yamlSpec);
    writeFileSync(path.join(dir, 'api.yaml'), spec);
    const result = await run('api.yaml', '--write');
    assert.equal(result.code, 0, result.err);
    assert.match(result.out, /^api\.yaml:\d+:5: skipped GET \/payouts \(listPayouts\): is a GET, which HTTP defines as safe \(a repeat has no effect to guard\), so it gets no contract; if this API's GET does act, write the contract by hand$/m);
    assert.equal(parse(read('api.yaml')).paths['/payouts'].get['x-idempotency'], undefined);
    assert.ok(parse(read('api.yaml')).paths['/payouts'].post['x-idempotency']);
  });

  /** The rule ids `idemkit lint` reports on `name` in the test directory. */
  const lintRules = async (name: string): Promise<Set<string>> => {
    const io = bufferIo(dir);
    await main(['lint', name, '--format', 'json'], io);
    return new Set((JSON.parse(io.out) as { findings: { ruleId: string }[] }).findings.map((finding) => finding.ruleId));
  };

  it('scaffolds a key in the body (a JSON Pointer) or the query where the API takes it, bounds copied, and lint finds it declared', async () => {
    const spec = `openapi: 3.1.0
info: { title: Volumes, version: "1" }
paths:
  /volumes:
    put:
      operationId: createVolume
      requestBody:
        required: true
        content:
          application/json:
            schema: { $ref: '#/components/schemas/VolumeInput' }
      responses: { '201': { description: created } }
  /clusters/{id}:
    delete:
      operationId: deleteCluster
      parameters:
        - { name: id, in: path, required: true, schema: { type: string } }
        - name: requestId
          in: query
          required: true
          description: Specify a unique request ID so that if you must retry your request, the server will ignore it if it has already been completed.
          schema: { type: string, maxLength: 128, pattern: '^[a-f0-9-]+$' }
      responses: { '204': { description: deleted } }
components:
  schemas:
    VolumeInput:
      type: object
      required: [ClientToken, size]
      properties:
        ClientToken: { type: string, maxLength: 64 }
        size: { type: integer }
`;
    writeFileSync(path.join(dir, 'api.yaml'), spec);
    const result = await run('api.yaml', '--write');
    assert.equal(result.code, 0, result.err);
    assert.match(result.out, /^api\.yaml:\d+:\d+ {2}PUT \/volumes \(createVolume\) {2}\(key body \/ClientToken\)\n/m);
    assert.match(result.out, /^api\.yaml:\d+:\d+ {2}DELETE \/clusters\/\{id\} \(deleteCluster\) {2}\(key query requestId\)\n/m);
    assert.doesNotMatch(result.out, /skipped/);
    const written = parse(read('api.yaml'));
    assert.deepEqual(written.paths['/volumes'].put['x-idempotency'].key, { body: '/ClientToken', required: true, maxLength: 64 });
    assert.deepEqual(written.paths['/clusters/{id}'].delete['x-idempotency'].key, { query: 'requestId', required: true, maxLength: 128, pattern: '^[a-f0-9-]+$' });
    // Neither operation names security: init leaves scope open, and says so once for the file.
    assert.equal(written.paths['/volumes'].put['x-idempotency'].scope, undefined);
    const notices = result.out.split('\n').filter((line) => line.includes('no scope'));
    assert.deepEqual(notices, [
      'api.yaml: 2 contracts have no scope: their operations name no security, so init cannot tell whose keys collide — write `scope: [header:X-Tenant-Id]` (whatever names the caller) or `scope: [global]` (see `idemkit explain scope-missing`)',
    ]);
    const rules = await lintRules('api.yaml');
    for (const rule of ['key-header-undeclared', 'key-unbounded', 'contract-invalid', 'contract-missing']) assert.ok(!rules.has(rule), `${rule} after init: ${[...rules].join(', ')}`);
    assert.ok(rules.has('scope-missing'), 'what the notice announced');
  });

  it('skips an operation that takes a key both in a header and in a body field: which one the server reads is the author\'s to say', async () => {
    const spec = `openapi: 3.0.3
info: { title: Loyalty, version: '1' }
paths:
  /accounts/{id}/accumulate:
    post:
      operationId: accumulate
      parameters:
        - { name: id, in: path, required: true, schema: { type: string } }
        - { name: Idempotency-Key, in: header, required: true, schema: { type: string, maxLength: 64 } }
      requestBody:
        content:
          application/json:
            schema: { type: object, required: [idempotency_key], properties: { idempotency_key: { type: string, maxLength: 64 }, points: { type: integer } } }
      responses: { '200': { description: ok } }
`;
    writeFileSync(path.join(dir, 'both.yaml'), spec);
    const result = await run('both.yaml', '--write');
    assert.equal(result.code, 0, result.err);
    assert.match(result.out, /skipped POST .*accumulate.*: takes a key both in the header `Idempotency-Key` and in the body field `idempotency_key`: write the contract by hand for the one the server reads \(`key: \{ header: Idempotency-Key \}` or `key: \{ body: \/idempotency_key \}`\)/);
    assert.equal(read('both.yaml'), spec, 'nothing written');
  });

  it('skips a key in a text/xml body (EC2-style ClientToken): the guard reads a body key from JSON or form fields only', async () => {
    const spec = `openapi: 3.0.3
info: { title: Compute, version: '1' }
paths:
  /#Action=CreateNetworkInsightsPath:
    post:
      operationId: createPath
      requestBody:
        content:
          text/xml:
            schema:
              type: object
              required: [ClientToken]
              properties: { ClientToken: { type: string, maxLength: 64 }, Source: { type: string } }
      responses: { '200': { description: ok } }
`;
    writeFileSync(path.join(dir, 'xml.yaml'), spec);
    const result = await run('xml.yaml', '--write');
    assert.equal(result.code, 0, result.err);
    assert.match(result.out, /skipped POST .*createPath.*: takes its key in the body field `ClientToken` of a `text\/xml` body, and a guard reads a body key from a JSON body or a form's fields only/);
    assert.equal(read('xml.yaml'), spec, 'nothing written');
  });

  it('scaffolds a Swagger 2.0 form field as a body key, and says nothing of scope when the caller is it', async () => {
    const spec = `swagger: '2.0'
info: { title: Payments, version: '1' }
securityDefinitions: { apiKey: { type: apiKey, in: header, name: X-Api-Key } }
security: [ { apiKey: [] } ]
paths:
  /payments:
    post:
      operationId: pay
      consumes: [application/x-www-form-urlencoded]
      parameters:
        - { in: formData, name: amount, type: integer, required: true }
        - { in: formData, name: client_token, type: string, required: true, maxLength: 64 }
      responses: { '201': { description: created } }
`;
    writeFileSync(path.join(dir, 'form.yaml'), spec);
    const result = await run('form.yaml', '--write');
    assert.equal(result.code, 0, result.err);
    assert.match(result.out, /\(key body \/client_token\)/);
    assert.doesNotMatch(result.out, /no scope/);
    const contract = parse(read('form.yaml')).paths['/payments'].post['x-idempotency'];
    assert.deepEqual([contract.key, contract.scope], [{ body: '/client_token', required: true, maxLength: 64 }, ['principal']]);
    const rules = await lintRules('form.yaml');
    for (const rule of ['key-header-undeclared', 'key-unbounded', 'contract-invalid', 'contract-missing']) assert.ok(!rules.has(rule), `${rule} after init: ${[...rules].join(', ')}`);
  });

  it('turns contract-missing into a contract lint can check', async () => {
    writeFileSync(path.join(dir, 'api.yaml'), yamlSpec);
    const lint = async () => {
      const io = bufferIo(dir);
      await main(['lint', 'api.yaml', '--format', 'json'], io);
      return JSON.parse(io.out) as { findings: { ruleId: string; operations: string[] }[] };
    };
    const before = await lint();
    assert.ok(before.findings.some((f) => f.ruleId === 'contract-missing' && f.operations.includes('createPayout')));
    await run('api.yaml', '--write');
    const after = await lint();
    assert.ok(!after.findings.some((f) => f.ruleId === 'contract-missing' && f.operations.includes('createPayout')));
    assert.ok(!after.findings.some((f) => f.ruleId === 'contract-invalid'), 'the scaffold is a valid contract');
  });

  it('keeps a JSON spec’s indentation and line endings', async () => {
    const spec = JSON.stringify(parse(yamlSpec), null, 4).replace(/\n/g, '\r\n') + '\r\n';
    writeFileSync(path.join(dir, 'api.json'), spec);
    assert.equal((await run('api.json', '--write')).code, 0);
    const written = read('api.json');
    assert.ok(!/[^\r]\n/.test(written), 'CRLF kept everywhere');
    const value = JSON.parse(written);
    assert.equal(value.paths['/payouts'].post['x-idempotency'].key.header, 'Idempotency-Key');
    assert.match(written, /\r\n {16}"x-idempotency": \{\r\n {20}"key": \{\r\n {24}"header": "Idempotency-Key",/);
    // Everything else is byte-identical: drop the added member and the original comes back.
    const start = written.indexOf(',\r\n                "x-idempotency"');
    const end = written.indexOf('\r\n            }', start);
    assert.equal(written.slice(0, start) + written.slice(end), spec);
    const again = await run('api.json');
    assert.match(again.out, /\nnothing written to api\.json: 1 operation that takes an idempotency key was skipped/);
  });

  it('honours extra key header names from the config', async () => {
    const custom = yamlSpec.replace("- $ref: '#/components/parameters/IdemKey'", '- { name: X-Op-Token, in: header, required: true, schema: { type: string } }');
    writeFileSync(path.join(dir, 'api.yaml'), custom);
    const unknown = (await run('api.yaml')).out;
    assert.doesNotMatch(unknown, /X-Op-Token/);
    assert.match(unknown, /\nnothing written to api\.yaml: 1 operation that takes an idempotency key was skipped/, 'only the marked operation');
    writeFileSync(path.join(dir, '.idemkitrc.yaml'), 'keyHeaders: [X-Op-Token]\n');
    assert.match((await run('api.yaml')).out, /\(key header X-Op-Token\)/);
  });

  it('inserts after a block scalar and into a file without a final newline', async () => {
    const spec = [
      'openapi: 3.1.0',
      'info: { title: t, version: "1" }',
      'paths:',
      '  /a:',
      '    post:',
      '      parameters:',
      '        - { name: Idempotency-Key, in: header, schema: { type: string } }',
      '      responses:',
      "        '200': { description: ok }",
      '      description: |',
      '        Two lines',
      '        of text.',
      '  /b:',
      '    post:',
      '      parameters:',
      '        - { name: Idempotency-Key, in: header, schema: { type: string } }',
      "      responses: { '200': { description: ok } }",
    ].join('\n');
    const written = await initWrite(spec);
    const value = parse(written);
    assert.equal(value.paths['/a'].post.description, 'Two lines\nof text.\n');
    assert.equal(value.paths['/a'].post['x-idempotency'].key.required, false);
    assert.equal(value.paths['/b'].post['x-idempotency'].key.header, 'Idempotency-Key');
    assert.ok(written.startsWith(spec.split('  /b:')[0]!.replace(/of text\.\n$/, 'of text.\n')));
    assert.ok(written.includes("      responses: { '200': { description: ok } }\n      # Scaffolded"));
  });

  it('keeps minified JSON minified (Swagger 2.0)', async () => {
    const spec =
      '{"swagger":"2.0","info":{"title":"t","version":"1"},"paths":{"/a":{"post":{"parameters":[{"name":"Idempotency-Key","in":"header","type":"string","maxLength":80}],"responses":{"200":{"description":"ok"},"409":{"description":"busy"}}}}}}';
    writeFileSync(path.join(dir, 's.json'), spec);
    assert.equal((await run('s.json', '--write')).code, 0);
    const written = read('s.json');
    assert.ok(!written.includes('\n') && !written.includes(': '), written);
    const contract = JSON.parse(written).paths['/a'].post['x-idempotency'];
    assert.deepEqual(contract.key, { header: 'Idempotency-Key', required: false, maxLength: 80 });
    assert.deepEqual(contract.responses, { inProgress: { status: 409 }, abandoned: { status: 409 } });
    const start = written.indexOf(',"x-idempotency":');
    const end = start + ',"x-idempotency":'.length + JSON.stringify(contract).length;
    assert.equal(written.slice(0, start) + written.slice(end), spec);
  });

  it('reads a one-line object\'s style outside its strings: escaped JSON in a description leaves minified JSON minified', async () => {
    const sample = JSON.stringify(JSON.stringify({ amount: 1 }, null, 1).replace(/\n/g, ''));
    const spec = `{"openapi":"3.0.3","info":{"title":"t","version":"1"},"paths":{"/a":{"post":{"description":${sample},"parameters":[{"name":"Idempotency-Key","in":"header","schema":{"type":"string"}}],"responses":{"200":{"description":"ok"}}}}}}`;
    assert.match(spec, /\\": 1/, 'the description holds `": ` inside a string');
    writeFileSync(path.join(dir, 'm.json'), spec);
    assert.equal((await run('m.json', '--write')).code, 0);
    const written = read('m.json');
    assert.ok(written.includes(',"x-idempotency":{"key":{'), written);
    assert.ok(!written.includes(', "x-idempotency"'), written);
    // A one-line object written with spaces still gets them.
    writeFileSync(path.join(dir, 's.json'), spec.replace('"post":{"description":', '"post":{"description": '));
    assert.equal((await run('s.json', '--write')).code, 0);
    assert.ok(read('s.json').includes(', "x-idempotency": {"key":'), read('s.json'));
  });

  it('says what it skipped, not that no operation takes a key, when only hand-written contracts are left', async () => {
    const spec = [
      'openapi: 3.0.3',
      "info: { title: t, version: '1' }",
      'paths:',
      '  /pay:',
      '    post:',
      '      operationId: pay',
      '      parameters: [ { name: Idempotency-Key, in: header, required: true, schema: { type: string } } ]',
      "      responses: { '201': { description: ok } }",
      "  /flow: { post: { operationId: flowOp, parameters: [ { name: Idempotency-Key, in: header, required: true, schema: { type: string } } ], responses: { '201': { description: ok } } } }",
      '',
    ].join('\n');
    writeFileSync(path.join(dir, 'c.yaml'), spec);
    const first = await run('c.yaml', '--write');
    assert.equal(first.code, 0, first.err);
    assert.match(first.out, /\nc\.yaml:\d+:\d+: skipped POST \/flow \(flowOp\): is not a block mapping/);
    assert.match(first.out, /\nwrote 1 contract to c\.yaml; 1 operation skipped \(see above\) — write its x-idempotency by hand; next: idemkit lint c\.yaml\n$/);
    const second = await run('c.yaml', '--write');
    assert.equal(second.code, 0, second.err);
    assert.match(second.out, /^c\.yaml:\d+:\d+: skipped POST \/flow \(flowOp\): is not a block mapping/);
    assert.doesNotMatch(second.out, /no operation .* takes an idempotency key/);
    assert.match(second.out, /\nnothing written to c\.yaml: 1 operation that takes an idempotency key was skipped \(see above\) — write its x-idempotency by hand\n$/);
  });

  it('skips an operation with a broken $ref a contract would need, saying where, so --write never leaves an unloadable file', async () => {
    const spec = [
      "swagger: '2.0'",
      "info: { title: t, version: '1' }",
      'paths:',
      '  /payments:',
      '    post:',
      '      operationId: pay',
      '      parameters:',
      '        - { name: x-idempotency-key, in: header, required: true, type: string, maxLength: 64 }',
      "        - { name: body, in: body, required: true, schema: { $ref: '#/definitions/Missing' } }",
      "      responses: { '201': { description: ok } }",
      '  /refunds:',
      '    post:',
      '      operationId: refund',
      '      parameters:',
      '        - { name: x-idempotency-key, in: header, required: true, type: string, maxLength: 64 }',
      "      responses: { '201': { description: ok } }",
      '',
    ].join('\n');
    writeFileSync(path.join(dir, 'd.yaml'), spec);
    const result = await run('d.yaml', '--write');
    assert.equal(result.code, 0, result.err);
    assert.match(result.out, /\n\S+:\d+:\d+: skipped POST \/payments \(pay\): d\.yaml:9:61: \$ref '#\/definitions\/Missing' points at nothing.*so fix it first and run init again\n/);
    assert.match(result.out, /wrote 1 contract to d\.yaml/);
    const lint = bufferIo(dir);
    assert.notEqual(await main(['lint', 'd.yaml'], lint), 2, lint.err);
  });

  it("copies the key's documented bounds, maxLength and pattern, from a parameter schema behind a $ref", async () => {
    const spec = [
      'openapi: 3.0.3',
      "info: { title: t, version: '1' }",
      'paths:',
      '  /payments:',
      '    post:',
      '      operationId: pay',
      "      parameters: [ { name: x-idempotency-key, in: header, required: true, schema: { $ref: '#/components/schemas/Key' } } ]",
      "      responses: { '201': { description: ok } }",
      'components:',
      '  schemas:',
      "    Key: { type: string, maxLength: 40, pattern: '^(?!\\s)(.*)(\\S)$' }",
      '',
    ].join('\n');
    writeFileSync(path.join(dir, 'k.yaml'), spec);
    const result = await run('k.yaml', '--write');
    assert.equal(result.code, 0, result.err);
    const contract = parse(read('k.yaml')).paths['/payments'].post['x-idempotency'];
    assert.deepEqual(contract.key, { header: 'x-idempotency-key', required: true, maxLength: 40, pattern: '^(?!\\s)(.*)(\\S)$' });
    // Unanchored, an OpenAPI pattern matches anywhere in the key, `key.pattern` the whole key: it is not copied; nor is
    // one that can take exponential time (the guard would run it on every key; lint's contract-invalid refuses it).
    for (const unanchored of ['[A-Za-z0-9]', '^a|b$', '^([A-Za-z0-9]+-?)*$']) {
      writeFileSync(path.join(dir, 'k.yaml'), spec.replace("pattern: '^(?!\\s)(.*)(\\S)$'", () => `pattern: '${unanchored}'`));
      assert.equal((await run('k.yaml', '--write')).code, 0);
      assert.deepEqual(parse(read('k.yaml')).paths['/payments'].post['x-idempotency'].key, { header: 'x-idempotency-key', required: true, maxLength: 40 }, unanchored);
    }
    // Nor one whose backtracking grows as the square of a long bound, which lint refuses as generate does (the diff
    // review's: init wrote it, then lint called the contract invalid).
    writeFileSync(path.join(dir, 'k.yaml'), spec.replace("maxLength: 40, pattern: '^(?!\\s)(.*)(\\S)$'", () => "maxLength: 5000, pattern: '^[a-z0-9]+-?[a-z0-9]+$'"));
    assert.equal((await run('k.yaml', '--write')).code, 0);
    assert.deepEqual(parse(read('k.yaml')).paths['/payments'].post['x-idempotency'].key, { header: 'x-idempotency-key', required: true, maxLength: 5000 });
    assert.equal((await run('k.yaml', '--write')).code, 0);
  });

  it('writes the contract into the anchored operation when its alias comes first in method order', async () => {
    const spec = [
      'openapi: 3.0.3',
      "info: { title: t, version: '1' }",
      'paths:',
      '  /charges:',
      '    post: &create',
      '      operationId: createCharge',
      '      parameters: [ { name: Idempotency-Key, in: header, required: true, schema: { type: string, maxLength: 255 } } ]',
      "      responses: { '201': { description: ok } }",
      '    put: *create',
      '',
    ].join('\n');
    writeFileSync(path.join(dir, 'a.yaml'), spec);
    const result = await run('a.yaml', '--write');
    assert.equal(result.code, 0, result.err);
    assert.match(result.out, /\n\S+:\d+:\d+: skipped PUT \/charges \(createCharge\): is a YAML alias of POST \/charges \(createCharge\), so it shares the contract written there\n/);
    assert.match(result.out, /wrote 1 contract to a\.yaml; 1 YAML alias shares its operation's contract; next: idemkit lint a\.yaml\n$/);
    const paths = parse(read('a.yaml')).paths;
    assert.equal(paths['/charges'].post['x-idempotency'].key.header, 'Idempotency-Key');
  });

  it('says there is nothing to scaffold when no operation takes a key', async () => {
    writeFileSync(path.join(dir, 'plain.yaml'), "openapi: 3.0.3\ninfo: { title: t, version: '1' }\npaths:\n  /a:\n    post:\n      responses: { '201': { description: ok } }\n");
    const result = await run('plain.yaml');
    assert.deepEqual(result, { code: 0, out: 'nothing to scaffold in plain.yaml: no operation without x-idempotency takes an idempotency key\n', err: '' });
  });

  it('keeps a byte order mark where the user had one (JSON and YAML)', async () => {
    const json = `\uFEFF${JSON.stringify(parse(yamlSpec), null, 2)}\n`;
    writeFileSync(path.join(dir, 'bom.json'), json);
    const shown = await run('bom.json', '--write');
    assert.equal(shown.code, 0, shown.err);
    assert.match(shown.out, /^bom\.json:\d+:\d+ {2}POST \/payouts \(createPayout\)/);
    const bytes = readFileSync(path.join(dir, 'bom.json'));
    assert.deepEqual([...bytes.subarray(0, 3)], [0xef, 0xbb, 0xbf]);
    const written = bytes.toString('utf8');
    assert.equal(JSON.parse(written.slice(1)).paths['/payouts'].post['x-idempotency'].key.header, 'Idempotency-Key');
    // Nothing else changed: drop the added member and the original bytes come back.
    const start = written.indexOf(',\n        "x-idempotency"');
    const end = written.indexOf('\n      }', start);
    assert.equal(written.slice(0, start) + written.slice(end), json);

    writeFileSync(path.join(dir, 'bom.yaml'), `\uFEFF${yamlSpec}`);
    assert.equal((await run('bom.yaml', '--write')).code, 0);
    const yaml = read('bom.yaml');
    assert.ok(yaml.startsWith(`\uFEFF# Payments API`));
    assert.ok(parse(yaml.slice(1)).paths['/payouts'].post['x-idempotency']);
  });

  it('leaves a file with a lone CR line break untouched, saying on which line and why', async () => {
    for (const [name, spec, line] of [
      ['mac.yaml', yamlSpec.replace(/\n/g, '\r'), 1],
      ['stray.yaml', yamlSpec.replace('version: "1" }\n', 'version: "1" }\r'), 3],
    ] as const) {
      writeFileSync(path.join(dir, name), spec);
      const result = await run(name, '--write');
      assert.equal(result.code, 0, result.err);
      assert.equal(read(name), spec, 'nothing written');
      const reason = `line ${line} of the YAML ends with a lone CR (a classic Mac line break), which init does not edit around — save the file with LF or CRLF line breaks and run init again, or add x-idempotency by hand`;
      assert.ok(result.out.includes(`skipped POST /payouts (createPayout): ${reason}\n`), result.out);
      assert.doesNotMatch(result.out, /block mapping/, 'not the wrong reason');
    }
  });

  it('reports the line of every inserted block, in YAML and JSON', async () => {
    const operation = (n: number) => [
      `  /op${n}:`,
      '    post:',
      `      operationId: op${n}`,
      '      parameters:',
      '        - { name: Idempotency-Key, in: header, schema: { type: string } }',
      '      description: |',
      `        ${'text\n        '.repeat(n)}end`,
      "      responses: { '201': { description: ok } }",
    ];
    const spec = ['openapi: 3.0.3', "info: { title: t, version: '1' }", 'paths:', ...[1, 2, 3, 4].flatMap(operation), ''].join('\r\n');
    writeFileSync(path.join(dir, 'many.yaml'), spec);
    writeFileSync(path.join(dir, 'many.json'), JSON.stringify(parse(spec), null, 2));
    for (const [name, marker] of [['many.yaml', '# Scaffolded by'], ['many.json', '"x-idempotency": {']] as const) {
      const result = await run(name, '--write');
      assert.equal(result.code, 0, result.err);
      const lines = read(name).split('\n');
      const reported = [...result.out.matchAll(new RegExp(`^${name.replace('.', '\\.')}:(\\d+):\\d+ {2}POST \\/op(\\d) `, 'gm'))];
      assert.deepEqual(reported.map((match) => match[2]), ['1', '2', '3', '4'], name);
      for (const [, line] of reported) assert.ok(lines[Number(line) - 1]!.trimStart().startsWith(marker), `${name}:${line} is ${lines[Number(line) - 1]}`);
    }
  });

  it('scaffolds a document that lint reads with a warning (a key written twice outside any contract)', async () => {
    const spec = [
      'openapi: 3.0.3',
      "info: { title: t, version: '1' }",
      'paths:',
      '  /a:',
      '    post:',
      '      operationId: createA',
      '      parameters:',
      '        - { name: Idempotency-Key, in: header, required: true, schema: { type: string } }',
      '      responses:',
      "        '201':",
      '          description: created',
      '          description: made',
      '',
    ].join('\n');
    writeFileSync(path.join(dir, 'dup.yaml'), spec);
    const result = await run('dup.yaml', '--write');
    assert.equal(result.code, 0, result.err);
    assert.match(result.out, /\nwrote 1 contract to dup\.yaml; next: idemkit lint dup\.yaml\n$/);
    assert.ok(read('dup.yaml').startsWith(spec));
    assert.match(read('dup.yaml'), /\n {6}x-idempotency:\n {8}key:\n {10}header: Idempotency-Key\n/);
  });

  it('reads a spec given as a pipe once: its operations get contracts proposed, not "not a block mapping"', async function () {
    const fifo = path.join(dir, 'piped.yaml');
    execFileSync(requireBinary(this, 'mkfifo'), [fifo]);
    writeFileSync(path.join(dir, 'api.yaml'), yamlSpec);
    const writer = spawn('sh', ['-c', 'cat api.yaml > piped.yaml'], { cwd: dir, stdio: 'ignore' });
    const result = await run('piped.yaml');
    await new Promise((resolve) => writer.once('exit', resolve));
    assert.equal(result.code, 0, result.err);
    assert.match(result.out, /^piped\.yaml:8:5 {2}POST \/payouts \(createPayout\)/);
    assert.doesNotMatch(result.out, /not a block mapping/);
  });

  it('writes the contract into the path-item file where the operation is written', async () => {
    const entry = "swagger: '2.0'\ninfo: { title: t, version: '1' }\npaths:\n  /orders:\n    $ref: './paths/orders.yaml'\n";
    const pathItem = [
      '# orders, kept in their own file',
      'post:',
      '  operationId: createOrder',
      '  parameters:',
      '    - { in: header, name: Idempotency-Key, type: string, required: true, maxLength: 64 }',
      '  responses:',
      "    '201': { description: created }   # created",
      '',
    ].join('\n');
    mkdirSync(path.join(dir, 'paths'));
    writeFileSync(path.join(dir, 'swagger.yaml'), entry);
    writeFileSync(path.join(dir, 'paths', 'orders.yaml'), pathItem);

    const shown = await run('swagger.yaml');
    assert.equal(shown.code, 0, shown.err);
    assert.match(shown.out, /^paths\/orders\.yaml:2:1 {2}POST \/orders \(createOrder\) {2}\(key header Idempotency-Key\)\n\+ {3}# Scaffolded/);
    assert.doesNotMatch(shown.out, /another file|by hand/);
    assert.match(shown.out, /\n1 contract to add; nothing written — run again with --write to apply\n$/);
    assert.equal(read('paths/orders.yaml'), pathItem);

    const written = await run('swagger.yaml', '--write');
    assert.equal(written.code, 0, written.err);
    assert.match(written.out, /\nwrote 1 contract to paths\/orders\.yaml; next: idemkit lint swagger\.yaml\n$/);
    assert.equal(read('swagger.yaml'), entry);
    const text = read('paths/orders.yaml');
    assert.ok(text.startsWith(pathItem), 'the file as written, then the contract');
    assert.match(text.slice(pathItem.length), /^ {2}# Scaffolded by `idemkit init`.*\n {2}x-idempotency:\n {4}key:\n/);
    assert.deepEqual(parse(text).post['x-idempotency'].key, { header: 'Idempotency-Key', required: true, maxLength: 64 });

    const io = bufferIo(dir);
    await main(['lint', 'swagger.yaml', '--format', 'json'], io);
    const findings = (JSON.parse(io.out) as { findings: { ruleId: string }[] }).findings;
    assert.ok(!findings.some((finding) => finding.ruleId === 'contract-missing' || finding.ruleId === 'contract-invalid'), io.out);
    const again = await run('swagger.yaml', '--write');
    assert.equal(again.out, 'nothing to scaffold in swagger.yaml: no operation without x-idempotency takes an idempotency key\n');
  });

  it('writes through a symbolic link to a shared path-item file, keeps its mode, and leaves a read-only one alone', async () => {
    const entry = "swagger: '2.0'\ninfo: { title: t, version: '1' }\npaths:\n  /orders:\n    $ref: './paths/orders.yaml'\n";
    const pathItem = 'post:\n  operationId: createOrder\n  parameters:\n    - { in: header, name: Idempotency-Key, type: string, required: true, maxLength: 64 }\n  responses:\n    \'201\': { description: created }\n';
    mkdirSync(path.join(dir, 'paths'));
    mkdirSync(path.join(dir, 'common'));
    writeFileSync(path.join(dir, 'swagger.yaml'), entry);
    writeFileSync(path.join(dir, 'common', 'orders.yaml'), pathItem, { mode: 0o640 });
    chmodSync(path.join(dir, 'common', 'orders.yaml'), 0o640);
    symlinkSync('../common/orders.yaml', path.join(dir, 'paths', 'orders.yaml'));

    const written = await run('swagger.yaml', '--write');
    assert.equal(written.code, 0, written.err);
    assert.ok(lstatSync(path.join(dir, 'paths', 'orders.yaml')).isSymbolicLink(), 'the link stays a link');
    assert.match(read('common/orders.yaml'), /\n {2}x-idempotency:\n/);
    assert.equal(statSync(path.join(dir, 'common', 'orders.yaml')).mode & 0o777, 0o640);

    writeFileSync(path.join(dir, 'common', 'orders.yaml'), pathItem);
    chmodSync(path.join(dir, 'common', 'orders.yaml'), 0o444);
    const refused = await run('swagger.yaml', '--write');
    assert.equal(refused.code, 2);
    assert.match(refused.err, /cannot write paths\/orders\.yaml: the file is read-only — make it writable \(chmod u\+w\) if it should change/);
    assert.equal(read('common/orders.yaml'), pathItem);
  });

  it('does not ask for a contract by hand for a safe method it says needs none', async () => {
    const spec = [
      "swagger: '2.0'",
      "info: { title: t, version: '1' }",
      'paths:',
      '  /orders:',
      '    parameters:',
      '      - { in: header, name: Idempotency-Key, type: string, required: true, maxLength: 64 }',
      '    get:',
      '      operationId: listOrders',
      "      responses: { '200': { description: ok } }",
      '',
    ].join('\n');
    writeFileSync(path.join(dir, 'get.yaml'), spec);
    const only = await run('get.yaml', '--write');
    assert.deepEqual(only, {
      code: 0,
      out:
        "get.yaml:7:5: skipped GET /orders (listOrders): is a GET, which HTTP defines as safe (a repeat has no effect to guard), so it gets no contract; if this API's GET does act, write the contract by hand\n\n" +
        'nothing to scaffold in get.yaml: 1 operation that takes an idempotency key is a safe method and needs no contract (see above)\n',
      err: '',
    });
    assert.equal(read('get.yaml'), spec);

    // Beside a contract it writes, and beside one to write by hand, each is counted for what it is.
    const mixed = yamlSpec.replace("    get:\n      operationId: listPayouts\n", "    get:\n      operationId: listPayouts\n      parameters:\n        - $ref: '#/components/parameters/IdemKey'\n");
    writeFileSync(path.join(dir, 'mixed.yaml'), mixed);
    assert.match((await run('mixed.yaml')).out, /\n1 contract to add; 1 operation skipped \(see above\) — write its x-idempotency by hand; 1 safe operation needs no contract; nothing written — run again with --write to apply\n$/);
  });

  it('names a spec it cannot read relative to the working directory, as lint does', async () => {
    mkdirSync(path.join(dir, 'api'));
    writeFileSync(path.join(dir, 'api', 'broken.yaml'), "swagger: '2.0'\ninfo: {title: t, version: '1'\npaths: {}\n");
    const io = bufferIo(dir);
    assert.equal(await main(['lint', 'api/broken.yaml'], io), 2);
    const expected = /^api\/broken\.yaml:3:1: invalid YAML: /;
    assert.match(io.err, expected);
    for (const spec of ['api/broken.yaml', path.join(dir, 'api', 'broken.yaml')]) {
      const result = await run(spec);
      assert.equal(result.code, 2);
      assert.match(result.err, expected);
      assert.equal(result.err.split('\n').length, 2, result.err);
    }
  });

  it('finds operations behind quoted keys, anchors, tags and stray comments, and leaves aliases and flow mappings alone', async () => {
    const key = '        - { name: Idempotency-Key, in: header, schema: { type: string } }';
    const spec = [
      'openapi: 3.0.3',
      "info: { title: t, version: '1' }",
      'x-templates:',
      '  base: &base',
      "    parameters: [ { name: Idempotency-Key, in: header, schema: { type: string } } ]",
      "    responses: { '200': { description: ok } }",
      'paths:',
      "  '/quoted':",
      '    "post":',
      '      parameters:',
      key,
      '# a column-0 comment inside the mapping',
      '      responses:',
      "        '200':",
      '          description: |+',
      '            kept',
      '',
      '      x-tail: [a,',
      '        b]',
      '  /merged:',
      '    post:',
      '      <<: *base',
      '      operationId: merged',
      '  /aliased: &item',
      '    put:',
      '      parameters:',
      key,
      "      responses: { '200': { description: ok } }",
      '  /alias: *item',
      "  /flow: { post: { parameters: [ { name: Idempotency-Key, in: header, schema: { type: string } } ], responses: { '200': { description: ok } } } }",
      '  /tagged:',
      '    delete: !!map',
      '      parameters:',
      key,
      "      responses: { '200': { description: ok } }   # trailing",
      '    # a comment after the operation',
      '',
    ].join('\n');
    writeFileSync(path.join(dir, 'shapes.yaml'), spec);
    const result = await run('shapes.yaml', '--write');
    assert.equal(result.code, 0, result.err);
    assert.deepEqual(
      [...result.out.matchAll(/^(shapes\.yaml:\d+:\d+ {2}\S+ \S+|shapes\.yaml:\d+:\d+: skipped [^:]+)/gm)].map((match) => match[1]),
      ['shapes.yaml:20:7  POST /quoted', 'shapes.yaml:32:7  POST /merged', 'shapes.yaml:45:7  PUT /aliased', 'shapes.yaml:60:7  DELETE /tagged', 'shapes.yaml:41:5: skipped PUT /alias', 'shapes.yaml:54:12: skipped POST /flow'],
    );
    // Each position is where the operation is in the file as written: the alias's is the anchored operation it is
    // (/aliased's `put:`, whose contract starts at 45:7), the flow mapping's its `post`.
    const written = read('shapes.yaml').split('\n');
    assert.equal(written[40], '    put:');
    assert.equal(written[44]!.slice(6, 20), '# Scaffolded b');
    assert.equal(written[53]!.slice(11, 16), 'post:');
    assert.equal(written[19]!.slice(6, 20), '# Scaffolded b');
    // The alias is the anchored operation itself: it shares the contract, and nobody is asked to write one by hand.
    assert.match(result.out, /\nshapes\.yaml:\d+:\d+: skipped PUT \/alias[^:]*: is a YAML alias of PUT \/aliased[^,]*, so it shares the contract written there\n/);
    const block = (indent: string) =>
      [
        '# Scaffolded by `idemkit init`: `idemkit lint` lists what is still open (scope, effect owner, retry budget, unknown outcome, replay, a documented response for missingKey 400, invalidKey 400, mismatch 422, inProgress 409, abandoned 409, storeUnavailable 503).',
        'x-idempotency:',
        '  key:',
        '    header: Idempotency-Key',
        '    required: false',
        '  fingerprint: { include: all }',
        '  ttl: P1D',
        '  lease: PT30S',
      ].map((line) => indent + line);
    const lines = spec.split('\n');
    const after = (marker: string) => lines.indexOf(marker) + 1;
    const expected = [
      ...lines.slice(0, after('        b]')),
      ...block('      '),
      ...lines.slice(after('        b]'), after('      operationId: merged')),
      ...block('      '),
      ...lines.slice(after('      operationId: merged'), after('  /alias: *item') - 1),
      ...block('      '),
      ...lines.slice(after('  /alias: *item') - 1, -2),
      ...block('      '),
      ...lines.slice(-2),
    ];
    assert.equal(read('shapes.yaml'), expected.join('\n'));
  });

  it('says a column for each contract in a one-line JSON file, and for a skipped operation where it is once written', async () => {
    const op = (id: string, method = 'post') =>
      `{"${method}":{"operationId":"${id}","parameters":[{"name":"Idempotency-Key","in":"header","required":true,"schema":{"type":"string","maxLength":64}}],"responses":{"201":{"description":"ok"}}}}`;
    const spec = `{"openapi":"3.0.3","info":{"title":"t","version":"1"},"paths":{"/a":${op('createA')},"/b":${op('listB', 'get')},"/c":${op('createC')}}}`;
    writeFileSync(path.join(dir, 'min.json'), spec);
    const result = await run('min.json', '--write');
    assert.equal(result.code, 0, result.err);
    const reported = [...result.out.matchAll(/^min\.json:(\d+):(\d+)(?: {2}POST|: skipped GET)/gm)].map((match) => [Number(match[1]), Number(match[2])] as const);
    assert.equal(reported.length, 3, result.out);
    const written = read('min.json');
    assert.ok(!written.trimEnd().includes('\n'), 'still one line');
    const [a, c, b] = reported as unknown as [readonly [number, number], readonly [number, number], readonly [number, number]];
    assert.deepEqual([a[0], b[0], c[0]], [1, 1, 1]);
    assert.ok(a[1] < b[1] && b[1] < c[1], result.out);
    assert.ok(written.startsWith('"x-idempotency"', a[1] - 1), written.slice(a[1] - 1, a[1] + 20));
    assert.ok(written.startsWith('"x-idempotency"', c[1] - 1), written.slice(c[1] - 1, c[1] + 20));
    assert.ok(written.startsWith('"get"', b[1] - 1), written.slice(b[1] - 1, b[1] + 20));
  });

  it('exits 2 on a missing spec', async () => {
    const result = await run('nope.yaml');
    assert.equal(result.code, 2);
    assert.match(result.err, /nope\.yaml/);
  });
});
