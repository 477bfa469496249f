/**
 * Whether a key pattern can make a backtracking matcher (V8's, every JavaScript engine's) take time exponential in
 * the key's length: exponential degree of ambiguity (EDA) of the pattern's NFA — some state with two different
 * paths back to itself that read the same text. A key that almost matches (the ambiguous part pumped, then a
 * character the pattern refuses) then makes the matcher try every way of splitting it: `([A-Za-z0-9]+-?)*` took
 * 13 s on a 32-character key, and the guard's event loop with it. A pattern without EDA takes at most polynomial
 * time, and the guard bounds the key's length before it runs the pattern.
 *
 * The check (after Allauzen, Mohri and Rastogi's test for EDA): the pattern, as the guard compiles it (`^(?:…)$`,
 * no flags), becomes a Thompson NFA over UTF-16 code-unit ranges; its ε-moves are folded into the character moves
 * that follow them, one move per distinct ε-path (two ε-paths to one character move are two ways to read it). In
 * the product of that NFA with itself, EDA is a strongly connected component that holds a diagonal pair `(q, q)`
 * and either an off-diagonal pair or a move made by two different moves of the NFA.
 *
 * ECMAScript's empty check is kept: an iteration past a repeat's minimum that reads nothing is no way to read
 * anything (`(a?)*` is not ambiguous), while an ε-path that closes one non-empty iteration and opens the next is
 * (`(a*)*` is). Assertions (`^`, `$`, `\b`, lookarounds) are taken as always true, which can only add ways (so a
 * pattern an anchor alone makes unambiguous is flagged); a lookaround's own body is checked as a pattern of its own.
 * A back-reference, or a pattern too large to check within the budget (many alternatives in one loop), answers
 * `undefined` (not known), as does a pattern the parser does not read (the guard's `new RegExp` decides whether it
 * is valid); a contract refuses those too.
 */
import { createRequire } from 'node:module';
import type * as RegjsparserModule from 'regjsparser';

const require = createRequire(import.meta.url);

/** What makes a pattern exponential: a key that reaches the ambiguous state, and text read two ways from it. */
export interface ExponentialBacktracking {
  /** Text that leads from the start of the key to the ambiguous part. */
  readonly prefix: string;
  /** Text the ambiguous part reads in two ways: each repetition doubles the matcher's work on a key that then fails. */
  readonly pump: string;
}

type Ranges = readonly (readonly [number, number])[];
type Node = RegjsparserModule.AstNode;

class Unanalyzable extends Error {}

const MAX_UNIT = 0xffff;
/** NFA states the check builds at most, and product pairs it visits at most, before answering "not known". */
const MAX_STATES = 4_000;
const MAX_PAIRS = 400_000;
/**
 * A bounded repeat of this many iterations or more whose body, repeated without bound, would be exponential is taken
 * as exponential: `(?:a|a){1,300}` has no cycle to find, but 2^n ways to read n characters all the same.
 */
const MANY = 8;
/** A one-character repeat is written out exactly up to this many iterations (see {@link Nfa.repeat}). */
const EXACT = 64;
/** Edges of the NFA's square the check builds at most before answering "not known" (many alternatives of one loop). */
const MAX_EDGES = 250_000;

const DIGIT: Ranges = [[0x30, 0x39]];
const WORD: Ranges = [[0x30, 0x39], [0x41, 0x5a], [0x5f, 0x5f], [0x61, 0x7a]];
const SPACE: Ranges = [
  [0x09, 0x0d], [0x20, 0x20], [0xa0, 0xa0], [0x1680, 0x1680], [0x2000, 0x200a], [0x2028, 0x2029], [0x202f, 0x202f],
  [0x205f, 0x205f], [0x3000, 0x3000], [0xfeff, 0xfeff],
];
const LINE_TERMINATORS: Ranges = [[0x0a, 0x0a], [0x0d, 0x0d], [0x2028, 0x2029]];

// Per pattern: a document's defaults give every operation the same one.
const checked = new Map<string, ExponentialBacktracking | null | undefined>();

