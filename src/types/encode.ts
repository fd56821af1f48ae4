/**
 * Parameter serialisation: JavaScript values to PostgreSQL text-format parameters,
 * plus the type OID to declare for each value in the Parse message.
 *
 * @module
 */

import { QueryError } from "../errors.ts";
import { arrayOf, elementOf, Oid } from "./oids.ts";
import { MAX_TIME } from "./formats.ts";

/**
 * Machine-readable reason a value cannot be sent as a parameter: the `code` of a
 * {@linkcode ParameterError}.
 *
 * @example
 * ```ts
 * import type { ParameterErrorCode } from "jsr:@pgpipe/pgpipe";
 *
 * const advice: Record<ParameterErrorCode, string> = {
 *   UNDEFINED_VALUE: "use null for SQL NULL",
 *   UNSUPPORTED_TYPE: "functions and symbols cannot be sent",
 *   INVALID_DATE: "the Date is invalid",
 * };
 * ```
 */
export type ParameterErrorCode = "UNDEFINED_VALUE" | "UNSUPPORTED_TYPE" | "INVALID_DATE";

/**
 * A parameter that has no PostgreSQL representation, refused before anything is sent:
 * `undefined` (`UNDEFINED_VALUE`; use `null` for SQL NULL, or the `transform.undefined`
 * option), functions and symbols (`UNSUPPORTED_TYPE`) and invalid `Date`s (`INVALID_DATE`). It
 * is a {@linkcode QueryError}, so callers catch one class for every bad input; the connection
 * stays usable.
 *
 * @example
 * ```ts
 * import postgres, { ParameterError } from "jsr:@pgpipe/pgpipe";
 *
 * await using sql = postgres();
 * const input: { id?: number } = {};
 * try {
 *   await sql`select * from users where id = ${input.id}`;
 * } catch (e) {
 *   if (e instanceof ParameterError) console.log(e.code); // "UNDEFINED_VALUE"
 * }
 * ```
 */
export class ParameterError extends QueryError {
  /** Creates an error with the given code and human-readable message. */
  constructor(code: ParameterErrorCode, message: string) {
    super(code, message);
    this.name = "ParameterError";
  }
}

/** 0001-01-01T00:00:00Z and 10000-01-01T00:00:00Z: where `toISOString()` is server-readable. */
const MIN_ISO_TIME = -62135596800000;
const MAX_ISO_TIME = 253402300800000;

/**
 * Infers the type OID to declare for a parameter (postgres.js rules). `0` means
 * "unspecified": the server infers the type from the query context, which is what
 * lets strings and numbers bind to any column type and objects to json or jsonb.
 *
 * | value | OID |
 * | --- | --- |
 * | string, number, plain object, null, undefined | 0 |
 * | bigint | 20 (int8) |
 * | boolean | 16 (bool) |
 * | Date | 1184 (timestamptz) |
 * | Uint8Array | 17 (bytea) |
 * | array | array type of its first non-null (leaf) element's OID, else 0 |
 */
export function inferOid(value: unknown): number {
  switch (typeof value) {
    case "bigint":
      return Oid.int8;
    case "boolean":
      return Oid.bool;
    case "object":
      if (value === null) return 0;
      if (value instanceof Date) return Oid.timestamptz;
      if (value instanceof Uint8Array) return Oid.bytea;
      if (Array.isArray(value)) {
        const element = firstElementOid(value);
        return element > 0 ? arrayOf[element] ?? 0 : 0;
      }
      return 0;
    default:
      return 0;
  }
}

/** OID of the first non-null leaf of a (nested) array, or -1 when it has none. */
function firstElementOid(array: readonly unknown[]): number {
  for (let i = 0; i < array.length; i++) {
    const element = array[i];
    if (element === null || element === undefined) continue;
    if (Array.isArray(element)) {
      const oid = firstElementOid(element);
      if (oid !== -1) return oid;
      continue;
    }
    return inferOid(element);
  }
  return -1;
}

/**
 * Serialises a parameter to PostgreSQL text format; `null` means SQL NULL.
 *
 * | value | text |
 * | --- | --- |
 * | null | SQL NULL |
 * | string | unchanged |
 * | number | `String(n)` (`NaN`, `Infinity`, `-Infinity`), and `-0` as `"-0"` |
 * | bigint | decimal digits |
 * | boolean | `t` / `f` |
 * | Date | `toISOString()`; ±8.64e15 as `infinity` / `-infinity`; years outside 1..9999 as `YYYYY-MM-DDTHH:MM:SS.sssZ` with ` BC` for years ≤ 0 |
 * | Uint8Array | bytea hex format `\x…` |
 * | array | array literal `{…}`, nested for multi-dimensional, `NULL` for null elements |
 * | other objects | `JSON.stringify` |
 *
 * `undef` stands in for `undefined` (the `transform.undefined` option); while it is
 * itself `undefined`, an `undefined` value or array element is an error.
 *
 * @throws {ParameterError} for `undefined`, functions, symbols and invalid dates.
 */
