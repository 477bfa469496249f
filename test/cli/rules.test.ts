import assert from 'node:assert/strict';
import { main } from '../../src/cli/main.js';
import { rules as registry } from '../../rules/index.js';
import { bufferIo } from '../helpers/io.js';

describe('idemkit rules', () => {
  it('prints every rule as a table row: id, severity, criterion, description', async () => {
    const io = bufferIo();
    assert.equal(await main(['rules'], io), 0);
    const lines = io.out.split('\n');
    assert.match(lines[0]!, /^RULE\s+SEVERITY\s+CRITERION\s+DESCRIPTION$/);
    for (const rule of registry) {
      const row = lines.find((line) => line.startsWith(`${rule.meta.id} `));
      assert.ok(row, `no row for ${rule.meta.id}`);
      assert.match(row!, new RegExp(`^${rule.meta.id}\\s+${rule.meta.severity}\\s+${rule.meta.criterion}\\s+`));
      assert.ok(row!.endsWith(rule.meta.description));
    }
    assert.ok(lines.some((line) => line.startsWith('suppression-invalid ')), 'built-in rules are listed too');
    assert.equal(io.err, '');
  });

  it('prints JSON with --format json', async () => {
    const io = bufferIo();
    assert.equal(await main(['rules', '--format', 'json'], io), 0);
    const rows = JSON.parse(io.out) as { id: string; severity: string; criterion: string; description: string; documented: boolean }[];
    assert.deepEqual(
      rows.slice(0, registry.length).map((row) => row.id),
      registry.map((rule) => rule.meta.id),
    );
    const scope = rows.find((row) => row.id === 'scope-too-wide');
    assert.ok(scope);
    assert.equal(scope!.criterion, 'scope');
    assert.equal(scope!.documented, true);
    assert.ok(rows.every((row) => ['error', 'warn', 'info'].includes(row.severity)));
  });

  it('rejects an unknown format with exit 2', async () => {
    const io = bufferIo();
    assert.equal(await main(['rules', '--format', 'xml'], io), 2);
    assert.equal(io.err, '--format "xml" is not one of: table, json\n');
    assert.equal(io.out, '', 'the table is not printed');
  });
});
