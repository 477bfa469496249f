/**
 * The HTTP names the guard and the generated client agree on, beyond the contract itself. Copied into users'
 * generated output (server and client): it imports nothing.
 */

/**
 * The header every guard answer names its problem in (`idempotency-key-reused`, …), whatever its body: clients
 * tell states that share a status apart by it, also when `renderProblem` writes the body in the API's format.
 */
export const PROBLEM_HEADER = 'idempotency-problem';

/** Base of every problem type URI idemkit answers with. */
export const PROBLEM_BASE = 'https://idemkit.dev/problems/';

/**
 * Whether a key header is OASIS Repeatable Requests' `Repeatability-Request-ID` (Azure SDKs send it): its
 * requests also say when they were first sent (`Repeatability-First-Sent`), and answers say
 * `Repeatability-Result`.
 */
export function isRepeatableRequestsKey(header: string): boolean {
  return header.toLowerCase() === 'repeatability-request-id';
}

/**
 * Headers that name the result a success answer created (lower case): `Location`, `Content-Location` (RFC 9110),
 * and where Azure's long-running operations name theirs, `Operation-Location` and `Azure-AsyncOperation`.
 */
export const RESULT_HEADERS: readonly string[] = ['location', 'content-location', 'operation-location', 'azure-asyncoperation'];

/**
 * The headers a guard records and replays when `replayHeaders` is not given: what identifies and describes the
 * result, and what its status requires beside it (RFC 9110: `Content-Range` on a 206 or 416, `WWW-Authenticate` on
 * a 401, `Allow` on a 405) or says about keeping it (`Cache-Control`). A contract's replay header cannot be one of
 * them: the flag would overwrite the handler's value.
 */
export const DEFAULT_REPLAY_HEADERS: readonly string[] = [
  'content-type', 'content-language', 'content-disposition', ...RESULT_HEADERS, 'etag', 'last-modified',
  'content-range', 'www-authenticate', 'allow', 'cache-control',
];
