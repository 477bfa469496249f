import contractInvalid from '../../rules/contract-invalid.js';
import { CONTRACT, payouts } from '../helpers/api-docs.js';
import { ruleTester } from '../helpers/rule-tester.js';

ruleTester.run(contractInvalid, {
  valid: [
    { name: 'the complete contract', document: payouts() },
    { name: 'x-idempotency: true with no defaults', document: payouts((t) => (t.paths['/payouts'].post['x-idempotency'] = true)) },
  ],
  invalid: [
    {
      name: 'an unknown field (a typo of ttl)',
      document: payouts((_t, c) => ((c.tll = c.ttl), delete c.ttl)),
      errors: [{ messageId: 'invalid', pointer: `${CONTRACT}/tll` }],
    },
    {
      name: 'a duration that is not ISO 8601, and a bad enum value',
      document: payouts((_t, c) => ((c.lease = '30s'), (c.retry.backoff.jitter = 'random'))),
      errors: [
        { messageId: 'invalid', pointer: `${CONTRACT}/lease`, message: /PT30S/ },
        { messageId: 'invalid', pointer: `${CONTRACT}/retry/backoff/jitter`, message: /full, equal, none/ },
      ],
    },
    {
      name: 'a wrong type in the document defaults is reported once, at the defaults',
      document: payouts((t, c) => {
        delete c.key.required;
        t['x-idempotency'] = { key: { required: 'yes' } };
        t.paths['/refunds'] = { post: { ...structuredClone(t.paths['/payouts'].post), operationId: 'createRefund' } };
      }),
      errors: [{ messageId: 'invalid', pointer: '/x-idempotency/key/required', operations: ['createPayout', 'createRefund'] }],
    },
    {
      name: "a replay header the guard sets itself: OASIS's Repeatability-Result (true/false there breaks Azure SDKs), or the key header",
      document: payouts((t, c) => {
        c.responses.replay.header = 'Repeatability-Result';
        const other = structuredClone(c);
        other.responses.replay.header = 'idempotency-key';
        t.paths['/refunds'] = { post: { ...structuredClone(t.paths['/payouts'].post), operationId: 'createRefund', 'x-idempotency': other } };
      }),
      errors: [
        { messageId: 'invalid', pointer: `${CONTRACT}/responses/replay/header`, message: /`Repeatability-Result` is OASIS Repeatable Requests' result header, which the guard sets to `accepted` or `rejected`/ },
        { messageId: 'invalid', pointer: '/paths/~1refunds/post/x-idempotency/responses/replay/header', message: /is the idempotency key header itself — name another header/ },
      ],
    },
    {
      name: "a replay header the guard replays from the handler's answer (Location): the flag would overwrite it",
      document: payouts((_t, c) => (c.responses.replay.header = 'Location')),
      errors: [{ messageId: 'invalid', pointer: `${CONTRACT}/responses/replay/header`, message: /`Location` is a header the guard records and replays with the handler's answer/ }],
    },
  ],
});
