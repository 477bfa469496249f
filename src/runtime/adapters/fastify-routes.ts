/**
 * Which Fastify routes serve a contract's operation, for `idempotencyPlugin`. A contract path is relative to
 * the API's base path, so a route serves the operation when its URL (register prefixes included), or its URL
 * below the scope the plugin was registered in, is the contract path or the path under one of the API's base
 * paths. Nothing else: a route that merely ends with the path (`/admin/orders`, `/users/:id/orders` for `/orders`) is another
 * operation. Path parameters match by position, whatever their names; a trailing slash is ignored; letter
 * case counts as the router counts it.
 *
 * Imports only `../contract.js`; copied into users' generated code.
 */
import { routePath } from '../contract.js';

/** A route as Fastify's `onRoute` hook reports it. */
export interface RouteAddress {
  /** Its whole URL pattern, register prefixes included. */
  readonly url: string;
  /**
   * The register prefix of the scope the plugin was registered in (`''` at the root): where the app mounts the
   * API, so a route's URL below it counts as a path of the API too.
   */
  readonly mount?: string;
}

/** Where a contract's operation may be routed (see {@link contractRoutes}). */
export interface ContractRoutes {
  readonly method: string;
  /** The contract path, `/`-led. */
  readonly path: string;
  /** The base paths it may stand under, normalised (`/v1`, no trailing `/`). */
  readonly basePaths: readonly string[];
  /** The contract path alone and under each base path: the paths a route may have. */
  readonly paths: readonly string[];
  readonly caseSensitive: boolean;
  /** {@link paths} as shapes (see {@link routeShape}), case-folded when the router ignores case. */
  readonly shapes: ReadonlySet<string>;
}

/** The routes of a contract with `method` and `path`, under the API's `basePaths`, for a router that does or does not tell case apart. */
export function contractRoutes(method: string, path: string, basePaths: readonly string[], caseSensitive: boolean): ContractRoutes {
  const bare = routePath(path);
  const relative = bare.startsWith('/') ? bare : `/${bare}`;
  const bases = [...new Set(basePaths.map(normaliseBasePath))].filter((base) => base !== '');
  const paths = [relative, ...bases.map((base) => base + relative)];
  const shapes = new Set(paths.map((full) => fold(contractShape(full), caseSensitive)));
  return { method, path: relative, basePaths: bases, paths, caseSensitive, shapes };
}

/**
 * Whether `route` serves the contract's operation (its method aside): its whole URL, or its URL below the scope
 * the plugin was registered in, is the contract path, alone or under a base path. A register prefix of the
 * route's own does not count: with the plugin at the root, `register(admin, { prefix: '/admin' })` with
 * `post('/orders')` is another operation than `/orders`, and guarding it would replay one route's answers on the
 * other.
 */
export function servesPath(routes: ContractRoutes, route: RouteAddress): boolean {
  if (routes.shapes.has(routeShape(route.url, routes.caseSensitive))) return true;
  const below = belowMount(route);
  return below !== undefined && routes.shapes.has(routeShape(below, routes.caseSensitive));
}

/** The route's URL below the plugin's mount (`/a/orders` under `/a` → `/orders`); `undefined` outside it or at the root. */
function belowMount(route: RouteAddress): string | undefined {
  const mount = withoutTrailingSlash(route.mount ?? '');
  if (mount === '' || !route.url.startsWith(mount)) return undefined;
  const rest = route.url.slice(mount.length);
  return rest === '' ? '/' : rest.startsWith('/') ? rest : undefined;
}

/**
 * Why a route of `methods` that resembles the contract's is not its route, for the error of a guard no route
 * matched: another method, another letter case on a case-sensitive router, or the path under a prefix that is
 * not a base path of the API. `undefined` when it does not resemble it.
 */
export function nearMiss(routes: ContractRoutes, route: RouteAddress, methods: readonly string[]): string | undefined {
  const label = `${methods.join(',')} ${route.url}`;
  if (!methods.includes(routes.method)) return servesPath(routes, route) ? `${label} (another method)` : undefined;
  if (routes.caseSensitive && servesPath(contractRoutes(routes.method, routes.path, routes.basePaths, false), route)) {
    return `${label} (another letter case, and the router tells case apart)`;
  }
  const own = fold(contractShape(routes.path), routes.caseSensitive);
  const url = withoutTrailingSlash(route.url);
  if (own === '' || !routeShape(url, routes.caseSensitive).endsWith(own)) return undefined;
  const prefix = url.split('/').slice(0, -(own.split('/').length - 1)).join('/');
  return `${label} (${routes.path} under ${prefix}, which is not a base path of the API nor the scope the plugin was registered in: register the plugin in that scope, or pass { basePaths: ['${prefix}'] }, if the API is mounted there)`;
}

