/**
 * Finds the `yaml` node of a mapping in a YAML text, for `idemkit init` to insert next to. A `yaml` Document
 * of a whole 10 MB file takes seconds and hundreds of MB; js-yaml's flat parse events (what the loader parses
 * with) take a tenth of that. So the events find the mapping's lines, and `yaml` parses only those lines,
 * for the same node ranges a whole-file Document gives. When the events cannot settle it plainly — an alias,
 * a merge key or a flow collection on the way, a key that is not plainly a string — the whole-file Document
 * answers, as before.
 */
import { createRequire } from 'node:module';
import type * as JsYamlModule from 'js-yaml';
import type { Event } from 'js-yaml';
import type * as YamlModule from 'yaml';
import type { Node as YamlNode } from 'yaml';
import { ALIAS, DOCUMENT, MAPPING, POP, SCALAR, SEQUENCE } from '../parser/yaml-positions.js';

const require = createRequire(import.meta.url);

/** A node and the offset in the file text its ranges start from (ranges + `shift` = offsets in the file). */
export interface LocatedYamlNode {
  readonly node: YamlNode | undefined;
  readonly shift: number;
}

// js-yaml's SCALAR_STYLE and COLLECTION_STYLE values (its event ids come with the loader's position index).
const PLAIN = 1;
const BLOCK = 1;

/**
 * A plain scalar the YAML 1.2 core schema may read as null, a boolean or a number, which `yaml` would not
 * match to a string token (deliberately broad: such a key only sends the lookup to the whole Document).
 */
const MAYBE_NOT_A_STRING = /^(?:$|[-+.~0-9]|(?:null|true|false)$)/i;

/** Finds nodes by JSON Pointer tokens in one YAML text (see the module comment). */
export class YamlNodeFinder {
  private events: readonly Event[] | undefined;
  /** Index of the last event of each node's subtree (its POP for a collection, itself otherwise). */
  private ends: Int32Array | undefined;
  private whole: YamlModule.Document.Parsed | undefined;

  constructor(private readonly text: string) {}

  /** The node at `tokens`, as `yaml`'s `Document.getIn(tokens, true)` on the whole text finds it. */
  find(tokens: readonly string[]): LocatedYamlNode {
    return this.alone(tokens) ?? { node: (this.whole ??= yamlModule().parseDocument(this.text)).getIn(tokens, true) as YamlNode | undefined, shift: 0 };
  }

  /** The block mapping at `tokens` parsed from its own lines, or `undefined` when the whole text must answer. */
  private alone(tokens: readonly string[]): LocatedYamlNode | undefined {
    const events = this.prepare();
    if (!events) return undefined;
    let node = events[0]?.type === DOCUMENT ? 1 : 0;
    for (const token of tokens) {
      const found = this.member(node, token);
      if (found === undefined) return undefined;
      node = found;
    }
    const map = events[node];
    if (map?.type !== MAPPING || map.style !== BLOCK || events[node + 1]?.type === POP) return undefined;
    const lineStart = this.text.lastIndexOf('\n', map.start - 1) + 1;
    if (!/^ *$/.test(this.text.slice(lineStart, map.start))) return undefined;
    // The mapping's lines run up to the line of whatever the events hold next (an outer key), or to the end.
    let next = this.ends![node]! + 1;
    while (next < events.length && (events[next]!.type === POP || events[next]!.type === DOCUMENT)) next += 1;
    const end = next < events.length ? this.text.lastIndexOf('\n', startOf(events[next]!) - 1) + 1 : this.text.length;
    if (end <= lineStart) return undefined;
    const doc = yamlModule().parseDocument(this.text.slice(lineStart, end));
    if (doc.errors.length > 0 || !yamlModule().isMap(doc.contents) || doc.contents.flow) return undefined;
    return { node: doc.contents, shift: lineStart };
  }

  /** The value of `token` in the block mapping at `node`, the first one written, as `yaml` matches keys. */
  private member(node: number, token: string): number | undefined {
    const events = this.events!;
    const map = events[node];
    if (map?.type !== MAPPING || map.style !== BLOCK) return undefined;
    for (let key = node + 1; events[key] && events[key]!.type !== POP; ) {
      const event = events[key]!;
      const value = this.ends![key]! + 1;
      if (event.type !== SCALAR || event.tagStart !== -1 || !events[value] || events[value]!.type === POP) return undefined;
      const name = loadJsYaml().getScalarValue(this.text, event);
      if (name === token) return event.style === PLAIN && MAYBE_NOT_A_STRING.test(name) ? undefined : value;
      key = this.ends![value]! + 1;
    }
    return undefined;
  }

  private prepare(): readonly Event[] | undefined {
    if (this.events) return this.events;
    let events: Event[];
    try {
      events = loadJsYaml().parseEvents(this.text, { maxDepth: 1_000 });
    } catch {
      return undefined;
    }
    const ends = new Int32Array(events.length);
    const open: number[] = [];
    events.forEach((event, index) => {
      ends[index] = index;
      if (event.type === POP) {
        const start = open.pop();
        if (start !== undefined) ends[start] = index;
      } else if (event.type === DOCUMENT || event.type === MAPPING || event.type === SEQUENCE) open.push(index);
    });
    this.ends = ends;
    return (this.events = events);
  }
}

/** Where an event's node starts in the text: its anchor or tag when written before it. */
function startOf(event: Event): number {
  const own = event.type === SCALAR ? event.valueStart : 'start' in event ? event.start : event.type === ALIAS ? event.anchorStart : -1;
  const props = 'tagStart' in event ? [event.anchorStart, event.tagStart].filter((offset) => offset >= 0) : [];
  return Math.min(own, ...props);
}

let yaml: typeof YamlModule | undefined;
let jsYaml: typeof JsYamlModule | undefined;

/** The `yaml` module, loaded on first use (`idemkit lint` never needs it). */
export function yamlModule(): typeof YamlModule {
  return (yaml ??= require('yaml') as typeof YamlModule);
}

function loadJsYaml(): typeof JsYamlModule {
  return (jsYaml ??= require('js-yaml') as typeof JsYamlModule);
}
