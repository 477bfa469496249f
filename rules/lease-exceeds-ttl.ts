import { defineRule } from '../src/lint/rule.js';
import { activeContract, formatDuration } from '../src/lint/views.js';

/** A lease longer than the retention. */
export default defineRule({
  meta: {
    id: 'lease-exceeds-ttl',
    severity: 'error',
    description: 'The `lease` is longer than the `ttl`: one attempt may hold the key past the window the contract promises its clients.',
    criterion: 'owner',
    rationale:
      'The ttl is the window clients are promised, the lease how long one attempt may hold the key: with the lease longer, a retry budget inside the ttl ends before a long-running owner can be declared abandoned, and a client that reuses the key after the ttl meets a request still in progress.',
    messages: {
      exceeds:
        '`lease` {lease} is longer than `ttl` {ttl}: one attempt may still hold the key after the window the ttl promises clients, whose retries then end unknown while it runs; shorten the lease or raise `ttl` above it',
    },
  },
  operations: 'contracted',
  check(ctx) {
    const contract = activeContract(ctx.contract);
    const lease = contract?.lease?.ms;
    const ttl = contract?.ttl?.ms;
    if (!contract || lease === undefined || ttl === undefined || ttl <= 0) return;
    if (lease > ttl) ctx.report('exceeds', contract.at('lease'), { lease: formatDuration(lease), ttl: formatDuration(ttl) });
  },
});
