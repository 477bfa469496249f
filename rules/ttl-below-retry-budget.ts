import { defineRule } from '../src/lint/rule.js';
import { activeContract, formatDuration } from '../src/lint/views.js';

/** A retention shorter than the client's retry budget plus the lease. */
export default defineRule({
  meta: {
    id: 'ttl-below-retry-budget',
    severity: 'error',
    description: '`ttl` is shorter than the retry deadline plus the lease (the margin for an attempt still running when the deadline ends).',
    criterion: 'replay',
    rationale:
      'TTL must cover the retry budget and intermediary delays: a retry that arrives after the record expired is treated as a new intent and runs the effect twice.',
    messages: {
      short:
        '`ttl` {ttl} is shorter than the retry budget {budget} plus the lease {lease} ({needed}): a retry inside the budget could find the record gone and run the effect twice; raise `ttl` to at least {needed}',
      shortOfBudget:
        '`ttl` {ttl} is shorter than the retry budget {budget} alone: a retry inside the budget could find the record gone and run the effect twice; raise `ttl` to at least {budget} plus the lease',
    },
  },
  operations: 'contracted',
  check(ctx) {
    const contract = activeContract(ctx.contract);
    const ttlMs = contract?.ttl?.ms;
    if (!contract || ttlMs === undefined || ttlMs <= 0) return;
    const retry = contract.retry;
    let budget = retry?.deadline?.ms;
    if (budget === undefined && retry?.maxAttempts !== undefined && retry.backoff?.max?.ms !== undefined) {
      // Without a deadline, the longest the attempts can be spread over is one maximal pause between each.
      budget = Math.max(0, retry.maxAttempts - 1) * retry.backoff.max.ms;
    }
    if (budget === undefined) return;
    const lease = contract.lease?.ms ?? 0;
    // A lease beyond the ttl is lease-exceeds-ttl's finding: here only the budget is weighed then, so a ttl short of
    // both is said in one run, not one fix at a time (the real-spec review's: three runs to see three findings).
    if (lease > ttlMs) {
      if (ttlMs < budget) ctx.report('shortOfBudget', contract.at('ttl'), { ttl: formatDuration(ttlMs), budget: formatDuration(budget) });
      return;
    }
    const needed = budget + lease;
    if (ttlMs < needed) {
      ctx.report('short', contract.at('ttl'), {
        ttl: formatDuration(ttlMs),
        budget: formatDuration(budget),
        lease: formatDuration(lease),
        needed: formatDuration(needed),
      });
    }
  },
});