/** A base path as {@link ContractRoutes} keeps it: `/v1/` → `/v1`, `/` → `''`; throws `TypeError` for anything but a path. */
export function normaliseBasePath(text: unknown): string {
  if (!isBasePath(text)) {
    throw new TypeError(`idempotencyPlugin: a base path is a path from the root such as '/v1', not ${JSON.stringify(text)}`);
  }
  return text.replace(/\/+$/, '');
}

/** Whether `text` can be a base path: a path from the root, without a query, a fragment, a template or white space. */
export function isBasePath(text: unknown): text is string {
  return typeof text === 'string' && text.startsWith('/') && !/[?#{}\s]/.test(text);
}

// A path parameter in a shape: a character no route or contract path spells.
const PARAM = '\u0000';

function fold(shape: string, caseSensitive: boolean): string {
  return caseSensitive ? shape : shape.toLowerCase();
}

/** `/charges/{id}/` → `/charges/\0`: literal text as it is, each parameter one placeholder, no trailing slash. */
function contractShape(path: string): string {
  return withoutTrailingSlash(path.replace(/\{[^}]*\}/g, PARAM));
}

/**
 * A Fastify route URL in the shape of {@link contractShape}: `::` is a literal `:`; `:name`, `:name(regex)`
 * and `:a-:b` parameters (a name ends at `-`, `.`, `/` or `(`) become placeholders; `*` stays a wildcard,
 * which no contract parameter matches; `/`-led. Lower-cased for a case-insensitive router.
 */
function routeShape(url: string, caseSensitive: boolean): string {
  let shape = url === '' || url.startsWith('/') ? '' : '/';
  for (let i = 0; i < url.length; i += 1) {
    const char = url[i]!;
    if (char !== ':') {
      shape += fold(char, caseSensitive);
      continue;
    }
    if (url[i + 1] === ':') {
      shape += ':';
      i += 1;
      continue;
    }
    let end = i + 1;
    while (end < url.length && !'-./('.includes(url[end]!)) end += 1;
    if (url[end] === '(') end = closingParenthesis(url, end);
    shape += PARAM;
    i = end - 1;
  }
  return withoutTrailingSlash(shape);
}

/** The index after the `)` closing the regular expression that opens at `start`. */
function closingParenthesis(text: string, start: number): number {
  let depth = 0;
  for (let i = start; i < text.length; i += 1) {
    if (text[i] === '\\') i += 1;
    else if (text[i] === '(') depth += 1;
    else if (text[i] === ')' && (depth -= 1) === 0) return i + 1;
  }
  return text.length;
}

function withoutTrailingSlash(shape: string): string {
  return shape.endsWith('/') ? shape.slice(0, -1) : shape;
}

/**
 * The Fastify route for a contract path: `/v1/orders/{id}` → `/v1/orders/:id`. A literal `:` becomes `::`,
 * Fastify's escape for it (`/emails:send` → `/emails::send`); a parameter name Fastify cannot spell becomes
 * camel case (`{item.id}` → `:itemId`); and a parameter followed by text that would run into its name
 * (`{name}:cancel`) gets the pattern `([^/]+)` to end it (`/:name([^/]+)::cancel`).
 */
export function toFastifyPath(path: string): string {
  const parts = path.split(/\{([^}]*)\}/);
  let out = '';
  parts.forEach((part, index) => {
    if (index % 2 === 0) {
      out += part.replaceAll(':', '::');
      return;
    }
    const name = part.replace(/[^A-Za-z0-9_$]+(.?)/g, (_, next: string) => next.toUpperCase()) || 'param';
    // Fastify ends a parameter name only at `/`, `-`, `.` or `(`.
    const next = parts[index + 1]!;
    const ended = next === '' ? index + 2 === parts.length : '/-.'.includes(next[0]!);
    out += ended ? `:${name}` : `:${name}([^/]+)`;
  });
  return out;
}
