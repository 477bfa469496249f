/**
 * `$ref`s as the client generator follows them: the document's own resolution, plus the Swagger 2.0 shorthand
 * (`$ref: Product` for `#/definitions/Product`, as the OAI's 2.0 examples and swagger tools read it), and a
 * broken reference kept until the whole client is built, so the error names the first one in the file, with
 * its line and column.
 */
import { DocumentError } from '../../errors.js';
import type { ApiDocument, Location } from '../../parser/model.js';
import { toJsLiteral } from '../render.js';

/** The 2.0 section a shorthand `$ref` names an entry of, by what refers to it (3.x request bodies have none in 2.0). */
export type RefKind = 'definitions' | 'responses' | 'parameters' | 'requestBodies';

/** The 3.x section of each kind, for a hint when a 3.x document uses the 2.0 shorthand. */
const COMPONENTS: Readonly<Record<RefKind, string>> = { definitions: 'schemas', responses: 'responses', parameters: 'parameters', requestBodies: 'requestBodies' };

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);
const escapeToken = (token: string): string => token.replace(/~/g, '~0').replace(/\//g, '~1');

/** At most this many shorthand hops in one chain (a cycle of them ends here, as a broken reference). */
const MAX_HOPS = 32;

interface Broken {
  readonly at: Location;
  readonly ref: string;
  readonly message: string;
}

/** Follows `$ref`s for one client; see the module comment. */
export class ClientRefs {
  readonly #doc: ApiDocument;
  readonly #broken: Broken[] = [];

  constructor(doc: ApiDocument) {
    this.#doc = doc;
  }

  /**
   * The node `value` (found at `at`) stands for after its `$ref`s, and where that lives; `undefined` when a
   * reference is broken (recorded for {@link throwIfBroken}).
   */
  deref(value: unknown, at: Location, kind: RefKind): { readonly value: unknown; readonly at: Location } | undefined {
    let current = value;
    let where = at;
    for (let hop = 0; hop < MAX_HOPS; hop++) {
      if (!isObject(current) || typeof current['$ref'] !== 'string') return { value: current, at: where };
      const ref = current['$ref'];
      const shorthand = this.#shorthand(ref, where, kind);
      if (shorthand === undefined) {
        const target = this.#doc.deref(current, where);
        if (target === undefined) this.#record(where, ref, kind);
        return target;
      }
      current = this.#doc.get(shorthand);
      where = shorthand;
    }
    this.#record(where, String((current as Json)['$ref']), kind);
    return undefined;
  }

  /** Throws a {@link DocumentError} for the first broken reference in the file (by line, then column), if any. */
  throwIfBroken(): void {
    const placed = this.#broken.map((broken) => {
      const refAt = { file: broken.at.file, pointer: `${broken.at.pointer}/$ref` };
      return { broken, refAt, position: this.#doc.position(refAt) };
    });
    placed.sort(
      (a, b) =>
        Number(a.refAt.file !== this.#doc.file) - Number(b.refAt.file !== this.#doc.file) ||
        (a.refAt.file < b.refAt.file ? -1 : a.refAt.file > b.refAt.file ? 1 : 0) ||
        a.position.line - b.position.line ||
        a.position.column - b.position.column,
    );
    const first = placed[0];
    if (first === undefined) return;
    const others = placed.length - 1;
    const more = others === 0 ? '' : ` (and ${others} more broken $ref${others === 1 ? '' : 's'})`;
    throw new DocumentError(`${first.broken.message}${more}`, first.refAt.file, first.refAt.pointer, first.position.line, first.position.column);
  }

  /** The entry a Swagger 2.0 shorthand `$ref` (a bare name: no `#`, no `/`) names in its file, when it exists. */
  #shorthand(ref: string, at: Location, kind: RefKind): Location | undefined {
    if (this.#doc.version !== '2.0' || !isBareName(ref)) return undefined;
    const target = { file: at.file, pointer: `/${kind}/${escapeToken(ref)}` };
    return this.#doc.get(target) === undefined ? undefined : target;
  }

  #record(at: Location, ref: string, kind: RefKind): void {
    if (this.#broken.some((b) => b.at.file === at.file && b.at.pointer === at.pointer)) return;
    this.#broken.push({ at, ref, message: brokenMessage(this.#doc, at, ref, kind) });
  }
}

const KIND_NAMES: Readonly<Record<RefKind, string>> = { definitions: 'schema', responses: 'response', parameters: 'parameter', requestBodies: 'request body' };

const isBareName = (ref: string): boolean => ref !== '' && !ref.includes('#') && !ref.includes('/');

/** What is wrong with `ref` and how to fix it, in one line. */
function brokenMessage(doc: ApiDocument, at: Location, ref: string, kind: RefKind): string {
  const quoted = toJsLiteral(ref);
  if (isBareName(ref)) {
    const section = doc.version === '2.0' ? `/${kind}` : `/components/${COMPONENTS[kind]}`;
    const pointer = `#${section}/${escapeToken(ref)}`;
    if (doc.version !== '2.0' && doc.get({ file: at.file, pointer: pointer.slice(1) }) !== undefined) {
      return `$ref ${quoted} is the Swagger 2.0 shorthand, which OpenAPI 3 reads as a file name — write ${toJsLiteral(pointer)}`;
    }
    return `$ref ${quoted} names no ${section.slice(1)} entry and no file — add ${toJsLiteral(pointer)} or point the $ref at an existing one`;
  }
  return `$ref ${quoted} does not resolve — point it at an existing ${KIND_NAMES[kind]} (a #/json/pointer in this file, or a relative file path and pointer)`;
}
