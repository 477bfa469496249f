import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { main } from '../../src/cli/main.js';
import { bufferIo } from '../helpers/io.js';
import { assertBuilt, bin, runProcess } from './spawn.js';

const DEMO = path.resolve('test/fixtures/server/demo.yaml');

describe('cli generate', () => {
  let tmp: string;
  beforeEach(() => {
    tmp = mkdtempSync(path.join(os.tmpdir(), 'idemkit-cli-generate-'));
  });
  afterEach(() => rmSync(tmp, { recursive: true, force: true }));

  it('a file-size limit (ulimit -f) is the file system\'s refusal, exit 2 and nothing written — not an internal error to report', async function () {
    if (process.platform === 'win32') this.skip();
    assertBuilt();
    // The CLI review's: EFBIG was not among the errors it knew, so it said "internal error … please report it".
    const ran = await runProcess('bash', ['-c', `ulimit -f 2 && exec "${process.execPath}" "${bin}" generate server "${DEMO}" --framework express --store memory --out out`], { cwd: tmp });
    assert.equal(ran.code, 2, ran.stderr);
    assert.match(ran.stderr, /^cannot write --out out: a file would pass the size limit \(ulimit -f\) or the file system's largest file \(EFBIG/);
    assert.doesNotMatch(ran.stderr, /internal error/);
    assert.equal(readdirSync(tmp).filter((name) => !name.startsWith('.')).length, 0, readdirSync(tmp).join(', '));
  });

  it('generate client refuses the server\'s options (--framework, --store, --config) with exit 2 instead of ignoring them; generate server defaults to express + sqlite', async () => {
    writeFileSync(path.join(tmp, 'api.yaml'), readFileSync(DEMO, 'utf8'));
    for (const [extra, named] of [
      [['--config', 'nope.yaml'], /--config is an option of generate server only; leave it out for a client/],
      [['--framework', 'fastify', '--store', 'redis'], /--framework, --store are options of generate server only; leave them out for a client/],
    ] as const) {
      const io = bufferIo(tmp);
      assert.equal(await main(['generate', 'client', 'api.yaml', '--out', 'client', ...extra], io), 2, io.err);
      assert.match(io.err, named);
      assert.deepEqual(readdirSync(tmp), ['api.yaml'], 'nothing written');
    }
    const io = bufferIo(tmp);
    assert.equal(await main(['generate', 'server', 'api.yaml', '--out', 'server'], io), 0, io.err);
    assert.ok(readdirSync(path.join(tmp, 'server', 'runtime', 'adapters')).includes('express.ts'));
    assert.ok(readdirSync(path.join(tmp, 'server', 'runtime', 'stores')).includes('sqlite.ts'));
  });

  it('notes operationIds that make one name: adding or renaming one would move the names the app mounts and calls', async () => {
    // The deploy review's: adding `create-charge` (refunds) gave it guards.createCharge, and a USD charge was replayed
    // a EUR answer.
    const spec = readFileSync(DEMO, 'utf8').replace('operationId: createDemoRequest', 'operationId: create_demo_request');
    const twin = spec.replace(/^paths:\n/m, `paths:\n  /v1/twins:\n    post:\n      operationId: create-demo-request\n      x-idempotency: { key: { header: Idempotency-Key }, scope: [principal], ttl: P1D, lease: PT30S, effect: { owner: twins, external: false } }\n      parameters: [{ name: Idempotency-Key, in: header, required: true, schema: { type: string, maxLength: 255 } }]\n      responses: { '201': { description: created } }\n`);
    writeFileSync(path.join(tmp, 'api.yaml'), twin);
    for (const target of [['server', '--framework', 'express', '--store', 'memory'], ['client']]) {
      const io = bufferIo(tmp);
      assert.equal(await main(['generate', target[0]!, 'api.yaml', ...target.slice(1), '--out', `out-${target[0]}`], io), 0, io.err);
      assert.match(io.err, /note: "create-demo-request", "create_demo_request" all make the name createDemoRequest: they are numbered in operationId order \(createDemoRequest, createDemoRequest2, …\), so adding or renaming one of them gives its name to another operation/);
    }
  });

  it('notes each contract without an effect, which is generated as a local one; a declared effect gets no note', async () => {
    const spec = readFileSync(DEMO, 'utf8');
    // The demo declares both effects; take createDemoRequest's away.
    const local = spec.replace('        effect: { owner: demo-requests, external: false, statusRoute: getDemoRequest }\n', '        ttl: P1D\n');
    assert.notEqual(local, spec);
    writeFileSync(path.join(tmp, 'api.yaml'), local);
    for (const target of ['server', 'client']) {
      const io = bufferIo();
      assert.equal(await main(['generate', target, path.join(tmp, 'api.yaml'), '--out', path.join(tmp, target)], io), 0, io.err);
      const notes = io.err.split('\n').filter((line) => line.startsWith('note: '));
      assert.equal(notes.length, 1, io.err);
      assert.match(notes[0]!, /^note: POST \/v1\/demo-requests \(createDemoRequest\) does not say whether its effect leaves the service \(effect.external\), so it is generated as a local effect/);
      assert.match(notes[0]!, target === 'server' ? /a 503 from the handler releases its key/ : /the client repeats a 5xx or a lost answer with the same key/);
    }
    // A contract that lists its own transient statuses (no 503) and names an owner but not the reach: the note says what the guard does.
    writeFileSync(path.join(tmp, 'owned.yaml'), spec.replace('        effect: { owner: demo-requests, external: false, statusRoute: getDemoRequest }\n', '        effect: { owner: demo-requests }\n        transient: [429]\n'));
    const owned = bufferIo();
    assert.equal(await main(['generate', 'server', path.join(tmp, 'owned.yaml'), '--out', path.join(tmp, 'owned')], owned), 0, owned.err);
    assert.doesNotMatch(owned.err, /releases its key/);
    assert.match(owned.err, /createDemoRequest\) does not say whether its effect leaves the service .*another 5xx ends its lease at once/);
    const io = bufferIo();
    assert.equal(await main(['generate', 'server', DEMO, '--out', path.join(tmp, 'demo')], io), 0, io.err);
    assert.equal(io.err, '');
  });

  it('notes the operations whose key is optional: a request without one runs unguarded (server only)', async () => {
    const spec = readFileSync(DEMO, 'utf8');
    const optional = spec.replace('  key:\n    header: Idempotency-Key\n    required: true\n', '  key:\n    header: Idempotency-Key\n    required: false\n').replace(/(IdempotencyKey:\n\s+name: Idempotency-Key\n\s+in: header\n\s+)required: true/, '$1required: false');
    assert.notEqual(optional, spec);
    writeFileSync(path.join(tmp, 'optional.yaml'), optional);
    const io = bufferIo();
    assert.equal(await main(['generate', 'server', path.join(tmp, 'optional.yaml'), '--out', path.join(tmp, 'server')], io), 0, io.err);
    const notes = io.err.split('\n').filter((line) => line.startsWith('note: '));
    assert.deepEqual(notes, [
      'note: 2 operations take requests without a key (key.required: false): a request without a key runs unguarded, so a retry of it (an SDK retrying a 502 or a lost answer) runs the handler again; require the key where clients can send one (idemkit explain key-optional):',
    ]);
    assert.match(io.err, /:\n {2}POST \/v1\/demo-requests \(createDemoRequest\)\n {2}POST \/v1\/accounts\/\{accountId\}\/payments \(createPayment\)\n/);
    // The client sends a key on every attempt whatever the contract says: nothing to note there.
    const client = bufferIo();
    assert.equal(await main(['generate', 'client', path.join(tmp, 'optional.yaml'), '--out', path.join(tmp, 'client')], client), 0, client.err);
    assert.doesNotMatch(client.err, /without a key/);
  });

  it('notes the ttl, lease and retry budget a contract leaves out, with the defaults the code gets (lint errors that do not stop generate)', async () => {
    const spec = readFileSync(DEMO, 'utf8');
    const bare = spec.replace('  ttl: P1D\n  lease: PT5S\n', '').replace('  retry:\n    deadline: PT30S\n    maxAttempts: 4\n', '  retry:\n');
    assert.notEqual(bare, spec);
    writeFileSync(path.join(tmp, 'bare.yaml'), bare);
    const server = bufferIo();
    assert.equal(await main(['generate', 'server', path.join(tmp, 'bare.yaml'), '--out', path.join(tmp, 'server')], server), 0, server.err);
    assert.deepEqual(server.err.split('\n').filter((line) => line.startsWith('note: ')), [
      'note: POST /v1/demo-requests (createDemoRequest) leaves out how long a replay is kept and how long a crashed request holds its key: generated with ttl P1D, lease PT30S; write it in its x-idempotency',
      'note: POST /v1/accounts/{accountId}/payments (createPayment) leaves out how long a replay is kept: generated with ttl P1D; write it in its x-idempotency',
    ]);
    assert.match(readFileSync(path.join(tmp, 'server', 'contracts.ts'), 'utf8'), /"ttlMs": 86400000,\n\s+"leaseMs": 30000/);
    const client = bufferIo();
    assert.equal(await main(['generate', 'client', path.join(tmp, 'bare.yaml'), '--out', path.join(tmp, 'client')], client), 0, client.err);
    assert.deepEqual(client.err.split('\n').filter((line) => line.startsWith('note: ')), [
      "note: 2 operations leave out how long the client retries and how often it tries: generated with retry.deadline PT30S, retry.maxAttempts 4; write it in their x-idempotency (or once in the document's defaults):",
    ]);
    const demo = bufferIo();
    assert.equal(await main(['generate', 'client', DEMO, '--out', path.join(tmp, 'demo')], demo), 0, demo.err);
    assert.equal(demo.err, '');
  });

  it('says the local-effect note once for many contracts without an effect, listing their operations one per line', async () => {
    const op = (name: string) => `  /v1/${name}:
    post:
      operationId: ${name}
      parameters: [{ name: Idempotency-Key, in: header, required: true, schema: { type: string, maxLength: 64 } }]
      requestBody: { required: true, content: { application/json: { schema: { type: object } } } }
      responses: { '201': { description: created } }
      x-idempotency: { key: { header: Idempotency-Key, required: true, maxLength: 64 }, scope: [global], fingerprint: { include: all }, ttl: P1D, lease: PT30S, retry: { deadline: PT30S, maxAttempts: 4 } }
`;
    const spec = `openapi: 3.0.3\ninfo: { title: many, version: '1' }\npaths:\n${['createA', 'createB', 'createC'].map(op).join('')}`;
    writeFileSync(path.join(tmp, 'many.yaml'), spec);
    for (const target of ['server', 'client']) {
      const io = bufferIo();
      assert.equal(await main(['generate', target, path.join(tmp, 'many.yaml'), '--out', path.join(tmp, target)], io), 0, io.err);
      const lines = io.err.split('\n');
      const notes = lines.filter((line) => line.startsWith('note: '));
      assert.equal(notes.length, 1, io.err);
      assert.match(notes[0]!, /^note: 3 operations do not say whether their effect leaves the service \(effect.external\), so they are generated as local effects: /);
      assert.match(notes[0]!, target === 'server' ? /a 503 from the handler releases its key/ : /the client repeats a 5xx or a lost answer with the same key/);
      assert.match(notes[0]!, /write effect: \{owner: …, external: true, providerKey: forward\|derived\|none\} on its operation \(or once in the document's x-idempotency defaults\):$/);
      const listed = lines.slice(lines.indexOf(notes[0]!) + 1, lines.indexOf(notes[0]!) + 4);
      assert.deepEqual(listed, ['  POST /v1/createA (createA)', '  POST /v1/createB (createB)', '  POST /v1/createC (createC)']);
    }
  });

  it('warns, at file:line:column, of what lint reports about the document: a contracted path with a fragment, which no request carries', async () => {
    const spec = readFileSync(DEMO, 'utf8');
    const fragment = spec.replace('  /v1/demo-requests:\n', '  /v1/demo-requests#create:\n');
    assert.notEqual(fragment, spec);
    writeFileSync(path.join(tmp, 'fragment.yaml'), fragment);
    const line = fragment.split('\n').findIndex((text) => text.startsWith('  /v1/demo-requests#create:')) + 1;
    const io = bufferIo(tmp);
    assert.equal(await main(['generate', 'server', 'fragment.yaml', '--framework', 'fetch', '--store', 'memory', '--out', 'out'], io), 0, io.err);
    const warnings = io.err.split('\n').filter((text) => text.startsWith('warning: '));
    assert.equal(warnings.length, 1, io.err);
    assert.doesNotMatch(io.err, /^note: .*document-invalid/m, 'said once, as the warning it is');
    assert.match(warnings[0]!, new RegExp(`^warning: fragment\\.yaml:${line}:3: path '/v1/demo-requests#create' holds a fragment, which no request carries: generated guards match the route of '/v1/demo-requests' and generated clients call it`));
    // --check, as CI runs it, says it too.
    const check = bufferIo(tmp);
    assert.equal(await main(['generate', 'server', 'fragment.yaml', '--framework', 'fetch', '--store', 'memory', '--out', 'out', '--check'], check), 0, check.err);
    assert.deepEqual(check.err.split('\n').filter((text) => text.startsWith('warning: ')), warnings);
  });

  it('refuses (exit 2, nothing written) a server guard whose contract would replay across owners or run an effect twice; the lint config can accept the risk', async () => {
    const scope = path.resolve('samples/broken/scope.yaml');
    const io = bufferIo(tmp);
    assert.equal(await main(['generate', 'server', scope, '--framework', 'express', '--store', 'memory', '--out', 'out'], io), 2, io.err);
    assert.equal(io.out, '');
    assert.throws(() => readFileSync(path.join(tmp, 'out', 'guards.ts')), /ENOENT/, 'nothing is written');
    const errors = io.err.split('\n').filter((line) => line.startsWith('error: '));
    // Each at the line lint reports it, with its rule: the missing scope (a replay of one caller's answer to another).
    const text = readFileSync(scope, 'utf8').split('\n');
    const createTicket = text.findIndex((line) => line.includes('operationId: createTicket')) + 1;
    // Not scope-unresolvable: the guard answers 400 to a request without the part, it never widens the scope.
    assert.equal(errors.length, 2, io.err);
    assert.match(errors[0]!, /^error: .*samples\/broken\/scope\.yaml:(\d+):\d+: no key `scope`: .* \(scope-missing\)$/);
    assert.ok(Number(/:(\d+):/.exec(errors[0]!)![1]) > createTicket, 'points into the createTicket contract');
    assert.match(errors[1]!, /\(scope-too-wide\)$/);
    assert.match(io.err, /^refused: these contracts would make a guard that replays one caller's answer to another or runs an effect twice; .*Nothing was written\.$/m);

    const retention = bufferIo(tmp);
    assert.equal(await main(['generate', 'server', path.resolve('samples/broken/retention.yaml'), '--out', 'out2'], retention), 2, retention.err);
    assert.deepEqual(
      retention.err.split('\n').filter((line) => line.startsWith('error: ')).map((line) => /\(([a-z-]+)\)$/.exec(line)![1]),
      ['ttl-invalid', 'ttl-below-retry-budget', 'lease-exceeds-ttl'],
      'not ttl-missing or lease-missing: the guard keeps a day and leases 30 s',
    );
    // Without security there are no owners to keep apart: a contract without a scope is one key space, as `global` says.
    const open = readFileSync(DEMO, 'utf8').replace(/^security:.*\n(  - .*\n)*/m, '').replace(/^(\s+)scope: \[principal\]\n/gm, '');
    assert.doesNotMatch(open, /scope: \[principal\]|^security:/m);
    writeFileSync(path.join(tmp, 'open.yaml'), open);
    const unscoped = bufferIo(tmp);
    assert.equal(await main(['lint', 'open.yaml'], unscoped), 1);
    assert.match(unscoped.out, /scope-missing/);
    const openGenerated = bufferIo(tmp);
    assert.equal(await main(['generate', 'server', 'open.yaml', '--out', 'open'], openGenerated), 0, openGenerated.err);
    // Said, not silent: each such contract is a note at its line, with why the guard was made anyway.
    const openNotes = openGenerated.err.split('\n').filter((line) => line.includes('(scope-missing)'));
    assert.ok(openNotes.length > 0, openGenerated.err);
    for (const note of openNotes) assert.match(note, /^note: open\.yaml:\d+:\d+: .*\(scope-missing\); generated anyway: the operation names no security, so every caller shares its keys/);

    // A contract lint finds other errors in (undocumented state responses) is generated: those do not change the guard.
    const demo = readFileSync(DEMO, 'utf8').replace("        '422': { $ref: '#/components/responses/Problem' }\n", '');
    writeFileSync(path.join(tmp, 'demo.yaml'), demo);
    const linted = bufferIo(tmp);
    assert.equal(await main(['lint', 'demo.yaml'], linted), 1);
    assert.match(linted.out, /state-response-missing/);
    const generated = bufferIo(tmp);
    assert.equal(await main(['generate', 'server', 'demo.yaml', '--out', 'ok'], generated), 0, generated.err);

    // Turning the rules off (or down to warn) in the lint config is accepting the risk: generate follows it.
    writeFileSync(path.join(tmp, 'accept.yaml'), 'rules:\n  scope-missing: warn\n  scope-too-wide: off\n');
    const accepted = bufferIo(tmp);
    assert.equal(await main(['generate', 'server', scope, '--store', 'memory', '--out', 'out', '--config', 'accept.yaml'], accepted), 0, accepted.err);
    // The rule set to warn is accepted aloud; the one set to off is not reported at all.
    assert.match(accepted.err, /^note: .*samples\/broken\/scope\.yaml:\d+:\d+: no key `scope`: .*\(scope-missing\); generated anyway: the lint config sets scope-missing to warn$/m);
    assert.doesNotMatch(accepted.err, /scope-too-wide/);
    // A suppression on the operation is accepting it too, with its reason said.
    const suppressedSpec = readFileSync(scope, 'utf8').replace(
      '      operationId: createTicket\n',
      '      operationId: createTicket\n      x-idempotency-lint: { ignore: [scope-missing], reason: "one tenant; the batch service is the only caller" }\n',
    );
    assert.notEqual(suppressedSpec, readFileSync(scope, 'utf8'));
    writeFileSync(path.join(tmp, 'suppressed.yaml'), suppressedSpec);
    writeFileSync(path.join(tmp, 'wide-off.yaml'), 'rules:\n  scope-too-wide: off\n');
    const suppressed = bufferIo(tmp);
    assert.equal(await main(['generate', 'server', 'suppressed.yaml', '--store', 'memory', '--out', 'out3', '--config', 'wide-off.yaml'], suppressed), 0, suppressed.err);
    assert.match(suppressed.err, /^note: suppressed\.yaml:\d+:\d+: .*\(scope-missing\); generated anyway: suppressed on the operation \(one tenant; the batch service is the only caller\)$/m);
    assert.match(readFileSync(path.join(tmp, 'out', 'guards.ts'), 'utf8'), /createTicket/);
    // The client is generated anyway: it is made for an API as it is, often someone else's.
    assert.equal(await main(['generate', 'client', scope, '--out', 'client'], bufferIo(tmp)), 0);
  });

  it('writes server guards, then --check passes until a file drifts (exit 1)', async () => {
    const out = path.join(tmp, 'guards');
    const argv = ['generate', 'server', DEMO, '--framework', 'fastify', '--store', 'memory', '--out', out];
    let io = bufferIo();
    assert.equal(await main(argv, io), 0, io.err);
    assert.match(io.out, /wrote \d+ files/);
    const guards = readFileSync(path.join(out, 'guards.ts'), 'utf8');
    assert.match(guards, /^\/\/ generated by idemkit from ".*demo\.yaml"; do not edit\n/);
    assert.match(guards, /export function createDemoRequestGuard\(/);
    assert.match(readFileSync(path.join(out, 'runtime', 'stores', 'memory.ts'), 'utf8'), /generated by idemkit/);

    io = bufferIo();
    assert.equal(await main([...argv, '--check'], io), 0, io.err);
    assert.match(io.out, /up to date/);

    writeFileSync(path.join(out, 'guards.ts'), `${guards}// hand edit\n`);
    io = bufferIo();
    assert.equal(await main([...argv, '--check'], io), 1);
    assert.match(io.out, /changed .*guards\.ts/);
    assert.match(io.err, /is stale: 1 file/);

    io = bufferIo();
    assert.equal(await main(['generate', 'server', DEMO, '--framework', 'express', '--store', 'memory', '--out', out, '--check'], io), 1);
    assert.match(io.out, /adapters\/express\.ts/);
  });

  it('warns, over its previous output, of the edits that change what a retry crossing the deploy gets: record ids, fingerprint, key, a budget past the old ttl, a contract gone', async () => {
    // A rolling-deploy review's: adding a scope part (what scope-too-wide advises) ran the effect twice, and generate
    // said only "wrote 17 files".
    const demo = readFileSync(DEMO, 'utf8');
    writeFileSync(path.join(tmp, 'v1.yaml'), demo.replace('ttl: P1D', 'ttl: PT40S'));
    const first = bufferIo(tmp);
    assert.equal(await main(['generate', 'server', 'v1.yaml', '--out', 'gen'], first), 0, first.err);
    assert.doesNotMatch(first.err, /warning/, 'nothing to compare with the first time');
    const v2 = demo
      .replace('scope: [principal]', 'scope: [principal, "header:X-Tenant-Id"]')
      .replace('exclude: [/clientSentAt]', 'exclude: [/clientSentAt, /note]')
      .replace('maxLength: 80', 'maxLength: 64')
      .replace('deadline: PT30S', 'deadline: PT1M');
    writeFileSync(path.join(tmp, 'v2.yaml'), v2);
    const check = bufferIo(tmp);
    assert.equal(await main(['generate', 'server', 'v2.yaml', '--out', 'gen', '--check'], check), 1, check.err);
    const written = bufferIo(tmp);
    assert.equal(await main(['generate', 'server', 'v2.yaml', '--out', 'gen'], written), 0, written.err);
    for (const io of [check, written]) {
      assert.match(io.err, /^warning: createDemoRequest \(POST \/v1\/demo-requests\): scope .* finds no record and runs again \(a second effect\), and the status route answers 404 for it; deploy it when the operation is drained, or keep the previous version serving it for one TTL \(PT40S\)$/m);
      assert.match(io.err, /createDemoRequest .*fingerprint exclude \[\/clientSentAt\] → \[\/clientSentAt, \/note\]: .* answers 422 idempotency-key-reused/);
      assert.match(io.err, /createDemoRequest .*key maxLength 80 → 64: .* answers 400/);
      assert.match(io.err, /createDemoRequest .*the retry budget \(PT1M\) is longer than the previous ttl \(PT40S\)/);
    }
    const again = bufferIo(tmp);
    assert.equal(await main(['generate', 'server', 'v2.yaml', '--out', 'gen'], again), 0, again.err);
    assert.doesNotMatch(again.err, /warning/, 'regenerating the same contracts says nothing');
    // An operation that lost its contract, and an operationId renamed on the same route.
    const parts = v2.split('      x-idempotency:\n        effect: { owner: demo-requests, external: false, statusRoute: getDemoRequest }\n');
    assert.equal(parts.length, 2, 'the fixture has the contract this test removes');
    writeFileSync(path.join(tmp, 'v3.yaml'), parts.join('').replace('operationId: createPayment', 'operationId: placePayment'));
    const third = bufferIo(tmp);
    assert.equal(await main(['generate', 'server', 'v3.yaml', '--out', 'gen'], third), 0, third.err);
    assert.match(third.err, /^warning: createDemoRequest \(POST \/v1\/demo-requests\) has no contract any more: where it is still served, a retry of a request the previous version took runs unguarded, a second effect/m);
    assert.match(third.err, /^warning: createPayment \(POST [^)]*\): operationId createPayment → placePayment changes its record ids/m);
    // A contracts file that is not what generate wrote is no reason to fail: no notes.
    writeFileSync(path.join(tmp, 'gen', 'contracts.ts'), readFileSync(path.join(tmp, 'gen', 'contracts.ts'), 'utf8').replace(/"ttlMs": \d+/g, '"ttlMs": ONE_DAY'));
    const edited = bufferIo(tmp);
    assert.equal(await main(['generate', 'server', 'v1.yaml', '--out', 'gen', '--check'], edited), 1, edited.err);
    assert.doesNotMatch(edited.err, /warning/);
  });

  it('--check finds no drift when the spec or the output is named through a symlink', async () => {
    // A review's: the header named the spec by the path as typed, and all 18 files were "changed" when CI's shell kept a
    // symlinked $PWD that Node resolves.
    writeFileSync(path.join(tmp, 'api.yaml'), readFileSync(DEMO));
    symlinkSync(tmp, path.join(tmp, 'link'));
    const io = bufferIo(tmp);
    assert.equal(await main(['generate', 'client', 'api.yaml', '--out', 'out'], io), 0, io.err);
    for (const argv of [['link/api.yaml', '--out', 'out'], ['api.yaml', '--out', 'link/out'], ['link/api.yaml', '--out', path.join(tmp, 'link', 'out')]]) {
      const check = bufferIo(tmp);
      assert.equal(await main(['generate', 'client', ...argv, '--check'], check), 0, `${argv.join(' ')}: ${check.out}${check.err}`);
    }
  });

  it('--check on a directory that does not exist yet lists every file as missing and exits 1', async () => {
    const io = bufferIo();
    assert.equal(await main(['generate', 'server', DEMO, '--store', 'memory', '--out', path.join(tmp, 'never'), '--check'], io), 1);
    assert.match(io.out, /^missing .*contracts\.ts$/m);
    assert.match(io.err, /is stale/);
  });

  it('is deterministic: two runs give byte-identical files', async () => {
    const argv = (out: string) => ['generate', 'server', DEMO, '--framework', 'express', '--store', 'memory', '--out', out];
    assert.equal(await main(argv(path.join(tmp, 'a')), bufferIo()), 0);
    assert.equal(await main(argv(path.join(tmp, 'a')), bufferIo()), 0);
    assert.equal(await main(argv(path.join(tmp, 'b')), bufferIo()), 0);
    for (const file of ['contracts.ts', 'guards.ts', 'index.ts']) {
      assert.equal(readFileSync(path.join(tmp, 'a', file), 'utf8'), readFileSync(path.join(tmp, 'b', file), 'utf8'));
    }
  });

  it('exits 2 with one line for an unreadable spec, an invalid one, and one without contracts', async () => {
    const broken = path.join(tmp, 'broken.yaml');
    writeFileSync(broken, 'openapi: 3.1.0\npaths: [unclosed\n');
    const plain = path.join(tmp, 'plain.yaml');
    writeFileSync(plain, 'openapi: 3.1.0\ninfo: { title: t, version: "1" }\npaths:\n  /x:\n    post:\n      responses: { "200": { description: ok } }\n');
    for (const spec of [path.join(tmp, 'missing.yaml'), broken, plain]) {
      const io = bufferIo();
      assert.equal(await main(['generate', 'server', spec, '--out', path.join(tmp, 'out')], io), 2, spec);
      assert.equal(io.err.trim().split('\n').length, 1, io.err);
      assert.doesNotMatch(io.err, /\n\s+at /);
    }
    const io = bufferIo();
    assert.equal(await main(['generate', 'server', plain, '--out', path.join(tmp, 'out')], io), 2);
    assert.match(io.err, /no operation has an x-idempotency contract/);
  });

  it('names the spec relative to the working directory (as lint does), not to --out', async () => {
    writeFileSync(path.join(tmp, 'empty.yaml'), "swagger: '2.0'\ninfo: {title: t, version: '1'}\npaths: {}\n");
    writeFileSync(path.join(tmp, 'plain.yaml'), 'openapi: 3.1.0\ninfo: { title: t, version: "1" }\npaths:\n  /x:\n    post:\n      responses: { "200": { description: ok } }\n');
    writeFileSync(path.join(tmp, 'broken.yaml'), "swagger: '2.0'\ninfo: {title: t, version: '1'\npaths: {}\n");
    const cases: [string[], string | RegExp][] = [
      [['client', 'empty.yaml', '--out', 'sub/deep/client'], 'empty.yaml: the document has no operation, so there is no client to generate\n'],
      [['server', 'plain.yaml', '--out', 'sub/deep/guards'], 'plain.yaml: no operation has an x-idempotency contract, so there is no guard to generate\n'],
      [['client', path.join(tmp, 'broken.yaml'), '--out', 'sub/deep/client'], /^broken\.yaml:3:1: invalid YAML: [^\n]*\n$/],
      [['server', 'broken.yaml', '--out', 'out'], /^broken\.yaml:3:1: invalid YAML: [^\n]*\n$/],
    ];
    for (const [argv, expected] of cases) {
      const io = bufferIo(tmp);
      assert.equal(await main(['generate', ...argv], io), 2, argv.join(' '));
      if (typeof expected === 'string') assert.equal(io.err, expected);
      else assert.match(io.err, expected);
      assert.equal(io.out, '');
    }
  });

  it('exits 2 on an unknown framework or store', async () => {
    for (const flags of [['--framework', 'koa'], ['--store', 'mongo']]) {
      const io = bufferIo();
      assert.equal(await main(['generate', 'server', DEMO, ...flags, '--out', path.join(tmp, 'o')], io), 2);
      assert.match(io.err, /koa|mongo/);
      assert.equal(io.err.trim().split('\n').length, 1, io.err);
    }
  });

  it('refuses to overwrite a directory of hand-written files', async () => {
    const out = path.join(tmp, 'src');
    const { mkdirSync } = await import('node:fs');
    mkdirSync(out);
    writeFileSync(path.join(out, 'app.ts'), 'my code');
    const io = bufferIo();
    assert.equal(await main(['generate', 'server', DEMO, '--out', out], io), 2);
    assert.match(io.err, /did not generate \(app\.ts\)/);
    assert.equal(readFileSync(path.join(out, 'app.ts'), 'utf8'), 'my code');
  });

  it('generates the client through the same command', async () => {
    const out = path.join(tmp, 'client');
    const io = bufferIo();
    assert.equal(await main(['generate', 'client', DEMO, '--out', out], io), 0, io.err);
    assert.match(readFileSync(path.join(out, 'client.ts'), 'utf8'), /generated by idemkit/);
  });
});
