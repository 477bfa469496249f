import effectOwnerMissing from '../../rules/effect-owner-missing.js';
import externalWithoutReconciliation from '../../rules/external-without-reconciliation.js';
import statusRouteUnresolved from '../../rules/status-route-unresolved.js';
import unknownOutcomeUndefined from '../../rules/unknown-outcome-undefined.js';
import { CONTRACT, payouts } from '../helpers/api-docs.js';
import { ruleTester } from '../helpers/rule-tester.js';

ruleTester.run(effectOwnerMissing, {
  valid: [
    { name: 'an owner', document: payouts() },
    { name: 'an owner from the defaults', document: payouts((t, c) => ((t['x-idempotency'] = { effect: { owner: 'ledger' } }), delete c.effect.owner)) },
  ],
  invalid: [
    { name: 'no effect block', document: payouts((_t, c) => delete c.effect), errors: [{ messageId: 'missing', pointer: CONTRACT }] },
    { name: 'an effect without an owner', document: payouts((_t, c) => delete c.effect.owner), errors: [{ messageId: 'missing', pointer: `${CONTRACT}/effect` }] },
    { name: 'a blank owner', document: payouts((_t, c) => (c.effect.owner = ' ')), errors: [{ messageId: 'missing', pointer: `${CONTRACT}/effect/owner` }] },
  ],
});

ruleTester.run(externalWithoutReconciliation, {
  valid: [
    { name: 'external, key forwarded to the provider', document: payouts() },
    { name: 'external, no provider key but a status route', document: payouts((_t, c) => (c.effect.providerKey = 'none')) },
    { name: 'a local effect needs neither', document: payouts((_t, c) => (c.effect = { owner: 'payouts', external: false })) },
  ],
  invalid: [
    {
      name: 'providerKey: none and no status route',
      document: payouts((_t, c) => ((c.effect.providerKey = 'none'), delete c.effect.statusRoute)),
      errors: [{ messageId: 'unreconcilable', pointer: `${CONTRACT}/effect/providerKey`, message: /`providerKey` is `none`/ }],
    },
    {
      name: 'no provider key given and no status route',
      document: payouts((_t, c) => (c.effect = { owner: 'payouts', external: true })),
      errors: [{ messageId: 'unreconcilable', pointer: `${CONTRACT}/effect/external`, message: /no `providerKey` is given/ }],
    },
  ],
});

ruleTester.run(statusRouteUnresolved, {
  valid: [
    { name: 'a GET by operationId', document: payouts() },
    { name: 'no status route to check', document: payouts((_t, c) => delete c.effect.statusRoute) },
  ],
  invalid: [
    {
      name: 'a misspelt operationId',
      document: payouts((_t, c) => (c.effect.statusRoute = 'getPayuot')),
      errors: [{ messageId: 'unknown', pointer: `${CONTRACT}/effect/statusRoute`, message: /did you mean `getPayout`/ }],
    },
    {
      name: 'an operationId that does not exist at all',
      document: payouts((_t, c) => (c.effect.statusRoute = 'readTheOutcome')),
      errors: [{ messageId: 'unknown', pointer: `${CONTRACT}/effect/statusRoute`, message: /no operationId of this document: / }],
    },
    {
      name: 'the route is the POST itself',
      document: payouts((_t, c) => (c.effect.statusRoute = 'createPayout')),
      errors: [{ messageId: 'notSafe', pointer: `${CONTRACT}/effect/statusRoute`, message: /POST \/payouts, not a safe GET/ }],
    },
  ],
});

ruleTester.run(unknownOutcomeUndefined, {
  valid: [
    { name: 'status-route with a route', document: payouts() },
    { name: 'a misspelt value is contract-invalid\'s finding only', document: payouts((_t, c) => (c.unknownOutcome = 'status-rout')) },
    { name: 'surface', document: payouts((_t, c) => ((c.unknownOutcome = 'surface'), delete c.effect.statusRoute)) },
  ],
  invalid: [
    { name: 'no unknownOutcome', document: payouts((_t, c) => delete c.unknownOutcome), errors: [{ messageId: 'missing', pointer: CONTRACT }] },
    {
      name: 'status-route without a route',
      document: payouts((_t, c) => delete c.effect.statusRoute),
      errors: [{ messageId: 'noStatusRoute', pointer: `${CONTRACT}/unknownOutcome` }],
    },
  ],
});