/** The exponential ambiguity of `source` as a whole-key pattern, `null` when it has none, `undefined` when not known. */
export function exponentialBacktracking(source: string): ExponentialBacktracking | null | undefined {
  if (checked.has(source)) return checked.get(source);
  const result = check(source);
  if (checked.size >= 256) checked.clear();
  checked.set(source, result);
  return result;
}

/** What a contract's finding says of an exponential key pattern (or one not known): what a client can do with it, and the fix. */
export function exponentialPatternMessage(found: ExponentialBacktracking | undefined): string {
  if (found === undefined) {
    return (
      "x-idempotency.key.pattern cannot be checked for exponential backtracking (it uses a back-reference, or is too large to check): " +
      "the guard runs it on every key a client sends, and a pattern that backtracks exponentially lets one request hold the server's event loop; " +
      'write it without back-references, as a plain character class where it can be (e.g. `^[A-Za-z0-9._:-]+$`)'
    );
  }
  const example = `${found.prefix}${found.pump.repeat(Math.max(2, Math.ceil(24 / found.pump.length)))}`;
  return (
    `x-idempotency.key.pattern can take time exponential in the key's length: part of it reads ${JSON.stringify(found.pump)} in more than one way, ` +
    `so a key such as ${JSON.stringify(example)} followed by a character the pattern refuses makes the matcher try every way — each repetition doubles the time, and ` +
    `one such request holds the server's event loop for seconds to hours, before the key is refused; ` +
    `rewrite it so that each character can be read only one way (e.g. \`[A-Za-z0-9-]+\` for \`([A-Za-z0-9]+-?)*\`, \`\\w+\` for \`(\\w|\\d)+\`)`
  );
}

function check(source: string): ExponentialBacktracking | null | undefined {
  return analysed(`^(?:${source})$`, checkNode);
}

/**
 * `analyse` of `pattern` parsed (no flags, as the guard compiles it), or `undefined` — not known — when the parser does
 * not read it or `analyse` finds what it cannot judge ({@link Unanalyzable}).
 */
function analysed<T>(pattern: string, analyse: (ast: Node) => T): T | undefined {
  let ast: Node;
  try {
    const { parse } = require('regjsparser') as typeof RegjsparserModule;
    ast = parse(pattern, '', { lookbehind: true, namedGroups: true }) as Node;
  } catch {
    return undefined;
  }
  try {
    return analyse(ast);
  } catch (error) {
    if (error instanceof Unanalyzable) return undefined;
    throw error;
  }
}

/** {@link check} of a parsed pattern (or a lookaround's body); throws Unanalyzable for "not known". */
function checkNode(ast: Node): ExponentialBacktracking | null {
  const nfa = new Nfa();
  const start = nfa.state();
  nfa.build(ast, start);
  const found = ambiguity(withoutEpsilons(nfa, start));
  if (found !== null) return { prefix: textTo(nfa, start, found.state), pump: found.pump };
  for (const { from, body } of nfa.bounded) {
    const alone = new Nfa();
    const head = alone.state();
    alone.repeat(body, 1, undefined, head);
    const inner = ambiguity(withoutEpsilons(alone, head));
    if (inner !== null) return { prefix: textTo(nfa, start, from) + textTo(alone, head, inner.state), pump: inner.pump };
  }
  // A lookaround's body is matched where it stands, and backtracks as any part does (its own repeats and lookarounds
  // too).
  for (const { from, body } of nfa.lookarounds) {
    const inner = checkNode(body);
    if (inner !== null) return { prefix: textTo(nfa, start, from) + inner.prefix, pump: inner.pump };
  }
  return null;
}

/** A Thompson NFA: ε-moves and character moves (a set of code-unit ranges) between numbered states. */
class Nfa {
  readonly epsilon: number[][] = [];
  readonly moves: { readonly set: Ranges; readonly to: number }[][] = [];
  /** The bounded repeats of many iterations (`{n,m}`, m ≥ {@link MANY}), and the state each starts at. */
  readonly bounded: { readonly from: number; readonly body: Node }[] = [];
  /** Lookaround bodies and the state each is asserted at: they are matched (and backtrack) too, on their own. */
  readonly lookarounds: { readonly from: number; readonly body: Node }[] = [];
  /**
   * ECMAScript's empty check: an iteration past a repeat's minimum that reads nothing fails. The state where such an
   * iteration starts and the one where it ends carry its number; an ε-path that goes from one to the other (reading
   * nothing) is not a way to read anything.
   */
  readonly iterationStart = new Map<number, number>();
  readonly iterationEnd = new Map<number, number>();
  #iterations = 0;