export function serialize(value: unknown, undef?: unknown): string | null {
  switch (typeof value) {
    case "string":
      return value;
    case "number":
      // String(-0) is "0"; keep the sign so float8 columns round-trip it.
      return value === 0 && 1 / value < 0 ? "-0" : String(value);
    case "bigint":
      return String(value);
    case "boolean":
      return value ? "t" : "f";
    case "object":
      if (value === null) return null;
      if (value instanceof Date) return serializeDate(value);
      if (value instanceof Uint8Array) return serializeBytea(value);
      if (
        ArrayBuffer.isView(value) || value instanceof ArrayBuffer || value instanceof Map ||
        value instanceof Set
      ) {
        // JSON.stringify would silently turn these into "{}"; refuse instead of storing garbage.
        throw new ParameterError(
          "UNSUPPORTED_TYPE",
          `${value.constructor.name} cannot be sent as a parameter; use a Uint8Array for bytea`,
        );
      }
      if (Array.isArray(value)) return serializeArray(value, undef, undefined);
      return serializeJson(value);
    case "undefined":
      if (undef !== undefined) return serialize(undef);
      throw undefinedValue();
    default:
      throw new ParameterError(
        "UNSUPPORTED_TYPE",
        `Values of type ${typeof value} cannot be sent as parameters`,
      );
  }
}

function serializeDate(date: Date): string {
  const time = date.getTime();
  if (time >= MIN_ISO_TIME && time < MAX_ISO_TIME) return date.toISOString();
  if (time !== time) throw new ParameterError("INVALID_DATE", "Invalid Date parameter");
  if (time === MAX_TIME) return "infinity";
  if (time === -MAX_TIME) return "-infinity";
  // toISOString() writes extended years ("+012345-…", "-000043-…") that the server rejects;
  // it accepts plain 5+ digit years and the " BC" era suffix instead.
  const year = date.getUTCFullYear();
  const iso = date.toISOString();
  const rest = iso.slice(iso.indexOf("-", 1)); // from the '-' before the month
  if (year > 0) return String(year) + rest;
  return String(1 - year).padStart(4, "0") + rest + " BC";
}

/**
 * Two lowercase hex digits for every byte value; used when `toHex` is missing, and built then
 * (building it cost every import ~0.2 ms on runtimes that have `toHex`).
 */
let hexPairs: string[] | undefined;

/** Native `Uint8Array.prototype.toHex` (ES2026), when the runtime has it. */
const nativeToHex: ((this: Uint8Array) => string) | undefined =
  typeof (Uint8Array.prototype as any).toHex === "function"
    ? (Uint8Array.prototype as any).toHex
    : undefined;

function serializeBytea(bytes: Uint8Array): string {
  if (nativeToHex !== undefined) return "\\x" + nativeToHex.call(bytes);
  const pairs = hexPairs ??= Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, "0"));
  let out = "\\x";
  for (let i = 0; i < bytes.length; i++) out += pairs[bytes[i]];
  return out;
}

function serializeJson(value: object): string {
  const json = JSON.stringify(value);
  // JSON.stringify returns undefined when toJSON() yields undefined or a function.
  if (json === undefined) {
    throw new ParameterError("UNSUPPORTED_TYPE", "Object parameter has no JSON representation");
  }
  return json;
}

function undefinedValue(): ParameterError {
  return new ParameterError(
    "UNDEFINED_VALUE",
    "Undefined values are not allowed as parameters; use null for SQL NULL",
  );
}

/**
 * Builds an array literal; nested arrays become sub-arrays of a multi-dimensional
 * array. `custom` (a `types` option serializer) turns each element into its text.
 */
function serializeArray(
  array: readonly unknown[],
  undef: unknown,
  custom: Serializer | undefined,
  serializers: Serializers | null = null,
): string {
  const length = array.length;
  if (length === 0) return "{}";
  let out = "{";
  for (let i = 0; i < length; i++) {
    if (i > 0) out += ",";
    let element = array[i];
    if (element === undefined) {
      if (undef === undefined) throw undefinedValue();
      element = undef;
    }
    if (element === null) {
      out += "NULL";
    } else if (Array.isArray(element)) {
      out += serializeArray(element, undef, custom, serializers);
    } else {
      const text = element instanceof Parameter // e.g. [sql.json(a), sql.typed.point(p)]
        ? serializeParameter(element, serializers, undef)
        : custom === undefined
        ? serialize(element)
        : customText(custom(element));
      out += text === null ? "NULL" : quoteArrayElement(text);
    }
  }
  return out + "}";
}

