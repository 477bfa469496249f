import { defineRule } from '../src/lint/rule.js';
import { activeContract, formatDuration } from '../src/lint/views.js';

/** A lease longer than the retention. */
export default defineRule({
  meta: {
    id: 'lease-exceeds-ttl',
    severity: 'error',
    description: 'The `lease` is longer than the `ttl`: a record could expire while its owner still runs the effect.',
    criterion: 'owner',
    rationale:
      'Reservation must stay atomic for as long as the owner may run: if the record expires first, a retry reserves the key again and two processes run one effect.',
    messages: {
      exceeds:
        '`lease` {lease} is longer than `ttl` {ttl}: the record could expire while its owner still runs, and a retry would run the effect a second time; shorten the lease or raise `ttl` above it',
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
