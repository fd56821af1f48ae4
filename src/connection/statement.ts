/**
 * Prepared statements and the per-connection cache of them.
 *
 * A statement is created the moment a query first needs it and is used by
 * later queries at once, before its Parse has even been answered: pipelining
 * means never waiting for a round trip. The cache is LRU-bounded; evicted
 * statements are closed on the server in the same write as the next query.
 */
import type { Column } from "../protocol/backend.ts";
import type { PostgresError } from "../errors.ts";
import { type DecodeOptions, decoderFor, type TextDecoderFn } from "../types/text_decoders.ts";
import { type ByteDecoderFn, byteDecoderFor } from "../types/byte_decoders.ts";
import { binaryDecoderFor } from "../types/binary_decoders.ts";

/** Makes a row object from decoded column values. */
export type RowConstructor = new (values: unknown[]) => Record<string, unknown>;

const emptyRow = function () {} as unknown as RowConstructor;

/**
 * A constructor that assigns every column in order. V8 then gives all rows of
 * a statement one shape with in-object fields, allocated once at the right
 * size: about three times faster than adding properties to `{}` one by one.
 * Its prototype is Object.prototype, so rows are plain objects.
 */
function rowConstructor(keys: readonly string[]): RowConstructor {
  // One constructor per column list, shared by every statement and connection: generating it
  // costs a compile (the unnamed statements of prepare: false and of the simple protocol are
  // described on every query), and rows of one shape then share one hidden class, so code that
  // reads them stays monomorphic across a pool's connections.
  const signature = JSON.stringify(keys);
  let ctor = rowConstructors.get(signature);
  if (ctor === undefined) {
    if (rowConstructors.size >= MAX_ROW_CONSTRUCTORS) rowConstructors.clear();
    ctor = makeRowConstructor(keys);
    rowConstructors.set(signature, ctor);
  }
  return ctor;
}

/** Generated row constructors by JSON column list; cleared when it reaches the bound. */
const rowConstructors = new Map<string, RowConstructor>();
const MAX_ROW_CONSTRUCTORS = 2000;

function makeRowConstructor(keys: readonly string[]): RowConstructor {
  if (keys.includes("__proto__")) return dynamicRow(keys); // assignment would set the prototype
  const body = keys.map((k, i) => `this[${JSON.stringify(k)}]=v[${i}];`).join("");
  try {
    const ctor = new Function("v", body) as unknown as RowConstructor;
    ctor.prototype = Object.prototype;
    return ctor;
  } catch {
    return dynamicRow(keys); // code generation disallowed (a restrictive embedder)
  }
}

function dynamicRow(keys: readonly string[]): RowConstructor {
  return function (values: unknown[]) {
    const row: Record<string, unknown> = {};
    for (let i = 0; i < keys.length; i++) {
      Object.defineProperty(row, keys[i], {
        value: values[i],
        enumerable: true,
        writable: true,
        configurable: true,
      });
    }
    return row;
  } as unknown as RowConstructor;
}

/** A statement's text, parameter types and (once described) its result shape. */
export class Statement {
  /** Server-side name; "" for the unnamed statement. */
  readonly name: string;
  /** The SQL text. */
  readonly text: string;
  /** Parameter type OIDs sent with Parse (0: let the server infer). */
  readonly types: readonly number[];
  /** Result columns, known once RowDescription (or NoData: empty) arrives. */
  columns: Column[] | null = null;
  /** Parameter types as the server resolved them. */
  parameterTypes: number[] | null = null;
  /** Column names used as row keys. */
  keys: string[] = [];
  /** Per-column text decoders; null keeps the string. */
  decoders: (TextDecoderFn | null)[] = [];
  /** Per-column decoders that read the bytes directly (no string made); null: use `decoders`. */
  byteDecoders: (ByteDecoderFn | null)[] = [];
  /**
   * Result format codes for Bind once the columns are known: 1 (binary) where the binary form
   * decodes to the same value for less work, else 0. Empty while every column is text.
   */
  formats: number[] = [];
  /** Per-column decoders for a result bound with `formats`: binary ones, else `byteDecoders`. */
  binaryDecoders: (ByteDecoderFn | null)[] = [];
  /** Builds an object row from the decoded values (generated once the columns are known). */
  Row: RowConstructor = emptyRow;
  /** Maps each finished row (the `transform.row` option), or null. */
  rowTransform: ((row: unknown) => unknown) | null = null;
  /**
   * The client's parsers map when the decoders were picked. A change to `sql.options.parsers`
   * swaps that map, so a cached statement whose map is no longer the client's is described
   * again (from its known columns, no round trip) before its next use.
   */
  describedWith: DecodeOptions["parsers"] = undefined;
  /** The options the decoders were picked with (see `sameShape`). */
  describedFor: DecodeOptions | null = null;
  /** Set when Parse failed, so queries that relied on it report the real cause. */
  error: PostgresError | null = null;
  /** The cache's clock at its last use, for least-recently-used eviction. */
  used = 0;

  constructor(name: string, text: string, types: readonly number[]) {
    this.name = name;
    this.text = text;
    this.types = types;
  }

  /** The SQL text under postgres.js's name (results show their statement). */
  get string(): string {
    return this.text;
  }

  /**
   * Whether `other` was described with these columns (the same array: rowDescription gives it
   * again for the same bytes) and options, so its decoders serve this statement as they are.
   */
  sameShape(other: Statement, columns: Column[], options: DecodeOptions): boolean {
    return other.columns === columns && other.describedFor === options &&
      other.describedWith === options.parsers;
  }