  state(): number {
    if (this.epsilon.length >= MAX_STATES) throw new Unanalyzable();
    this.epsilon.push([]);
    this.moves.push([]);
    return this.epsilon.length - 1;
  }

  private read(from: number, set: Ranges): number {
    const to = this.state();
    this.moves[from]!.push({ set, to });
    return to;
  }

  private link(from: number): number {
    const to = this.state();
    this.epsilon[from]!.push(to);
    return to;
  }

  /** Adds `node` read from state `from`; returns the state where it ends. */
  build(node: Node, from: number): number {
    switch (node.type) {
      case 'alternative': {
        let at = from;
        for (const part of node.body) at = this.build(part, at);
        return at;
      }
      case 'disjunction': {
        const end = this.state();
        for (const branch of node.body) this.epsilon[this.build(branch, this.link(from))]!.push(end);
        return end;
      }
      case 'group':
        // Lookarounds are assertions: taken as true here (they read nothing), which only adds ways; their bodies are
        // checked on their own.
        if (node.behavior !== 'normal' && node.behavior !== 'ignore') {
          this.lookarounds.push({ from, body: { type: 'alternative', body: node.body } as unknown as Node });
          return from;
        }
        return this.build({ type: 'alternative', body: node.body } as unknown as Node, from);
      case 'anchor':
        return from;
      case 'quantifier':
        return this.repeat(node.body[0]!, node.min, node.max, from);
      case 'value': {
        const unit = node.codePoint;
        if (unit <= MAX_UNIT) return this.read(from, [[unit, unit]]);
        // Without the u flag an astral character is its two surrogates.
        const offset = unit - 0x10000;
        const high = 0xd800 + (offset >> 10);
        const low = 0xdc00 + (offset & 0x3ff);
        return this.read(this.read(from, [[high, high]]), [[low, low]]);
      }
      case 'dot':
        return this.read(from, complement(LINE_TERMINATORS));
      case 'characterClassEscape':
        return this.read(from, classEscape(node.value));
      case 'characterClass':
        return this.read(from, classRanges(node));
      default:
        // A back-reference reads what a group read: not a regular language.
        throw new Unanalyzable();
    }
  }

  repeat(body: Node, min: number, max: number | undefined, from: number): number {
    // One character a repeat (`[0-9a-f]{12}`, `\\d{1,64}`) is written out exactly up to EXACT iterations: cheap, and
    // lengths that tell alternatives apart (`\\d{12}|\\d{16}`) stay apart.
    const exact = isCharacter(body) && min <= EXACT && (max ?? 0) <= EXACT;
    if (max !== undefined && max >= MANY && !exact) {
      // Checked on its own, repeated without bound (see MANY); here its first MANY iterations stand for it, which keeps
      // the check's size in bounds and every cycle around it.
      this.bounded.push({ from, body });
      max = MANY;
    }
    if (!exact) min = Math.min(min, MANY);
    let at = from;
    for (let i = 0; i < min; i++) at = this.build(body, at);
    if (max === undefined) {
      // Entered at `head`; each iteration runs from `start` to `back`, which goes round again or leaves by `exit`.
      const head = this.link(at);
      const exit = this.link(head);
      const start = this.link(head);
      const back = this.state();
      this.epsilon[this.build(body, start)]!.push(back);
      this.epsilon[back]!.push(start, exit);
      this.#checked(start, back);
      return exit;
    }
    const end = this.state();
    for (let i = min; i < max; i++) {
      this.epsilon[at]!.push(end);
      const start = this.link(at);
      const done = this.state();
      this.epsilon[this.build(body, start)]!.push(done);
      this.#checked(start, done);
      at = done;
    }
    this.epsilon[at]!.push(end);
    return end;
  }

