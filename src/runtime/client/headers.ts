/**
 * Request headers as plain records, merged the way HTTP reads them: a name in any letter case is one header.
 * (A record holding `Content-Type` and `content-type` is sent by `fetch` as one header with both values joined,
 * `application/json, application/json`, which no server reads as JSON.)
 *
 * This file is copied into users' generated output: it imports nothing.
 */

/** The name `headers` holds `name` under, in whatever letter case, or `undefined`. */
export function headerName(headers: Readonly<Record<string, unknown>>, name: string): string | undefined {
  const lower = name.toLowerCase();
  return Object.keys(headers).find((given) => given.toLowerCase() === lower);
}

/** Sets `name` to `value` in `headers`, replacing a copy of it in any letter case. */
export function setHeader<V>(headers: Record<string, V>, name: string, value: V): void {
  const given = headerName(headers, name);
  if (given !== undefined) delete headers[given];
  headers[name] = value;
}

/** The headers of every layer in one record; a later layer's header replaces an earlier one of any letter case. */
export function mergeHeaders<V = string>(...layers: readonly (Readonly<Record<string, V>> | undefined)[]): Record<string, V> {
  const merged: Record<string, V> = {};
  for (const layer of layers) {
    for (const [name, value] of Object.entries(layer ?? {})) setHeader(merged, name, value);
  }
  return merged;
}
