import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { Ajv } from 'ajv';
import addFormatsModule from 'ajv-formats';
import { formatSarif, FINGERPRINT_KEY } from '../../../src/lint/formatters/sarif.js';
import { cwd, payout, payoutName, refund, refundName, report, rules, spec } from './fixture.js';

// ajv-formats is CommonJS; under NodeNext its default export arrives wrapped.
const addFormats = ((addFormatsModule as unknown as { default?: unknown }).default ?? addFormatsModule) as (ajv: Ajv) => Ajv;

const schema = JSON.parse(readFileSync(new URL('../../fixtures/sarif/sarif-schema-2.1.0.json', import.meta.url), 'utf8'));
const ajv = new Ajv({ allErrors: true, strict: false });
addFormats(ajv);
const validate = ajv.compile(schema);

function assertValid(log: unknown): void {
  const ok = validate(log);
  assert.ok(ok, `SARIF schema errors: ${JSON.stringify(validate.errors, null, 2)}`);
}

interface SarifResult {
  ruleId: string;
  ruleIndex: number;
  level: string;
  message: { text: string };
  locations: { physicalLocation: { artifactLocation: { uri: string; uriBaseId: string }; region: { startLine: number; startColumn: number } } }[];
  partialFingerprints: Record<string, string>;
  suppressions?: { kind: string; justification: string }[];
}

