/** Option helpers shared by the command builders. */
import { UsageError } from '../errors.js';

/**
 * A yargs `coerce` for options that name a file: an empty value (`-o ''`) would otherwise resolve to the
 * working directory and fail far from its cause.
 */
export function nonEmpty(flag: string): (value: unknown) => unknown {
  return (value) => {
    if (typeof value === 'string' && value.trim() === '') throw new UsageError(`${flag} needs a value`);
    return value;
  };
}