  /** Marks an iteration past the minimum: from `start` to `end` it must read something (the empty check). */
  #checked(start: number, end: number): void {
    const id = this.#iterations++;
    this.iterationStart.set(start, id);
    this.iterationEnd.set(end, id);
  }
}

/** The ε-free NFA: from each state, one move per distinct ε-path to a character move (at most two: two are ambiguous). */
interface Move {
  readonly set: Ranges;
  readonly to: number;
  /** The character move and the ε-path to it: two moves with one id are the same way of reading. */
  readonly id: number;
}

function withoutEpsilons(nfa: Nfa, start: number): { readonly start: number; readonly moves: Map<number, Move[]> } {
  const moves = new Map<number, Move[]>();
  const queue = [start];
  let ids = 0;
  while (queue.length > 0) {
    const state = queue.pop()!;
    if (moves.has(state)) continue;
    const out: Move[] = [];
    moves.set(state, out);
    for (const [reached, paths] of epsilonPaths(nfa, state)) {
      for (const move of nfa.moves[reached]!) {
        for (let k = 0; k < paths; k++) out.push({ set: move.set, to: move.to, id: ids++ });
        if (!moves.has(move.to)) queue.push(move.to);
      }
    }
  }
  return { start, moves };
}

/** The states ε-reachable from `from` (itself included) by simple paths, each with its number of paths (1 or 2). */
function epsilonPaths(nfa: Nfa, from: number): Map<number, number> {
  const paths = new Map<number, number>();
  const onPath = new Set<number>();
  let steps = 0;
  // The iterations this ε-path has entered (reading nothing since): reaching the end of one is an empty iteration.
  const entered = new Set<number>();
  const visit = (state: number): void => {
    if (++steps > MAX_PAIRS) throw new Unanalyzable();
    const ends = nfa.iterationEnd.get(state);
    if (ends !== undefined && entered.has(ends)) return;
    const starts = nfa.iterationStart.get(state);
    const entering = starts !== undefined && !entered.has(starts);
    if (entering) entered.add(starts);
    paths.set(state, Math.min(2, (paths.get(state) ?? 0) + 1));
    onPath.add(state);
    for (const next of nfa.epsilon[state]!) {
      // Once two paths reach a state, more add nothing: its moves are already ambiguous.
      if (!onPath.has(next) && (paths.get(next) ?? 0) < 2) visit(next);
    }
    onPath.delete(state);
    if (entering) entered.delete(starts);
  };
  visit(from);
  return paths;
}

/**
 * EDA in the ε-free NFA: a state of it, and the shortest text it reads back to itself in two ways, from the first
 * strongly connected component of its square that shows it; `null` when none does.
 */
