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
  /** The fields, by name without the leading colon. */
  fields: Map<string, PgValue>;
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

/** A token of the text: its characters (escapes resolved) and whether it was written bare. */
interface Token {
  text: string;
  /** A `(`, `)`, `{`, `}` that delimits, not an escaped character. */
  delimiter: boolean;
  /** Written as `"..."` (a String node, or a name in a list of names). */
  quoted: boolean;
}

const SPACE = 32, TAB = 9, LF = 10, CR = 13, BACKSLASH = 92, QUOTE = 34;
const OPEN_PAREN = 40, CLOSE_PAREN = 41, OPEN_BRACE = 123, CLOSE_BRACE = 125;

/** Whether the character code ends a token (whitespace or a delimiter). */
function endsToken(c: number): boolean {
  return c === SPACE || c === LF || c === TAB || c === CR || c === OPEN_PAREN ||
    c === CLOSE_PAREN || c === OPEN_BRACE || c === CLOSE_BRACE;
}

/**
 * Splits the text as the server's `pg_strtok` does: at whitespace and unescaped `(){}`. A tree
 * is kilobytes per statement, so a token is sliced out whole unless it holds an escape.
 */
function tokenize(text: string): Token[] {
  const out: Token[] = [];
  const n = text.length;
  let i = 0;
  while (i < n) {
    const c = text.charCodeAt(i);
    if (c === SPACE || c === LF || c === TAB || c === CR) {
      i++;
      continue;
    }
    if (c === OPEN_PAREN || c === CLOSE_PAREN || c === OPEN_BRACE || c === CLOSE_BRACE) {
      out.push({ text: text[i], delimiter: true, quoted: false });
      i++;
      continue;
    }
    const start = i;
    let escaped = false;
    while (i < n) {
      const d = text.charCodeAt(i);
      if (d === BACKSLASH && i + 1 < n) {
        escaped = true;
        i += 2;
      } else if (endsToken(d)) break;
      else i++;
    }
    let s = text.slice(start, i);
    if (escaped) s = s.replace(/\\(.)/gs, "$1");
    if (c === QUOTE && s.length >= 2 && s.endsWith('"')) {
      out.push({ text: s.slice(1, -1), delimiter: false, quoted: true });
    } else out.push({ text: s, delimiter: false, quoted: false });
  }
  return out;
}

/** Parses one node tree (the whole text). */
export function parseNodeTree(text: string): PgNode {
  const tokens = tokenize(text);
  let at = 0;

  const peek = (): Token | undefined => tokens[at];
  const next = (): Token => {
    const t = tokens[at++];
    if (t === undefined) throw new NodeTreeError("the node tree ends too early");
    return t;
  };

  const value = (): PgValue => {
    const t = next();
    if (t.delimiter && t.text === "{") return node();
    if (t.delimiter && t.text === "(") return list();
    if (t.delimiter) throw new NodeTreeError(`unexpected "${t.text}" at token ${at - 1}`);
    if (!t.quoted && t.text === "<>") return null;
    // A Const's datum: its length, then its bytes in brackets (`4 [ 1 0 0 0 ]`).
    const after = peek();
    if (!t.quoted && after !== undefined && !after.delimiter && after.text === "[") {
      while (next().text !== "]") { /* the bytes say nothing the describer needs */ }
    }
    return t.text;
  };

  const list = (): PgValue[] => {
    const items: PgValue[] = [];
    const first = peek();
    // Integer, OID, XID lists and bitmapsets start with a bare letter that is not an item.
    if (
      first !== undefined && !first.delimiter && !first.quoted &&
      (first.text === "i" || first.text === "o" || first.text === "b" || first.text === "x")
    ) at++;
    for (;;) {
      const t = peek();
      if (t === undefined) throw new NodeTreeError("a list is not closed");
      if (t.delimiter && t.text === ")") {
        at++;
        return items;
      }
      items.push(value());
    }
  };

  const node = (): PgNode => {
    const tag = next();
    if (tag.delimiter) throw new NodeTreeError(`a node has no tag at token ${at - 1}`);
    const fields = new Map<string, PgValue>();
    for (;;) {
      const t = next();
      if (t.delimiter && t.text === "}") return { tag: tag.text, fields };
      if (t.delimiter || !t.text.startsWith(":")) {
        throw new NodeTreeError(`expected a field of ${tag.text}, got "${t.text}"`);
      }
      fields.set(t.text.slice(1), value());
    }
  };

  const first = next();
  if (!(first.delimiter && first.text === "{")) {
    throw new NodeTreeError("a node tree starts with {");
  }
  const root = node();
  if (at !== tokens.length) throw new NodeTreeError("text follows the node tree");
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

/** A field of `node` as a node, when it is one. */
export function child(node: PgNode, field: string, tag?: string): PgNode | undefined {
  return asNode(node.fields.get(field), tag);
}

/** A field of `node` as an integer (NaN when absent or not a number). */
export function int(node: PgNode, field: string): number {
  const v = node.fields.get(field);
  return typeof v === "string" ? Number(v) : NaN;
}

/** A field of `node` as its token text (undefined when absent, null or not a token). */
export function text(node: PgNode, field: string): string | undefined {
  const v = node.fields.get(field);
  return typeof v === "string" ? v : undefined;
}