/**
 * Quotes an array element when `array_in` would otherwise misread it: empty strings,
 * the word NULL in any case, and anything containing braces, quotes, commas,
 * backslashes or whitespace. Inside quotes only `"` and `\` need a backslash.
 */
function quoteArrayElement(text: string): string {
  const length = text.length;
  if (length === 0) return '""';
  let quote = length === 4 && (text.charCodeAt(0) | 32) === 110 && // n
    (text.charCodeAt(1) | 32) === 117 && // u
    (text.charCodeAt(2) | 32) === 108 && // l
    (text.charCodeAt(3) | 32) === 108; // l
  let escape = false;
  for (let i = 0; i < length; i++) {
    const c = text.charCodeAt(i);
    if (c === 34 || c === 92) { // " \
      escape = true;
      break;
    }
    if (c === 123 || c === 125 || c === 44 || c === 32 || (c >= 9 && c <= 13)) quote = true;
  }
  if (!escape) return quote ? '"' + text + '"' : text;

  let out = '"';
  let start = 0;
  for (let i = 0; i < length; i++) {
    const c = text.charCodeAt(i);
    if (c === 34 || c === 92) {
      out += text.slice(start, i) + "\\";
      start = i; // the quote or backslash itself starts the next run
    }
  }
  return out + text.slice(start) + '"';
}

/** A `types` option serializer: a value to its text (or to a value serialised as usual). */
export type Serializer = (value: any) => unknown;

/** Custom serializers by type OID (from the `types` option). */
export type Serializers = ReadonlyMap<number, Serializer>;

/** What a custom serializer returned, as parameter text: strings pass, the rest is serialised. */
function customText(out: unknown): string | null {
  return typeof out === "string" ? out : out === undefined ? null : serialize(out);
}

/**
 * A parameter sent with an explicit type OID, made by `sql.typed`, `sql.json`,
 * `sql.array` and the custom types of the `types` option. The value is
 * serialised when the query runs (by the type's custom serializer, if any).
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 * const sql = postgres();
 * const point = sql.typed("(1,2)", 600); // sent as type point
 * await sql`select ${point} as p`;
 * ```
 */
export class Parameter {
  /** The value as given. */
  readonly value: unknown;
  /** The type OID declared in Parse (0: the server infers it). */
  readonly type: number;
  /**
   * For an array parameter (`sql.array`), the element type OID, whose custom
   * serializer applies to each element (0: unknown); null for other parameters.
   */
  readonly element: number | null;

  /** Made by `sql.typed`, `sql.json`, `sql.array`; not meant to be called directly. */
  constructor(value: unknown, type: number, element: number | null = null) {
    this.value = value;
    this.type = type;
    this.element = element;
  }
}

/** json and jsonb parameters are always JSON text, even when the value is a string. */
function serializeJsonText(value: unknown): string {
  const json = JSON.stringify(value);
  if (json === undefined) {
    throw new ParameterError("UNSUPPORTED_TYPE", "json parameter has no JSON representation");
  }
  return json;
}

/**
 * Serialises a typed {@linkcode Parameter}: `undefined` becomes `undef` (or fails),
 * `null` is SQL NULL, then the custom serializer of its type (or of each element
 * of an array parameter) applies, else json types get JSON text, else {@linkcode serialize}.
 */
export function serializeParameter(
  p: Parameter,
  serializers: Serializers | null,
  undef: unknown,
): string | null {
  let value = p.value;
  if (value === undefined) {
    if (undef === undefined) throw undefinedValue();
    value = undef;
  }
  if (value === null) return null;
  if (p.element !== null) {
    if (!Array.isArray(value)) {
      throw new ParameterError("UNSUPPORTED_TYPE", "an array parameter needs an array value");
    }
    return serializeArray(value, undef, serializers?.get(p.element), serializers);
  }
  const custom = serializers?.get(p.type);
  if (custom !== undefined) return customText(custom(value));
  if (p.type === Oid.json || p.type === Oid.jsonb) return serializeJsonText(value);
  return serialize(value, undef);
}

/**
 * {@linkcode serialize} when the client has custom serializers: the one for the
 * value's inferred OID wins, and for an array the one for its element type.
 */
export function serializeCustom(
  value: unknown,
  oid: number,
  serializers: Serializers,
  undef: unknown,
): string | null {
  if (value === null || value === undefined) return serialize(value, undef);
  // An untyped string is text to the server in nearly every context; postgres.js
  // (which serializes after the server describes the parameters) applies the
  // text serializer to it, so a `types` entry for text must see it here too.
  const custom = serializers.get(oid === 0 && typeof value === "string" ? Oid.text : oid);
  if (custom !== undefined) return customText(custom(value));
  const element = elementOf[oid];
  if (element !== undefined && Array.isArray(value)) {
    return serializeArray(value, undef, serializers.get(element), serializers);
  }
  return serialize(value, undef);
}
