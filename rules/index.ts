/** The explicit rule registry: every rule idemkit ships, in catalogue order. */
import type { Rule } from '../src/lint/rule.js';

export const rules: readonly Rule[] = [];
