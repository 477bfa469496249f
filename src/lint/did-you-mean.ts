/** Spelling suggestions for ids a user mistyped (rule ids in config, suppressions, `idemkit explain`). */

/** Levenshtein distance between two strings (small inputs: rule ids). */
export function editDistance(a: string, b: string): number {
  const previous = Array.from({ length: b.length + 1 }, (_, index) => index);
  for (let i = 1; i <= a.length; i += 1) {
    let diagonal = previous[0]!;
    previous[0] = i;
    for (let j = 1; j <= b.length; j += 1) {
      const above = previous[j]!;
      previous[j] = Math.min(above + 1, previous[j - 1]! + 1, diagonal + (a[i - 1] === b[j - 1] ? 0 : 1));
      diagonal = above;
    }
  }
  return previous[b.length]!;
}

/**
 * The closest candidate to `input`, or `undefined` when nothing is close enough to be a typo
 * (distance at most a third of the longer string, at least 2; or one contains the other).
 */
export function didYouMean(input: string, candidates: readonly string[]): string | undefined {
  const needle = input.toLowerCase();
  let best: string | undefined;
  let bestDistance = Infinity;
  for (const candidate of candidates) {
    const distance = editDistance(needle, candidate.toLowerCase());
    if (distance < bestDistance) {
      best = candidate;
      bestDistance = distance;
    }
  }
  if (best === undefined) return undefined;
  const limit = Math.max(2, Math.floor(Math.max(needle.length, best.length) / 3));
  if (bestDistance <= limit) return best;
  const contained = candidates.find((candidate) => needle.length >= 4 && candidate.includes(needle));
  return contained;
}

/** ` (did you mean "x"?)` or the empty string. */
export function suggestionSuffix(input: string, candidates: readonly string[]): string {
  const suggestion = didYouMean(input, candidates);
  return suggestion === undefined ? '' : ` (did you mean "${suggestion}"?)`;
}
