/**
 * postgres.js's `sql.options.parsers` and `sql.options.serializers`: plain objects keyed by type
 * OID, which programs change after the client is made (Drizzle's driver replaces the date/time
 * parsers with the identity to get the server's text, and the json serializers to send its own).
 *
 * Each table starts with pgpipe's own handler for every OID it decodes or serialises by itself
 * (the OIDs postgres.js's defaults cover, every built-in array type, `int8` with `bigint`), plus
 * the `types` option's; `fetch_types` adds the array types of user-defined types. pgpipe's own
 * handlers are never called through the table: decoding keeps its fast paths (binary columns,
 * bytes read in place). Only the OIDs whose entry differs from pgpipe's own are compiled into the
 * maps the connections read (`decode.parsers`, the query config's serializers), rebuilt on every
 * change, so a client whose tables nobody touched pays nothing.
 */
import { parseArrayLiteral } from "../types/array_literal.ts";
import { elementOf, Oid } from "../types/oids.ts";
import { serialize, type Serializer } from "../types/encode.ts";
import { decoderFor, type TextDecoderFn } from "../types/text_decoders.ts";

/**
 * `sql.options.parsers`: a result decoder by type OID, called with the server's text of each
 * non-null value. postgres.js's shape: a handler whose `array` property is `true` gets the text
 * without its first character (postgres.js's array parsers do).
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 *
 * await using sql = postgres();
 * sql.options.parsers[1700] = (text: string) => Number(text); // numeric as a number
 * ```
 */
export type ParserTable = Record<number, (text: string) => unknown>;

/**
 * `sql.options.serializers`: a parameter serializer by type OID, returning the text sent.
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 *
 * await using sql = postgres();
 * sql.options.serializers[1184] = (d: Date) => d.toISOString(); // timestamptz parameters
 * ```
 */
export type SerializerTable = Record<number, (value: any) => unknown>;

/** Where a change to a table goes: the compiled maps the connections and queries read. */
export interface HandlerSink {
  /** The parsers that differ from pgpipe's own (undefined: none). */
  parsers(map: ReadonlyMap<number, TextDecoderFn> | undefined): void;
  /** The serializers that differ from pgpipe's own (null: none). */
  serializers(map: ReadonlyMap<number, Serializer> | null): void;
}

/** The OIDs postgres.js's default serializers cover (its `types`: string, number, json, ...). */
const SERIALIZED = [
  0,
  Oid.text,
  Oid.int2,
  Oid.int4,
  Oid.oid,
  Oid.float4,
  Oid.float8,
  Oid.json,
  Oid.jsonb,
  Oid.bool,
  Oid.timestamptz,
  Oid.date,
  Oid.timestamp,
  Oid.bytea,
];

/** pgpipe's serialisation of a value, as a table entry (what users who call it get). */
const serializeValue: Serializer = (value) => serialize(value);

/** json and jsonb: JSON text, even for a string (pgpipe's and postgres.js's json rule). */
const serializeJson: Serializer = (value) => JSON.stringify(value);

/** What a missing serializer does in postgres.js: `'' + value`. */
const stringOf: Serializer = (value) => "" + value;

/** What a missing parser does: the server's text as it is. */
const keepText: TextDecoderFn = (text) => text;

/** An OID as a property key: the canonical decimal form of an unsigned 32-bit integer. */
function oidOf(key: string | symbol): number | null {
  if (typeof key !== "string") return null;
  const n = Number(key);
  return Number.isInteger(n) && n >= 0 && n <= 0xffffffff && String(n) === key ? n : null;
}

/** A handler table's validation: keys are OIDs, values functions (or undefined: none). */
function checkEntry(table: string, key: string | symbol, value: unknown): void {
  if (oidOf(key) === null) {
    throw new TypeError(`sql.options.${table}: ${String(key)} is not a type OID`);
  }
  if (value !== undefined && value !== null && typeof value !== "function") {
    throw new TypeError(`sql.options.${table}[${String(key)}] must be a function`);
  }
}

/** A user parser as the connections call it: postgres.js's `array` parsers skip the `{`. */
function asDecoder(fn: (text: string) => unknown): TextDecoderFn {
  return (fn as { array?: unknown }).array === true ? (text) => fn(text.slice(1)) : fn;
}

/**
 * A table object behind a Proxy that validates each write and calls `changed` after it; it
 * behaves as a plain object otherwise (keys, spread, `in`, delete).
 */