  /** Takes `other`'s description (see `sameShape`): no names to map, no decoders to pick. */
  adopt(other: Statement): void {
    this.columns = other.columns;
    this.keys = other.keys;
    this.rowTransform = other.rowTransform;
    this.Row = other.Row;
    this.describedFor = other.describedFor;
    this.describedWith = other.describedWith;
    this.decoders = other.decoders;
    this.byteDecoders = other.byteDecoders;
    this.binaryDecoders = other.binaryDecoders;
    this.formats = other.formats;
  }

  /**
   * Records the result shape and picks a decoder for each column. Naming the columns runs the
   * user's `transform.column.from`; if it throws, the statement is left as it was.
   */
  describe(columns: Column[], options: DecodeOptions): void {
    const rename = options.column;
    const keys = columns.map((c) => rename === undefined ? c.name : rename(c.name));
    this.columns = columns;
    this.keys = keys;
    this.describedFor = options;
    this.rowTransform = options.row ?? null;
    this.Row = rowConstructor(keys);
    this.pickDecoders(columns, options);
  }

  /**
   * Picks each column's decoders and the result formats (again, after `sql.options.parsers`
   * changed). The lists are new arrays each time: a query bound with the old ones keeps them.
   */
  pickDecoders(columns: Column[], options: DecodeOptions): void {
    this.describedWith = options.parsers;
    const n = columns.length;
    const decoders = new Array<TextDecoderFn | null>(n);
    const byteDecoders = new Array<ByteDecoderFn | null>(n);
    const binaryDecoders = new Array<ByteDecoderFn | null>(n);
    const formats: number[] = new Array(n).fill(0);
    let binary = false;
    const custom = options.parsers;
    const value = options.value;
    for (let i = 0; i < n; i++) {
      const column = columns[i];
      const type = column.type;
      const customDecode = custom?.get(type);
      // Reading the bytes directly is only equivalent when nothing else wants the text.
      byteDecoders[i] = customDecode === undefined && value === undefined
        ? byteDecoderFor(type)
        : null;
      let decode = customDecode ?? decoderFor(type, options);
      if (value !== undefined) {
        const inner = decode;
        decode = inner === null
          ? (text: string) => value(text, column)
          : (text: string) => value(inner(text), column);
      }
      decoders[i] = decode;
      const fromBinary = customDecode === undefined ? binaryDecoderFor(type) : null;
      if (fromBinary !== null) {
        formats[i] = 1;
        binary = true;
        binaryDecoders[i] = value === undefined
          ? fromBinary
          : (buf, start, end) => value(fromBinary(buf, start, end), column);
      } else binaryDecoders[i] = byteDecoders[i];
    }
    this.decoders = decoders;
    this.byteDecoders = byteDecoders;
    this.binaryDecoders = binaryDecoders;
    this.formats = binary ? formats : [];
  }
}

/** 64 random bits in base 36: what sets a cache's statement names apart from others'. */
function randomTag(): string {
  const [a, b] = crypto.getRandomValues(new Uint32Array(2));
  return a.toString(36) + b.toString(36);
}

/**
 * An LRU cache of named statements keyed by text and parameter types. A lookup only stamps the
 * statement with a clock (it runs once per query); the rare eviction scans for the oldest stamp.
 */
export class StatementCache {
  #map = new Map<string, Statement>();
  /**
   * Each cache names its statements apart from every other connection's (as postgres.js does):
   * behind a pooler that moves sessions between server connections, a Bind to a name another
   * client prepared there would run that client's statement; a name of its own is not found
   * there (26000), which the retry and `force_prepare` handle.
   */
  readonly #prefix = `pgpipe_${randomTag()}_`;
  #next = 0;
  #clock = 0;
  #max: number;
  /** Statements evicted but not yet closed on the server. */
  readonly evicted: Statement[] = [];
  /**
   * The unnamed statement described last on this connection: the next one described with the
   * same columns takes its decoders (Statement.adopt) instead of picking them again.
   */
  unnamed: Statement | null = null;

  constructor(max: number) {
    this.#max = max;
  }

  /** The cache key: text alone when every type is inferred, which is the common case. */
  static key(text: string, types: readonly number[]): string {
    for (let i = 0; i < types.length; i++) {
      if (types[i] !== 0) return text + "\0" + types.join(",");
    }
    return text;
  }

  /** Finds a statement and marks it most recently used. */
  get(key: string): Statement | undefined {
    const st = this.#map.get(key);
    if (st !== undefined) st.used = ++this.#clock;
    return st;
  }

  /** Creates and caches a new named statement, evicting the least recently used past the bound. */
  create(key: string, text: string, types: readonly number[]): Statement {
    const st = new Statement(this.#prefix + (this.#next++).toString(36), text, types);
    st.used = ++this.#clock;
    this.#map.set(key, st);
    if (this.#map.size > this.#max) {
      let oldestKey = "";
      let oldest: Statement | null = null;
      for (const [k, candidate] of this.#map) {
        if (oldest === null || candidate.used < oldest.used) {
          oldestKey = k;
          oldest = candidate;
        }
      }
      this.#map.delete(oldestKey);
      this.evicted.push(oldest!);
    }
    return st;
  }

  /** Forgets a statement (failed Parse, or stale); true if it was cached. */
  forget(key: string, st: Statement): boolean {
    if (this.#map.get(key) !== st) return false;
    this.#map.delete(key);
    return true;
  }

  /** Number of cached statements. */
  get size(): number {
    return this.#map.size;
  }
}