function ambiguity(nfa: { readonly start: number; readonly moves: Map<number, Move[]> }): { readonly state: number; readonly pump: string } | null {
  const states = [...nfa.moves.keys()];
  const size = Math.max(...states) + 1;
  const pair = (a: number, b: number): number => a * size + b;
  // The square's pairs reachable from the diagonal, and its edges (the pair of moves that makes each).
  const edges = new Map<number, Edge[]>();
  let edgeCount = 0;
  const stack = states.map((state) => pair(state, state));
  while (stack.length > 0) {
    const at = stack.pop()!;
    if (edges.has(at)) continue;
    if (edges.size >= MAX_PAIRS) throw new Unanalyzable();
    const out: Edge[] = [];
    edges.set(at, out);
    for (const a of nfa.moves.get(Math.floor(at / size))!) {
      for (const b of nfa.moves.get(at % size)!) {
        if (++edgeCount > MAX_EDGES) throw new Unanalyzable();
        if (!intersects(a.set, b.set)) continue;
        const to = pair(a.to, b.to);
        out.push({ from: at, to, a, b });
        if (!edges.has(to)) stack.push(to);
      }
    }
  }
  for (const component of stronglyConnected(edges)) {
    const inside = new Set(component);
    // Two ways: an edge to an off-diagonal pair, or two different moves to one state.
    const branching = component.flatMap((from) => edges.get(from)!.filter((edge) => inside.has(edge.to) && (Math.floor(edge.to / size) !== edge.to % size || edge.a.id !== edge.b.id)));
    if (branching.length === 0) continue;
    const reverse = new Map<number, Edge[]>();
    for (const from of component) for (const edge of edges.get(from)!) if (inside.has(edge.to)) (reverse.get(edge.to) ?? reverse.set(edge.to, []).get(edge.to)!).push(edge);
    // The shortest cycle through a diagonal pair that takes a branching edge (the same text read two ways), over the
    // component's first diagonal pairs: the shortest text to repeat in an example key.
    let best: { readonly state: number; readonly pump: Edge[] } | undefined;
    for (const diagonal of component.filter((p) => Math.floor(p / size) === p % size).slice(0, 32)) {
      const out = within(edges, inside, diagonal, (edge) => edge.to);
      const back = within(reverse, inside, diagonal, (edge) => edge.from);
      for (const edge of branching) {
        const length = out.get(edge.from)!.length + 1 + back.get(edge.to)!.length;
        if (best === undefined || length < best.pump.length) best = { state: Math.floor(diagonal / size), pump: [...out.get(edge.from)!, edge, ...back.get(edge.to)!.slice().reverse()] };
      }
    }
    if (best === undefined) continue;
    return { state: best.state, pump: best.pump.map((edge) => sample(edge.a.set, edge.b.set)).join('') };
  }
  return null;
}

interface Edge {
  readonly from: number;
  readonly to: number;
  readonly a: Move;
  readonly b: Move;
}

/** For each pair inside the component, the edges of a shortest path from `origin` to it (breadth first along `next`). */
function within(edges: Map<number, readonly Edge[]>, inside: Set<number>, origin: number, next: (edge: Edge) => number): Map<number, Edge[]> {
  const paths = new Map<number, Edge[]>([[origin, []]]);
  const queue = [origin];
  for (let i = 0; i < queue.length; i++) {
    for (const edge of edges.get(queue[i]!) ?? []) {
      const to = next(edge);
      if (!inside.has(to) || paths.has(to)) continue;
      paths.set(to, [...paths.get(queue[i]!)!, edge]);
      queue.push(to);
    }
  }
  return paths;
}

/** Tarjan's strongly connected components, iteratively (a pattern's square can be deep). */
function stronglyConnected(edges: Map<number, readonly { readonly to: number }[]>): number[][] {
  const index = new Map<number, number>();
  const low = new Map<number, number>();
  const onStack = new Set<number>();
  const stack: number[] = [];
  const components: number[][] = [];
  let counter = 0;
  for (const root of edges.keys()) {
    if (index.has(root)) continue;
    const work: { node: number; next: number }[] = [{ node: root, next: 0 }];
    index.set(root, counter);
    low.set(root, counter++);
    stack.push(root);
    onStack.add(root);
    while (work.length > 0) {
      const frame = work[work.length - 1]!;
      const out = edges.get(frame.node)!;
      if (frame.next < out.length) {
        const to = out[frame.next++]!.to;
        if (!index.has(to)) {
          index.set(to, counter);
          low.set(to, counter++);
          stack.push(to);
          onStack.add(to);
          work.push({ node: to, next: 0 });
        } else if (onStack.has(to)) {
          low.set(frame.node, Math.min(low.get(frame.node)!, index.get(to)!));
        }
        continue;
      }
      work.pop();
      if (work.length > 0) {
        const parent = work[work.length - 1]!.node;
        low.set(parent, Math.min(low.get(parent)!, low.get(frame.node)!));
      }
      if (low.get(frame.node) === index.get(frame.node)) {
        const component: number[] = [];
        let member: number;
        do {
          member = stack.pop()!;
          onStack.delete(member);
          component.push(member);
        } while (member !== frame.node);
        components.push(component);
      }
    }
  }
  return components;
}