describe('sarif formatter', () => {
  it('is valid against the official SARIF 2.1.0 schema', () => {
    assertValid(JSON.parse(formatSarif(report())));
    assertValid(JSON.parse(formatSarif(report({ findings: [] }))));
  });

  it('is valid with the real rule catalogue and its help pages', () => {
    const { rules: _omit, ...rest } = report();
    const log = JSON.parse(formatSarif(rest));
    assertValid(log);
    for (const descriptor of log.runs[0].tool.driver.rules as { help: { text: string; markdown: string } }[]) {
      assert.ok(descriptor.help.markdown.length > 0);
    }
  });

  it('embeds rule help whose links all work away from the repository (no relative link a code-scanning page cannot follow)', () => {
    const { rules: _omit, ...rest } = report();
    const log = JSON.parse(formatSarif(rest));
    const broken: string[] = [];
    for (const descriptor of log.runs[0].tool.driver.rules as { id: string; help: { markdown: string } }[]) {
      for (const [, target] of descriptor.help.markdown.matchAll(/\]\(([^)\s]+)[^)]*\)/g)) {
        if (!/^(https?:|mailto:|#)/.test(target!)) broken.push(`${descriptor.id}: ${target}`);
      }
    }
    assert.deepEqual(broken, []);
  });

  it('catches a broken log (the schema check can fail)', () => {
    const log = JSON.parse(formatSarif(report()));
    log.runs[0].results[0].level = 'fatal';
    assert.equal(validate(log), false);
  });

  it('describes every rule and maps severities to levels', () => {
    const log = JSON.parse(formatSarif(report()));
    const driver = log.runs[0].tool.driver;
    assert.equal(driver.name, 'idemkit');
    assert.deepEqual(
      driver.rules.map((r: { id: string; defaultConfiguration: { level: string } }) => [r.id, r.defaultConfiguration.level]),
      rules.map((r) => [r.meta.id, { error: 'error', warn: 'warning', info: 'note' }[r.meta.severity]]),
    );
    assert.equal(driver.rules[0].shortDescription.text, 'scope-too-wide description');
    assert.match(driver.rules[0].help.text, /scope-too-wide/);
    const results = log.runs[0].results as SarifResult[];
    assert.deepEqual(
      results.map((r) => [r.ruleId, r.level, driver.rules[r.ruleIndex].id]),
      [
        ['effect-owner-missing', 'note', 'effect-owner-missing'],
        ['ttl-missing', 'warning', 'ttl-missing'],
        ['scope-too-wide', 'error', 'scope-too-wide'],
        ['contract-missing', 'error', 'contract-missing'],
      ],
    );
  });

  it('locates results relative to the working directory', () => {
    const log = JSON.parse(formatSarif(report()));
    const result = (log.runs[0].results as SarifResult[]).find((r) => r.ruleId === 'scope-too-wide')!;
    assert.deepEqual(result.locations[0]!.physicalLocation, {
      artifactLocation: { uri: 'api/open%20api.yaml', uriBaseId: '%SRCROOT%' },
      region: { startLine: 12, startColumn: 7 },
    });
    assert.equal(log.runs[0].originalUriBaseIds['%SRCROOT%'].uri, `file://${cwd}/`);
    assert.ok(result.message.text.endsWith(`[${payout}]`));
  });

  it('locates a file outside the working directory by its absolute file: URI, not ../ under %SRCROOT%', () => {
    const base = report();
    const outside = [path.join(path.dirname(cwd), 'shared dir', 'contracts.yaml'), '/dev/stdin'];
    const log = JSON.parse(formatSarif({ ...base, findings: outside.map((file) => ({ ...base.findings[2]!, file })) }));
    assertValid(log);
    assert.deepEqual(
      (log.runs[0].results as SarifResult[]).map((r) => r.locations[0]!.physicalLocation.artifactLocation).sort((a, b) => a.uri.localeCompare(b.uri)),
      outside.map((file) => ({ uri: pathToFileURL(file).href })).sort((a, b) => a.uri.localeCompare(b.uri)),
    );
  });

  it('names the operations in the message, in properties and as logical locations', () => {
    const base = report();
    const shared = { ...base.findings[0]!, operations: [payoutName, refundName], operationLabels: [payout, refund] };
    const log = JSON.parse(formatSarif({ ...base, findings: [shared, base.findings[3]!] }));
    assertValid(log);
    const [scope, missing] = log.runs[0].results as (SarifResult & { properties: Record<string, unknown>; locations: { logicalLocations: unknown }[] })[];
    assert.ok(scope!.message.text.endsWith(`[${payout}; ${refund}]`));
    assert.deepEqual(scope!.properties.operations, [payoutName, refundName]);
    assert.deepEqual(scope!.properties.operationLabels, [payout, refund]);
    assert.deepEqual(scope!.locations[0]!.logicalLocations, [
      { name: payoutName, fullyQualifiedName: payout, kind: 'function' },
      { name: refundName, fullyQualifiedName: refund, kind: 'function' },
    ]);
    // `POST /refunds takes …` already says which operation; the label stays in properties.
    assert.equal(missing!.message.text, 'POST /refunds takes Idempotency-Key but has no x-idempotency.');
    assert.deepEqual(missing!.properties.operationLabels, [refund]);
  });

  it('keeps a fingerprint whatever the order of the operations and their labels', () => {
    const base = report();
    const forward = { ...base.findings[0]!, operations: [payoutName, refundName], operationLabels: [payout, refund] };
    const reversed = { ...forward, operations: [refundName, payoutName], operationLabels: [refund, payout] };
    const print = (finding: typeof forward) => (JSON.parse(formatSarif({ ...base, findings: [finding] })).runs[0].results[0] as SarifResult).partialFingerprints[FINGERPRINT_KEY];
    assert.equal(print(reversed), print(forward));
    assert.equal(print({ ...forward, operationLabels: ['x', 'y'] }), print(forward));
    assert.notEqual(print({ ...forward, operations: [payoutName] }), print(forward));
  });

  it('keeps fingerprints stable when lines move, and distinct per finding', () => {
    const before = JSON.parse(formatSarif(report())).runs[0].results as SarifResult[];
    const base = report();
    const moved = { ...base, findings: base.findings.map((f) => ({ ...f, line: f.line + 40, column: 1 })) };
    const after = JSON.parse(formatSarif(moved)).runs[0].results as SarifResult[];
    const prints = (results: SarifResult[]) => results.map((r) => `${r.ruleId}:${r.partialFingerprints[FINGERPRINT_KEY]}`).sort();
    assert.deepEqual(prints(after), prints(before));
    assert.equal(new Set(prints(before)).size, before.length);
  });

  it('gives findings that share an identity (one rule, one node, several states) distinct fingerprints, stable when lines move', () => {
    // Code scanning merges results with equal fingerprints into one alert: six missing states would show as one.
    const base = report();
    const ttl = base.findings[1]!;
    const twins = { ...base, findings: [ttl, { ...ttl, message: 'No ttl, again.' }, { ...ttl, message: 'No ttl, third.' }] };
    const moved = { ...twins, findings: twins.findings.map((f) => ({ ...f, line: f.line + 3 })) };
    const prints = (input: typeof twins) =>
      (JSON.parse(formatSarif(input)).runs[0].results as SarifResult[]).map((r) => r.partialFingerprints[FINGERPRINT_KEY]);
    const before = prints(twins);
    assert.equal(new Set(before).size, 3);
    assert.deepEqual(prints(moved), before);
    // One of them fixed: the others keep theirs (by rank, the third took the second's, and its alert's state).
    const fixed = prints({ ...twins, findings: [twins.findings[0]!, twins.findings[2]!] });
    assert.deepEqual(fixed, [before[0], before[2]]);
    // A lone finding has the plain identity; two equal ones still get two fingerprints.
    assert.ok(!prints({ ...base, findings: [ttl] })[0]!.includes(':'));
    assert.equal(new Set(prints({ ...base, findings: [ttl, ttl] })).size, 2);
  });

  it('marks suppressed findings as in-source suppressions with their reason', () => {
    const results = JSON.parse(formatSarif(report())).runs[0].results as SarifResult[];
    const suppressed = results.filter((r) => r.suppressions);
    assert.deepEqual(suppressed.map((r) => [r.ruleId, r.suppressions]), [['effect-owner-missing', [{ kind: 'inSource', justification: 'owned by the ledger team' }]]]);
  });

  it('puts spec paths with odd characters into valid URIs', () => {
    const base = report();
    const odd = { ...base, findings: base.findings.map((f) => ({ ...f, file: `${cwd}/specs/#v1 [draft]/ä%.yaml` })) };
    const log = JSON.parse(formatSarif(odd));
    assertValid(log);
    assert.equal(log.runs[0].results[0].locations[0].physicalLocation.artifactLocation.uri, 'specs/%23v1%20%5Bdraft%5D/%C3%A4%25.yaml');
    assert.ok(spec.startsWith(cwd));
  });
});
