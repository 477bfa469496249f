import assert from 'node:assert/strict';
import { escapeMarkdown, formatMarkdown, messageMarkdown } from '../../../src/lint/formatters/markdown.js';
import { fakeContract, withContract } from '../fake-document.js';
import { payout, refund, report } from './fixture.js';

describe('markdown formatter', () => {
  it('answers the five questions for each contracted operation, with ✔/✘', () => {
    const md = formatMarkdown(report());
    assert.match(md, /^## Idempotency readiness: 0 of 1 contracted operation ready/);
    assert.match(md, /### ✘ `POST \/payouts \(createPayout\)`/);
    assert.match(md, /\| ✘ \| Scope — which scope binds the attempts\? \| operation \+ `principal` \+ `header:X-Tenant-Id` — `scope-too-wide` \|/);
    assert.match(md, /\| ✔ \| Same payload — which payload counts as the same\? \| `\/amount`, `\/currency` \|/);
    // The owner finding is suppressed, so the answer stands.
    assert.match(md, /\| ✔ \| Effect owner — who owns the effect\? \| `payouts` \(external effect, provider key: `forward`\) \|/);
    assert.match(md, /\| ✘ \| Replay answer — what does a replay get\? \| the stored status and body, marked `Idempotent-Replayed` — `ttl-missing` \|/);
    assert.match(md, /\| ✔ \| Unknown outcome — what happens when no answer came\? \| read the status route `getPayout` after the `PT30S` deadline \|/);
  });

  it('names a rule once in a question\'s row, with its count when it has several findings there', () => {
    const base = report();
    const twice = base.findings.find((f) => f.ruleId === 'ttl-missing')!;
    const md = formatMarkdown({ ...base, findings: [...base.findings, { ...twice, line: 11 }, { ...twice, line: 12 }] });
    assert.match(md, /\| ✘ \| Replay answer — what does a replay get\? \| the stored status and body, marked `Idempotent-Replayed` — `ttl-missing` ×3 \|/);
  });

  it('says an effect whose reach is undeclared is generated as local, not that it is local', () => {
    // The article review's: the card said "(local effect)" for a contract that never said so, while its handler
    // called a provider and the client retried a 503.
    const base = report();
    const document = base.documents[0]!;
    const undecided = fakeContract(document.operations[0]!.at, { effect: { owner: 'payouts', external: undefined, providerKey: undefined, statusRoute: undefined } });
    const md = formatMarkdown({ ...base, findings: [], documents: [withContract(document, payout, undecided)] });
    assert.match(md, /\| Effect owner — who owns the effect\? \| `payouts` \(reach undeclared: generated as a local effect — say `external: true` if it leaves the service\) \|/);
    const local = fakeContract(document.operations[0]!.at, { effect: { owner: 'payouts', external: false, providerKey: undefined, statusRoute: undefined } });
    assert.match(formatMarkdown({ ...base, findings: [], documents: [withContract(document, payout, local)] }), /`payouts` \(local effect\)/);
  });

  it('lists findings under their card, escaped, and suppressed ones with the reason', () => {
    const md = formatMarkdown(report());
    assert.ok(md.includes('- ✘ **error** `scope-too-wide` `api/open api.yaml:12:7` Scope 100% global: keys, of \\<tenants\\> & "owners" collide across accounts \\| `x`'));
    assert.match(md, /- ~ \*\*info\*\* `effect-owner-missing` .* Owner\? _\(suppressed: owned by the ledger team\)_/);
  });

  it('lists findings of operations without a contract after the cards', () => {
    const md = formatMarkdown(report());
    const [, tail] = md.split('### Operations without a contract');
    assert.ok(tail, 'section present');
    assert.match(tail!, /`contract-missing` `api\/open api\.yaml:30:5` `POST \/refunds \(createRefund\)`: POST \/refunds takes Idempotency-Key/);
    assert.ok(!tail!.includes('scope-too-wide'));
    assert.ok(refund.length > 0);
  });

  it('names the other operations a card\'s shared finding is about, and the operations of a finding without a card', () => {
    const base = report();
    const shared = { ...base.findings[0]!, operations: ['createPayout', 'remoteOp'], operationLabels: ['POST /payouts (createPayout)', 'PUT /remote (remoteOp)'] };
    const md = formatMarkdown({ ...base, findings: [shared] });
    assert.match(md, /- ✘ \*\*error\*\* `scope-too-wide` `api\/open api\.yaml:12:7` also `PUT \/remote \(remoteOp\)`: Scope 100%/);
    const alone = { ...base.findings[3]!, operations: ['remoteOp'], operationLabels: ['PUT /remote (remoteOp)'] };
    const [, tail] = formatMarkdown({ ...base, findings: [alone] }).split('### Operations without a contract');
    assert.match(tail!, /`api\/open api\.yaml:30:5` `PUT \/remote \(remoteOp\)`: POST \/refunds takes/);
  });

  it('marks a fully answered operation without findings as ready, and unanswered questions as not answered', () => {
    const base = report();
    const document = base.documents[0]!;
    const ready = formatMarkdown({ ...base, findings: [], documents: [withContract(document, payout, fakeContract(document.operations[0]!.at))] });
    assert.match(ready, /^## Idempotency readiness: 1 of 1 contracted operation ready/);
    assert.match(ready, /### ✔ `POST \/payouts \(createPayout\)`/);
    assert.equal((ready.match(/\| ✔ \|/g) ?? []).length, 5);
    const bare = fakeContract(document.operations[0]!.at, { scope: undefined, fingerprint: undefined, effect: undefined, unknownOutcome: undefined });
    const empty = formatMarkdown({ ...base, findings: [], documents: [withContract(document, payout, bare)] });
    assert.equal((empty.match(/_not answered_/g) ?? []).length, 4);
  });

  it('mentions operations that opted out with x-idempotency: false', () => {
    const base = report();
    const document = base.documents[0]!;
    const off = fakeContract(document.operations[0]!.at, { enabled: false });
    const md = formatMarkdown({ ...base, findings: [], documents: [withContract(document, payout, off)] });
    assert.match(md, /\*\*Knowingly not idempotent\*\* .*`POST \/payouts \(createPayout\)`/);
  });

  it('keeps the code spans of messages and escapes the rest', () => {
    assert.equal(messageMarkdown('no `effect.owner`: add <b>*it*</b>'), 'no `effect.owner`: add \\<b\\>\\*it\\*\\</b\\>');
    assert.equal(messageMarkdown('odd ` tick <i>'), 'odd \\` tick \\<i\\>');
  });

  it('keeps every table row to its three cells when spec strings hold |, backticks and newlines', () => {
    const base = report();
    const document = base.documents[0]!;
    const hostile = fakeContract(document.operations[0]!.at, {
      scope: [{ kind: 'principal' }, { kind: 'header', name: 'X|Tenant' }],
      fingerprint: { include: ['/a|b', '/c`d'], exclude: ['/e\nf'] },
      ttl: { raw: 'P1D|x', ms: 86_400_000 },
      effect: { owner: 'pay|outs``x\r\ny', external: true, providerKey: 'forward', statusRoute: 'get|Payout`' },
    });
    const md = formatMarkdown({ ...base, findings: [], documents: [withContract(document, payout, hostile)] });
    const rows = md.split('\n').filter((line) => line.startsWith('| ✔') || line.startsWith('| ✘'));
    assert.equal(rows.length, 5, md);
    for (const row of rows) {
      // GFM splits cells on every pipe not escaped by a backslash, inside code spans too.
      assert.equal(row.split(/(?<!\\)\|/).length, 5, row);
    }
    assert.ok(rows[0]!.includes('operation + `principal` + `header:X\\|Tenant`'), rows[0]);
    assert.ok(rows[1]!.includes('`/a\\|b`, `` /c`d ``, except `/e f`'), rows[1]);
    assert.ok(rows[2]!.includes('``` pay\\|outs``x y ```'), rows[2]);
    assert.ok(rows[3]!.includes('kept for `P1D\\|x`'), rows[3]);
    assert.ok(rows[4]!.includes('read the status route `` get\\|Payout` ``'), rows[4]);
  });

  it('pings nobody and links nothing from spec text: @user, @org/team, e-mail addresses and bare URLs stay plain', () => {
    const base = report();
    const message = 'ask @octocat or @acme/payments-team (ops@acme.example), see https://evil.example/x, http://a.example and www.b.example';
    const md = formatMarkdown({ ...base, findings: base.findings.map((f) => (f.ruleId === 'scope-too-wide' ? { ...f, message } : f)) });
    const line = md.split('\n').find((l) => l.includes('scope-too-wide') && l.startsWith('- '))!;
    // GitHub mentions an @ followed by a name, and links a scheme followed by //, or www. (what a bot's comment would do).
    assert.doesNotMatch(line, /@[\w-]/);
    assert.doesNotMatch(line, /https?:\/\/|www\./i);
    // Still reads the same once the invisible joiners are gone.
    assert.ok(line.replace(/\u200d/g, '').endsWith(` ${message}`), line);
  });

  it('escapes Markdown that could break a table or inject HTML', () => {
    assert.equal(escapeMarkdown('a|b <img> *x* [l](u)\nnext'), 'a\\|b \\<img\\> \\*x\\* \\[l\\](u) next');
    // eslint-disable-next-line no-control-regex
    assert.ok(!/[\u0000-\u0008\u000b-\u001f\u007f]/.test(escapeMarkdown('op\u001b[2Jid\u0007')), 'no control character reaches the card');
  });
});