/** Text that leads the NFA from `from` to `to` (breadth first over its ε- and character moves). */
function textTo(nfa: Nfa, from: number, to: number): string {
  const previous = new Map<number, { readonly at: number; readonly text: string }>();
  const queue = [from];
  const seen = new Set([from]);
  for (let i = 0; i < queue.length && !seen.has(to); i++) {
    const at = queue[i]!;
    const steps = [...nfa.epsilon[at]!.map((next) => ({ to: next, text: '' })), ...nfa.moves[at]!.map((move) => ({ to: move.to, text: sample(move.set, move.set) }))];
    for (const step of steps) {
      if (seen.has(step.to)) continue;
      seen.add(step.to);
      previous.set(step.to, { at, text: step.text });
      queue.push(step.to);
    }
  }
  let text = '';
  for (let at = to; at !== from; ) {
    const step = previous.get(at)!;
    text = step.text + text;
    at = step.at;
  }
  return text;
}

/** One character both sets hold, a letter or digit when they share one (for a readable example). */
function sample(a: Ranges, b: Ranges): string {
  const shared = intersection(a, b);
  for (const preferred of [0x61, 0x41, 0x30, 0x2d, 0x5f, 0x20]) {
    if (shared.some(([lo, hi]) => lo <= preferred && preferred <= hi)) return String.fromCharCode(preferred);
  }
  for (const [lo, hi] of shared) {
    const printable = Math.max(lo, 0x21);
    if (printable <= Math.min(hi, 0x7e)) return String.fromCharCode(printable);
  }
  return String.fromCharCode(shared[0]![0]);
}

/** Whether a repeat's body reads exactly one character (a literal, a class, an escape, `.`), through plain groups. */
function isCharacter(node: Node): boolean {
  if (node.type === 'value' || node.type === 'characterClass' || node.type === 'characterClassEscape' || node.type === 'dot') return true;
  if (node.type === 'group' && (node.behavior === 'normal' || node.behavior === 'ignore') && node.body.length === 1) return isCharacter(node.body[0] as Node);
  return node.type === 'alternative' && node.body.length === 1 && isCharacter(node.body[0] as Node);
}

function intersects(a: Ranges, b: Ranges): boolean {
  let i = 0;
  let j = 0;
  while (i < a.length && j < b.length) {
    if (a[i]![1] < b[j]![0]) i++;
    else if (b[j]![1] < a[i]![0]) j++;
    else return true;
  }
  return false;
}

function intersection(a: Ranges, b: Ranges): Ranges {
  const out: [number, number][] = [];
  let i = 0;
  let j = 0;
  while (i < a.length && j < b.length) {
    const lo = Math.max(a[i]![0], b[j]![0]);
    const hi = Math.min(a[i]![1], b[j]![1]);
    if (lo <= hi) out.push([lo, hi]);
    if (a[i]![1] < b[j]![1]) i++;
    else j++;
  }
  return out;
}

/** Sorted, merged ranges. */
function normalise(ranges: Iterable<readonly [number, number]>): Ranges {
  const sorted = [...ranges].sort((x, y) => x[0] - y[0]);
  const out: [number, number][] = [];
  for (const [lo, hi] of sorted) {
    const last = out[out.length - 1];
    if (last !== undefined && lo <= last[1] + 1) last[1] = Math.max(last[1], hi);
    else out.push([lo, hi]);
  }
  return out;
}

function complement(ranges: Ranges): Ranges {
  const out: [number, number][] = [];
  let next = 0;
  for (const [lo, hi] of ranges) {
    if (lo > next) out.push([next, lo - 1]);
    next = hi + 1;
  }
  if (next <= MAX_UNIT) out.push([next, MAX_UNIT]);
  return out;
}

function classEscape(value: string): Ranges {
  const base = value.toLowerCase() === 'd' ? DIGIT : value.toLowerCase() === 'w' ? WORD : SPACE;
  return value === value.toLowerCase() ? base : complement(base);
}

