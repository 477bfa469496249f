/** ISO 8601 durations (`P1D`, `PT30S`, `PT0.2S`, `P1DT12H`, `P2W`) to milliseconds. */

const DURATION =
  /^P(?!$)(?:(\d+(?:[.,]\d+)?)Y)?(?:(\d+(?:[.,]\d+)?)M)?(?:(\d+(?:[.,]\d+)?)W)?(?:(\d+(?:[.,]\d+)?)D)?(?:T(?=\d)(?:(\d+(?:[.,]\d+)?)H)?(?:(\d+(?:[.,]\d+)?)M)?(?:(\d+(?:[.,]\d+)?)S)?)?$/;

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;
// Calendar units have no fixed length; retention windows use the conventional 365-day year and 30-day month.
const UNITS = [365 * DAY, 30 * DAY, 7 * DAY, DAY, HOUR, MINUTE, SECOND];

/** Milliseconds of an ISO 8601 duration string, or `undefined` when it does not parse. */
export function parseDuration(value: unknown): number | undefined {
  if (typeof value !== 'string') return undefined;
  // Documents repeat a few durations (`P1D`, `PT30S`) in every contract.
  if (known.has(value)) return known.get(value);
  const ms = parse(value);
  if (known.size < 1_000) known.set(value, ms);
  return ms;
}

const known = new Map<string, number | undefined>();

function parse(value: string): number | undefined {
  const match = DURATION.exec(value.trim().toUpperCase());
  if (!match) return undefined;
  let total = 0;
  for (let i = 0; i < UNITS.length; i++) {
    const part = match[i + 1];
    if (part !== undefined) total += Number(part.replace(',', '.')) * UNITS[i]!;
  }
  return Math.round(total);
}