function liveTable<T extends object>(name: string, target: T, changed: () => void): T {
  return new Proxy(target, {
    set(t, key, value) {
      checkEntry(name, key, value);
      (t as Record<string, unknown>)[key as string] = value;
      changed();
      return true;
    },
    defineProperty(t, key, descriptor) {
      checkEntry(name, key, descriptor.value);
      if (descriptor.get !== undefined || descriptor.set !== undefined) {
        throw new TypeError(`sql.options.${name}[${String(key)}] must be a function`);
      }
      const ok = Reflect.defineProperty(t, key, descriptor);
      changed();
      return ok;
    },
    deleteProperty(t, key) {
      const ok = Reflect.deleteProperty(t, key);
      changed();
      return ok;
    },
  });
}

/**
 * A client's two live tables and what they compile to. The tables are filled on first use (a read
 * of `sql.options.parsers` or `serializers`, the `types` option, array types `fetch_types` found):
 * untouched, they compile to nothing, so a client that never looks at them never builds them.
 */
export class TypeHandlers {
  #parserTarget: ParserTable = {};
  #serializerTarget: SerializerTable = {};
  /** The two tables behind their Proxies, once filled. */
  #live: { parsers: ParserTable; serializers: SerializerTable } | null = null;
  /** pgpipe's own parser of each OID it decodes by itself: skipped when compiling. */
  #ownParsers = new Map<number, TextDecoderFn>();
  #ownSerializers = new Map<number, Serializer>();
  /** Array entries pgpipe made (built-in and fetch_types'): element and delimiter, by array OID. */
  #arrays = new Map<number, { element: number; delimiter: string; parse: TextDecoderFn }>();
  #sink: HandlerSink;
  #bigint: boolean;

  constructor(
    options: {
      bigint: boolean;
      parsers?: ReadonlyMap<number, TextDecoderFn>;
      serializers?: ReadonlyMap<number, Serializer> | null;
    },
    sink: HandlerSink,
  ) {
    this.#sink = sink;
    this.#bigint = options.bigint;
    if ((options.parsers?.size ?? 0) > 0 || (options.serializers?.size ?? 0) > 0) {
      this.#fill();
      for (const [oid, fn] of options.parsers ?? []) this.#parserTarget[oid] = fn;
      for (const [oid, fn] of options.serializers ?? []) this.#serializerTarget[oid] = fn;
      this.#compileParsers();
      this.#compileSerializers();
    } else {
      // What the untouched tables compile to: no parser or serializer differs from pgpipe's own.
      sink.parsers(undefined);
      sink.serializers(null);
    }
  }

  /** `sql.options.parsers`. */
  get parsers(): ParserTable {
    return this.#fill().parsers;
  }

  /** `sql.options.serializers`. */
  get serializers(): SerializerTable {
    return this.#fill().serializers;
  }

  /**
   * The tables, filled the first time they are needed: pgpipe's own handler for every OID it
   * decodes or serialises by itself (postgres.js's default OIDs, every built-in array type,
   * `int8` with `bigint`). Filling changes no compiled map: pgpipe's own entries compile to none.
   */
  #fill(): { parsers: ParserTable; serializers: SerializerTable } {
    if (this.#live !== null) return this.#live;
    const decode = { bigint: this.#bigint };
    for (const oid of [Oid.bool, Oid.bytea, Oid.int2, Oid.int4, Oid.oid, Oid.float4, Oid.float8]) {
      this.#ownParser(oid, decoderFor(oid, decode)!);
    }
    for (const oid of [Oid.json, Oid.jsonb, Oid.date, Oid.timestamp, Oid.timestamptz]) {
      this.#ownParser(oid, decoderFor(oid, decode)!);
    }
    if (this.#bigint) this.#ownParser(Oid.int8, decoderFor(Oid.int8, decode)!);
    for (const oid of SERIALIZED) {
      const fn = oid === Oid.json || oid === Oid.jsonb ? serializeJson : serializeValue;
      this.#ownSerializers.set(oid, fn);
      this.#serializerTarget[oid] = fn;
    }
    for (const key of Object.keys(elementOf)) {
      const array = Number(key);
      const element = elementOf[array];
      this.#ownParser(array, decoderFor(array, decode)!);
      this.#arrays.set(array, {
        element,
        delimiter: element === Oid.box ? ";" : ",",
        parse: this.#parserTarget[array],
      });
      this.#ownSerializers.set(array, serializeValue);
      this.#serializerTarget[array] = serializeValue;
    }
    return this.#live = {
      parsers: liveTable("parsers", this.#parserTarget, () => this.#compileParsers()),
      serializers: liveTable(
        "serializers",
        this.#serializerTarget,
        () => this.#compileSerializers(),
      ),
    };
  }