function classRanges(node: Extract<Node, { type: 'characterClass' }>): Ranges {
  const ranges: (readonly [number, number])[] = [];
  for (const item of node.body as Node[]) {
    if (item.type === 'value') ranges.push(unitRange(item.codePoint, item.codePoint));
    else if (item.type === 'characterClassRange') ranges.push(unitRange(item.min.codePoint, item.max.codePoint));
    else if (item.type === 'characterClassEscape') ranges.push(...classEscape(item.value));
    else throw new Unanalyzable();
  }
  const merged = normalise(ranges);
  return node.negative ? complement(merged) : merged;
}

/** A class range in code units: an astral end (no u flag: surrogates) widens it to every code unit above `lo` (more ways, never fewer). */
function unitRange(lo: number, hi: number): readonly [number, number] {
  return lo > MAX_UNIT ? [0xd800, 0xdfff] : [lo, Math.min(hi, MAX_UNIT)];
}

/**
 * The most ways (key length to the pattern's {@link polynomialDegree}) a key pattern may give a backtracking matcher
 * to try on one key: about 10 ms of the guard's loop. 255^2 (a quadratic pattern at the default bound) is well within.
 */
export const POLYNOMIAL_BUDGET = 10_000_000;

/**
 * Whether a document's pattern `source` may be run on a text of `length` characters without backtracking for long:
 * not exponential (nor not known), and `length` to its {@link polynomialDegree} within {@link POLYNOMIAL_BUDGET}.
 * Lint runs document patterns only so: a pull request's spec must not hang a CI job.
 */
export function quickToRun(source: string, length: number, search = false): boolean {
  if (exponentialBacktracking(source) !== null) return false;
  const degree = polynomialDegree(source);
  if (degree === undefined) return false;
  // A search (`test` of an unanchored pattern) tries the pattern from each position: one power more.
  const power = degree + (search && !source.startsWith('^') ? 1 : 0);
  return power <= 1 || Math.max(length, 1) ** power <= POLYNOMIAL_BUDGET;
}

/**
 * The degree of `pattern`'s backtracking (see {@link polynomialDegree}) when keys of up to `bound` characters may
 * make it try more than {@link POLYNOMIAL_BUDGET} ways — a contract refuses such a key pattern, and init leaves it
 * out — else `undefined`. Degree 2 counts too: quick within the default bound (255^2), but a bound of 100,000 held
 * the loop 3.9 s.
 */
export function slowKeyPatternDegree(pattern: string, bound: number): number | undefined {
  const degree = polynomialDegree(pattern) ?? 0;
  return degree >= 2 && bound ** degree > POLYNOMIAL_BUDGET ? degree : undefined;
}

/** What a contract's finding says of a key pattern whose backtracking grows as n^degree, for keys of up to `bound` characters. */
export function polynomialPatternMessage(degree: number, bound: number): string {
  return (
    `x-idempotency.key.pattern can take time growing as the key's length to the power ${degree}: ${degree} repeats that follow one another read the same characters, ` +
    `so a ${bound}-character key of them followed by a character the pattern refuses makes the matcher try about ${bound}^${degree} ways to split it ` +
    `(a 121-character key held a loop 4.4 s at power 5), before the key is refused; rewrite it so that each character can be read by one part only ` +
    `(e.g. \`^[a-z0-9]+(?:-[a-z0-9]+)*$\` for \`[a-z0-9]*-?[a-z0-9]*-?[a-z0-9]*\`), or lower key.maxLength`
  );
}

/**
 * The polynomial degree of backtracking `source` shows as a whole-key pattern: the most one-character repeats
 * without an upper bound that follow one another (with only optional parts between them) and share a character —
 * `[a-z0-9]*-?[a-z0-9]*-?[a-z0-9]*` is 3. A key of n such characters that then fails can be split among d of them in
 * about n^d ways, and a backtracking matcher tries each: a 121-character key held the loop 4.4 s at degree 5. 1 for
 * a pattern without such a chain (0 without any unbounded repeat), `undefined` when the pattern is not read. A
 * sufficient test, not a complete one: chains through groups and alternatives are followed only inside them, and
 * exponential ambiguity is {@link exponentialBacktracking}'s.
 */
export function polynomialDegree(source: string): number | undefined {
  return analysed(source, degreeOf);
}

