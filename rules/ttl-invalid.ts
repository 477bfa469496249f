import { defineRule } from '../src/lint/rule.js';
import { activeContract, schemaFlagged } from '../src/lint/views.js';

/** A retention that does not parse as a positive ISO 8601 duration. */
export default defineRule({
  meta: {
    id: 'ttl-invalid',
    severity: 'error',
    description: '`ttl` is zero, or not an ISO 8601 duration the schema check missed.',
    criterion: 'replay',
    rationale: 'The replay window is part of the contract; a retention nobody can parse is no retention at all.',
    messages: {
      unparsable: '`ttl: {value}` is not an ISO 8601 duration: write e.g. `P1D`, `PT24H` or `PT15M`',
      notPositive: '`ttl: {value}` is zero: records would expire at once and every retry would run the effect again; use e.g. `P1D`',
    },
  },
  operations: 'contracted',
  check(ctx) {
    const contract = activeContract(ctx.contract);
    const ttl = contract?.ttl;
    if (!contract || !ttl) return;
    const value = typeof ttl.raw === 'string' ? ttl.raw : JSON.stringify(ttl.raw) ?? String(ttl.raw);
    if (ttl.ms === undefined) {
      // A malformed duration breaks the published schema; contract-invalid reports that one.
      if (!schemaFlagged(contract, contract.at('ttl'))) ctx.report('unparsable', contract.at('ttl'), { value });
    }
    else if (ttl.ms <= 0) ctx.report('notPositive', contract.at('ttl'), { value });
  },
});