  #ownParser(oid: number, fn: TextDecoderFn): void {
    this.#ownParsers.set(oid, fn);
    this.#parserTarget[oid] = fn;
  }

  /**
   * Replaces a table's contents (`sql.options.parsers = {...}`); an invalid entry changes
   * nothing.
   */
  replace(table: "parsers" | "serializers", entries: unknown): void {
    if (typeof entries !== "object" || entries === null) {
      throw new TypeError(`sql.options.${table} must be an object of handlers by type OID`);
    }
    const own = Object.entries(entries);
    for (const [key, value] of own) checkEntry(table, key, value);
    this.#fill();
    const target: Record<string, unknown> = table === "parsers"
      ? this.#parserTarget
      : this.#serializerTarget;
    for (const key of Object.getOwnPropertyNames(target)) Reflect.deleteProperty(target, key);
    for (const [key, value] of own) target[key] = value;
    if (table === "parsers") this.#compileParsers();
    else this.#compileSerializers();
  }

  /**
   * `fetch_types`: an array decoder for each (element, array, delimiter) of a user-defined type,
   * unless the table already has an entry for the array (the user's own wins).
   */
  addArrayTypes(rows: readonly { element: number; array: number; delimiter: string }[]): void {
    if (rows.length === 0) return;
    // No need to fill the tables first: a user type's array OID is none of pgpipe's own, and the
    // entries compile the same either way (filling later keeps them).
    let added = false;
    for (const { element, array, delimiter } of rows) {
      if (this.#parserTarget[array] !== undefined) continue;
      const parse: TextDecoderFn = (text) =>
        parseArrayLiteral(text, this.#effective(element), delimiter);
      this.#arrays.set(array, { element, delimiter, parse });
      this.#parserTarget[array] = parse;
      if (this.#serializerTarget[array] === undefined) {
        this.#serializerTarget[array] = serializeValue;
      }
      added = true;
    }
    if (added) this.#compileParsers();
  }

  /** What decodes `oid` now: the compiled map's entry, else pgpipe's own (null: the string). */
  #effective(oid: number): TextDecoderFn | null {
    return this.#compiled?.get(oid) ?? decoderFor(oid, { bigint: this.#bigint });
  }

  #compiled: Map<number, TextDecoderFn> | undefined = undefined;

  /**
   * The parsers that differ from pgpipe's own: entries the user set, own ones deleted (then the
   * text is kept), and arrays whose element has a parser of its own (postgres.js's fetch_types
   * builds an array's parser over its element's).
   */
  #compileParsers(): void {
    const table = this.#parserTarget;
    const map = new Map<number, TextDecoderFn>();
    const arrays: number[] = [];
    for (const key of Object.getOwnPropertyNames(table)) { // non-enumerable entries count too
      const oid = Number(key);
      const fn = table[oid];
      if (typeof fn !== "function") map.set(oid, keepText);
      else if (this.#arrays.get(oid)?.parse === fn) arrays.push(oid);
      else if (this.#ownParsers.get(oid) !== fn) map.set(oid, asDecoder(fn));
    }
    for (const oid of this.#ownParsers.keys()) if (!(oid in table)) map.set(oid, keepText);
    for (const oid of arrays) {
      const { element, delimiter } = this.#arrays.get(oid)!;
      const parse = map.get(element);
      if (parse !== undefined) {
        map.set(oid, (text) => parseArrayLiteral(text, parse, delimiter));
      } else if (!this.#ownParsers.has(oid)) {
        // A user-defined type's array: pgpipe's own decoders do not know it.
        const own = decoderFor(element, { bigint: this.#bigint });
        map.set(oid, (text) => parseArrayLiteral(text, own, delimiter));
      }
    }
    this.#compiled = map.size > 0 ? map : undefined;
    this.#sink.parsers(this.#compiled);
  }

  /** The serializers that differ from pgpipe's own (a deleted one sends `'' + value`). */
  #compileSerializers(): void {
    const table = this.#serializerTarget;
    const map = new Map<number, Serializer>();
    for (const key of Object.getOwnPropertyNames(table)) { // non-enumerable entries count too
      const oid = Number(key);
      const fn = table[oid];
      if (typeof fn !== "function") map.set(oid, stringOf);
      else if (this.#ownSerializers.get(oid) !== fn) map.set(oid, fn);
    }
    for (const oid of this.#ownSerializers.keys()) if (!(oid in table)) map.set(oid, stringOf);
    this.#sink.serializers(map.size > 0 ? map : null);
  }
}