/** {@link polynomialDegree} of a parsed node: its sequences' longest chain, or a nested one's. */
function degreeOf(node: Node): number {
  switch (node.type) {
    case 'alternative':
      return chainDegree(node.body as Node[]);
    case 'disjunction':
      return Math.max(0, ...(node.body as Node[]).map(degreeOf));
    case 'group':
      return chainDegree(node.body as Node[]);
    case 'quantifier':
      return Math.max(isUnboundedCharacter(node) ? 1 : 0, degreeOf(node.body[0]!));
    default:
      return 0;
  }
}

/**
 * How wide a bounded repeat (`{0,n}`) may be and still not count as unbounded: past it, `[a-z]{0,2000}` splits a long
 * key as many ways as `[a-z]*` does (three such in a row held the loop 12 s on a 6,000-character key); within it,
 * a chain of them is bounded by its own widths whatever the key (`{1,64}` three times: 64^3 ways, about 1 ms).
 */
const WIDE_REPEAT = 64;

/**
 * The longest chain of unbounded one-character repeats in `terms` that share a character, with only optional parts
 * (another repeat that shares nothing with the chain included) between them. A group that is neither repeated nor a
 * lookaround is part of the sequence it stands in.
 */
function chainDegree(terms: readonly Node[]): number {
  const flat = inline(terms);
  let best = 0;
  for (const term of flat) best = Math.max(best, degreeOf(term));
  for (let i = 0; i < flat.length; i++) {
    if (!isUnboundedCharacter(flat[i]!)) continue;
    let shared = charRanges((flat[i] as Extract<Node, { type: 'quantifier' }>).body[0]!);
    let chain = 1;
    for (let j = i + 1; j < flat.length; j++) {
      const term = flat[j]!;
      const common = isUnboundedCharacter(term) ? intersection(shared, charRanges((term as Extract<Node, { type: 'quantifier' }>).body[0]!)) : [];
      if (common.length > 0) {
        chain += 1;
        shared = common;
      } else if (!nullable(term)) {
        break;
      }
    }
    best = Math.max(best, chain);
  }
  return best;
}

/** `terms` with each plain group (not repeated, not a lookaround, one alternative) replaced by its own terms. */
function inline(terms: readonly Node[]): Node[] {
  const out: Node[] = [];
  for (const term of terms) {
    const body = term.type === 'group' && (term.behavior === 'normal' || term.behavior === 'ignore') ? (term.body as Node[]) : undefined;
    if (body !== undefined && !(body.length === 1 && body[0]!.type === 'disjunction')) out.push(...inline(body));
    else out.push(term);
  }
  return out;
}

/** A one-character repeat without an upper bound (`[a-z]*`, `\d+`), or with a wide one (`[a-z]{0,2000}`, see {@link WIDE_REPEAT}). */
function isUnboundedCharacter(node: Node): boolean {
  return node.type === 'quantifier' && (node.max === undefined || node.max - node.min > WIDE_REPEAT) && isCharacter(node.body[0]!);
}

/** Whether `node` can read nothing (an optional part, an assertion): a chain of repeats goes on across it. */
function nullable(node: Node): boolean {
  switch (node.type) {
    case 'anchor':
      return true;
    case 'quantifier':
      return node.min === 0 || nullable(node.body[0]!);
    case 'group':
      return node.behavior !== 'normal' && node.behavior !== 'ignore' ? true : (node.body as Node[]).every(nullable);
    case 'alternative':
      return (node.body as Node[]).every(nullable);
    case 'disjunction':
      return (node.body as Node[]).some(nullable);
    default:
      return false;
  }
}

/** The code units a one-character node reads. */
function charRanges(node: Node): Ranges {
  switch (node.type) {
    case 'value':
      return node.codePoint <= MAX_UNIT ? [[node.codePoint, node.codePoint]] : [[0xd800, 0xdfff]];
    case 'dot':
      return complement(LINE_TERMINATORS);
    case 'characterClassEscape':
      return classEscape(node.value);
    case 'characterClass':
      return classRanges(node);
    default:
      throw new Unanalyzable();
  }
}
