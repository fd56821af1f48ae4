/**
 * Reads PostgreSQL's text form of a node tree (`nodeToString`, what `debug_print_parse` logs):
 * `{QUERY :commandType 1 :rtable ({RANGETBLENTRY ...}) ...}`. The describer asks the server for
 * the parse tree of each statement this way, so nullability is decided on the server's own
 * analysis of the SQL (names resolved, `*` expanded, joins known), never on a parser of ours.
 */

/** A node: its tag (`QUERY`, `VAR`, ...) and its fields by name (without the colon). */
export interface PgNode {
  /** The node's tag, as `nodeToString` writes it (`VAR`, `TARGETENTRY`, ...). */
  tag: string;
  /** The fields, by name without the leading colon (read them with {@link field}). */
  fields: Record<string, PgValue>;
}

/**
 * A field's value: `null` for `<>`, a token (numbers and booleans stay text; a quoted string
 * has its quotes removed), a list, or a node.
 */
export type PgValue = null | string | PgValue[] | PgNode;

/** Thrown for text that is not a node tree; the describer then proves nothing non-null. */
export class NodeTreeError extends Error {
  /** The message says what was expected and where. */
  constructor(message: string) {
    super(message);
    this.name = "NodeTreeError";
  }
}

const SPACE = 32, TAB = 9, LF = 10, CR = 13, BACKSLASH = 92, QUOTE = 34, OPEN_BRACKET = 91;
const OPEN_PAREN = 40, CLOSE_PAREN = 41, OPEN_BRACE = 123, CLOSE_BRACE = 125;

function isSpace(c: number): boolean {
  return c === SPACE || c === LF || c === TAB || c === CR;
}

/** Whether the character code ends a word (whitespace or a delimiter). */
function endsWord(c: number): boolean {
  return isSpace(c) || c === OPEN_PAREN || c === CLOSE_PAREN || c === OPEN_BRACE ||
    c === CLOSE_BRACE;
}

/**
 * Reads the text as the server's `pg_strtok` splits it: words between whitespace and unescaped
 * `(){}`. A tree is kilobytes per statement and the describer reads hundreds at once, so words
 * are sliced out of the text where they lie, and no token objects are made.
 */
class Reader {
  readonly #text: string;
  #at = 0;
  /** Whether the last word read was written in double quotes. */
  quoted = false;
  /** Whether the last word read held an escape (then it is text, never `<>`, the null). */
  escaped = false;

  constructor(text: string) {
    this.#text = text;
  }

