/**
 * The `types` option (postgres.js custom types): parsers for result OIDs,
 * serializers for parameter OIDs, and `sql.typed.<name>(value)` helpers.
 */
import { QueryError } from "../errors.ts";
import { Parameter, type Serializer } from "../types/encode.ts";
import { typed } from "./typed_values.ts";
import { Oid } from "../types/oids.ts";
import type { TextDecoderFn } from "../types/text_decoders.ts";

/**
 * A custom type for the `types` option.
 *
 * @example
 * ```ts
 * import postgres, { type PostgresType } from "jsr:@pgpipe/pgpipe";
 * const point: PostgresType<{ x: number; y: number }> = {
 *   to: 600,
 *   from: [600],
 *   serialize: ({ x, y }) => `(${x},${y})`,
 *   parse: (text) => {
 *     const [x, y] = text.slice(1, -1).split(",").map(Number);
 *     return { x, y };
 *   },
 * };
 * const sql = postgres({ types: { point } });
 * const [{ p }] = await sql`select ${sql.typed.point({ x: 1, y: 2 })} as p`; // { x: 1, y: 2 }
 * ```
 */
export interface PostgresType<T = any> {
  /** The type OID sent with values made by `sql.typed.<name>(value)`. */
  to: number;
  /** Result type OIDs decoded by `parse` (their built-in array types too). */
  from: number | readonly number[];
  /** Value to parameter text (a non-string result is serialised as usual). */
  serialize?: (value: T) => unknown;
  /** The server's text for one value to its JavaScript form. */
  parse?: (text: string) => T;
}

/**
 * `sql.typed(value, oid)`, plus `sql.typed.<name>(value)` for each custom type.
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 * const sql = postgres();
 * await sql`select ${sql.typed("1 day", 1186)} as d`; // sent as interval
 * ```
 */
export interface Typed {
  /** A parameter sent with type `oid`. */
  (value: unknown, oid: number): Parameter;
  /** A parameter of the custom type of that name. */
  readonly [name: string]: (value: any) => Parameter;
}

/**
 * postgres.js's `postgres.BigInt`: int8 values as `bigint` (also inside int8[]).
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 * const sql = postgres({ types: { bigint: postgres.BigInt } });
 * const [{ n }] = await sql`select 9007199254740993::int8 as n`; // 9007199254740993n
 * ```
 */
export const BigIntType: PostgresType<bigint> = {
  to: Oid.int8,
  from: [Oid.int8],
  serialize: (x: bigint) => x.toString(),
  parse: (x: string) => BigInt(x),
};

/** What the `types` option resolves to. */
export interface CustomTypes {
  /**
   * Result decoders by OID, or undefined when there are none (arrays of their built-in types
   * follow them: see type_handlers.ts).
   */
  parsers: Map<number, TextDecoderFn> | undefined;
  /** Parameter serializers by OID, or null when there are none (the fast path). */
  serializers: Map<number, Serializer> | null;
  /** `sql.typed` with a helper per type name. */
  typed: Typed;
}

function isOid(x: unknown): x is number {
  return typeof x === "number" && Number.isInteger(x) && x >= 0 && x <= 0xffffffff;
}

function invalid(message: string): QueryError {
  return new QueryError("INVALID_TYPE", message);
}

/** Resolves the `types` option; throws `INVALID_TYPE` for a malformed entry. */
export function customTypes(types: Record<string, PostgresType> | undefined): CustomTypes {
  const fn = ((value: unknown, oid: number) => typed(value, oid)) as Typed;
  if (types === undefined) return { parsers: undefined, serializers: null, typed: fn };
  const parsers = new Map<number, TextDecoderFn>();
  const serializers = new Map<number, Serializer>();
  for (const [name, type] of Object.entries(types)) {
    const from = type.from === undefined
      ? []
      : typeof type.from === "number"
      ? [type.from]
      : type.from;
    if (!isOid(type.to) || !from.every(isOid)) {
      throw invalid(`types.${name}: "to" must be a type OID and "from" a list of type OIDs`);
    }
    for (const oid of from) {
      if (type.parse === undefined) continue;
      if (typeof type.parse !== "function") throw invalid(`types.${name}.parse must be a function`);
      parsers.set(oid, type.parse);
    }
    if (type.serialize !== undefined) {
      if (typeof type.serialize !== "function") {
        throw invalid(`types.${name}.serialize must be a function`);
      }
      // As in postgres.js the serializer also applies to the `from` OIDs; 0 means "untyped".
      for (const oid of [type.to, ...from]) if (oid !== 0) serializers.set(oid, type.serialize);
    }
    const to = type.to;
    Object.defineProperty(fn, name, {
      value: (value: unknown) => new Parameter(value, to),
      enumerable: true,
    });
  }
  return {
    parsers: parsers.size > 0 ? parsers : undefined,
    serializers: serializers.size > 0 ? serializers : null,
    typed: fn,
  };
}