  /** The code of the next character that is not whitespace (-1 at the end), not consumed. */
  peek(): number {
    const t = this.#text;
    while (this.#at < t.length && isSpace(t.charCodeAt(this.#at))) this.#at++;
    return this.#at < t.length ? t.charCodeAt(this.#at) : -1;
  }

  /** Consumes the delimiter `peek()` saw. */
  skip(): void {
    this.#at++;
  }

  /** Whether the next word is the single character `c` (a list's kind, a datum's bracket). */
  nextIsLone(c: number): boolean {
    const t = this.#text;
    return this.peek() === c &&
      (this.#at + 1 >= t.length || endsWord(t.charCodeAt(this.#at + 1)));
  }

  /** Reads a word (escapes resolved; a quoted one without its quotes). */
  word(): string {
    const t = this.#text;
    const first = this.peek();
    if (first === -1) throw new NodeTreeError("the node tree ends too early");
    const start = this.#at;
    let escaped = false;
    while (this.#at < t.length) {
      const c = t.charCodeAt(this.#at);
      if (c === BACKSLASH && this.#at + 1 < t.length) {
        escaped = true;
        this.#at += 2;
      } else if (endsWord(c)) break;
      else this.#at++;
    }
    let w = t.slice(start, this.#at);
    this.escaped = escaped;
    if (escaped) w = w.replace(/\\(.)/gs, "$1");
    this.quoted = first === QUOTE && w.length >= 2 && w.endsWith('"');
    return this.quoted ? w.slice(1, -1) : w;
  }

  /** Whether every character was read. */
  get done(): boolean {
    return this.peek() === -1;
  }
}

/**
 * PostgreSQL 13 and 14 wrote some tags shorter than the node's name; 15 and later write the
 * name. The reader gives every tree the later tags, so nothing else needs to know.
 */
const LATER_TAGS: Record<string, string> = {
  RTE: "RANGETBLENTRY",
  COALESCE: "COALESCEEXPR",
  CASE: "CASEEXPR",
  WHEN: "CASEWHEN",
  ARRAY: "ARRAYEXPR",
  ROW: "ROWEXPR",
  COLLATE: "COLLATEEXPR",
};

/** Parses one node tree (the whole text). */
export function parseNodeTree(text: string): PgNode {
  const r = new Reader(text);

  const value = (): PgValue => {
    const c = r.peek();
    if (c === OPEN_BRACE) {
      r.skip();
      return node();
    }
    if (c === OPEN_PAREN) {
      r.skip();
      return list();
    }
    if (c === CLOSE_BRACE || c === CLOSE_PAREN) {
      throw new NodeTreeError(`unexpected "${String.fromCharCode(c)}"`);
    }
    const w = r.word();
    if (!r.quoted && !r.escaped && w === "<>") return null;
    // A Const's datum: its length, then its bytes in brackets (`4 [ 1 0 0 0 ]`).
    if (!r.quoted && r.nextIsLone(OPEN_BRACKET)) {
      while (r.word() !== "]") { /* the bytes say nothing the describer needs */ }
    }
    return w;
  };

  const list = (): PgValue[] => {
    const items: PgValue[] = [];
    // Integer, OID, XID lists and bitmapsets start with a bare letter that is not an item.
    if (r.nextIsLone(105) || r.nextIsLone(111) || r.nextIsLone(98) || r.nextIsLone(120)) r.word();
    for (;;) {
      const c = r.peek();
      if (c === -1) throw new NodeTreeError("a list is not closed");
      if (c === CLOSE_PAREN) {
        r.skip();
        return items;
      }
      items.push(value());
    }
  };

  const node = (): PgNode => {
    const written = r.word();
    const tag = Object.hasOwn(LATER_TAGS, written) ? LATER_TAGS[written] : written;
    // A plain object: one per node of hundreds of trees, and cheaper than a Map to fill.
    const fields: Record<string, PgValue> = {};
    for (;;) {
      const c = r.peek();
      if (c === CLOSE_BRACE) {
        r.skip();
        return { tag, fields };
      }
      if (c === -1) throw new NodeTreeError(`${tag} is not closed`);
      const name = r.word();
      if (r.quoted || !name.startsWith(":")) {
        throw new NodeTreeError(`expected a field of ${tag}, got "${name}"`);
      }
      fields[name.slice(1)] = value();
    }
  };

  if (r.peek() !== OPEN_BRACE) throw new NodeTreeError("a node tree starts with {");
  r.skip();
  const root = node();
  if (!r.done) throw new NodeTreeError("text follows the node tree");
  return root;
}

/** `value` when it is a node (of tag `tag`, when given), else undefined. */
export function asNode(value: PgValue | undefined, tag?: string): PgNode | undefined {
  if (value === null || value === undefined || typeof value === "string") return undefined;
  if (Array.isArray(value)) return undefined;
  return tag === undefined || value.tag === tag ? value : undefined;
}

/** The nodes of a list field (an absent or null list is empty). */
export function nodeList(value: PgValue | undefined): PgNode[] {
  if (!Array.isArray(value)) return [];
  return value.filter((v): v is PgNode => asNode(v) !== undefined);
}

/** A field of `node` (undefined when the node has no such field). */
export function field(node: PgNode, name: string): PgValue | undefined {
  return Object.hasOwn(node.fields, name) ? node.fields[name] : undefined;
}

/** A field of `node` as a node, when it is one. */
export function child(node: PgNode, name: string, tag?: string): PgNode | undefined {
  return asNode(field(node, name), tag);
}

/** A field of `node` as an integer (NaN when absent or not a number). */
export function int(node: PgNode, name: string): number {
  const v = field(node, name);
  return typeof v === "string" ? Number(v) : NaN;
}

/** A field of `node` as its token text (undefined when absent, null or not a token). */
export function text(node: PgNode, name: string): string | undefined {
  const v = field(node, name);
  return typeof v === "string" ? v : undefined;
}
