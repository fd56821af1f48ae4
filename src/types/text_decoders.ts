/**
 * Decoders for PostgreSQL's text output format, one per type OID.
 *
 * These run once per column per row, so they avoid regular expressions, intermediate
 * strings and `Date.parse`. The date/time parsers assume `DateStyle = ISO` (which the
 * connection sets at startup); `bytea` accepts both the `hex` and the `escape` output.
 *
 * @module
 */

import type { Buffer } from "node:buffer";
import { bufferModule } from "../builtins.ts";
import { parseArrayLiteral } from "./array_literal.ts";
import { elementOf, Oid } from "./oids.ts";
import { HEX_VALUE, MAX_TIME } from "./formats.ts";

/**
 * A text-format value decoder: receives the server's text output of one value
 * (never SQL NULL, which the caller handles) and returns its JavaScript form.
 */
export type TextDecoderFn = (text: string) => unknown;

/** Options that change how values are decoded. */
export interface DecodeOptions {
  /** Decode `int8` (and `int8[]` elements) as `bigint` instead of leaving them strings. */
  bigint: boolean;
  /** Maps a result column name to its row key (e.g. snake_case to camelCase). */
  column?: (name: string) => string;
  /** Maps each decoded non-null value; gets the column, as postgres.js's `transform.value` does. */
  value?: (value: unknown, column: { name: string; type: number }) => unknown;
  /** Maps each finished row. */
  row?: (row: unknown) => unknown;
  /** Custom decoders by type OID; they win over the built-in ones. */
  parsers?: ReadonlyMap<number, TextDecoderFn>;
}

const decodeBool: TextDecoderFn = (text) => text === "t";

// Unary plus is the fastest string-to-number conversion in V8 and already
// understands the server's "NaN", "Infinity" and "-Infinity".
const decodeNumber: TextDecoderFn = (text) => +text;

const decodeBigInt: TextDecoderFn = (text) => BigInt(text);

const decodeJson: TextDecoderFn = (text) => JSON.parse(text);

// ---------------------------------------------------------------------------------------
// bytea

/** Native hex decoding (ES2026), absent from older runtimes. */
const nativeFromHex: ((hex: string) => Uint8Array) | undefined =
  typeof (Uint8Array as any).fromHex === "function" ? (Uint8Array as any).fromHex : undefined;

/**
 * bytea as a Buffer (node:buffer's Uint8Array subclass), as postgres.js gives
 * it: Uint8Array code works unchanged, and `.toString()` gives the text.
 */
function decodeBytea(text: string): Buffer {
  const bytes = decodeByteaBytes(text);
  return bufferModule().Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

function decodeByteaBytes(text: string): Uint8Array {
  // Hex format (the default since PostgreSQL 9.0): "\x" followed by two digits per byte.
  if (text.charCodeAt(0) === 92 && text.charCodeAt(1) === 120) {
    // The native decoder has a fixed call cost that only pays off beyond ~64 bytes.
    if (nativeFromHex !== undefined && text.length > 130) {
      return nativeFromHex.call(Uint8Array, text.slice(2));
    }
    const n = (text.length - 2) >> 1;
    const out = new Uint8Array(n);
    for (let i = 0, j = 2; i < n; i++, j += 2) {
      out[i] = (HEX_VALUE[text.charCodeAt(j)] << 4) | HEX_VALUE[text.charCodeAt(j + 1)];
    }
    return out;
  }
  return decodeByteaEscape(text);
}

/** Legacy `bytea_output = escape`: printable bytes as-is, `\\` and `\ooo` octal escapes. */
function decodeByteaEscape(text: string): Uint8Array {
  const len = text.length;
  // Every byte takes at least one character, so this is an upper bound.
  const out = new Uint8Array(len);
  let n = 0;
  for (let i = 0; i < len; i++) {
    const c = text.charCodeAt(i);
    if (c !== 92) {
      out[n++] = c;
    } else if (text.charCodeAt(i + 1) === 92) {
      out[n++] = 92;
      i++;
    } else {
      out[n++] = ((text.charCodeAt(i + 1) - 48) << 6) | ((text.charCodeAt(i + 2) - 48) << 3) |
        (text.charCodeAt(i + 3) - 48);
      i += 3;
    }
  }
  return out.subarray(0, n);
}

// ---------------------------------------------------------------------------------------
// date / timestamp / timestamptz

// How the parsed wall-clock fields become an instant (plain numbers: no enum object lookup).
/** `date`: midnight UTC, the same as `new Date("YYYY-MM-DD")`. */
const CLOCK_UTC = 0;
/** `timestamp`: the fields are local time, like `new Date(y, m, d, ...)`. */
const CLOCK_LOCAL = 1;
/** `timestamptz`: the fields carry an explicit UTC offset. */
const CLOCK_OFFSET = 2;

/** Value of the two decimal digits at `i`; the server always zero-pads these fields. */
function twoDigits(text: string, i: number): number {
  return (text.charCodeAt(i) - 48) * 10 + text.charCodeAt(i + 1) - 48;
}

/**
 * Parses ISO-style `date`, `timestamp` and `timestamptz` output:
 * `Y..Y-MM-DD[ HH:MM:SS[.f..f][±HH[:MM[:SS]]]][ BC]`, or `infinity` / `-infinity`.
 * The year has at least four digits; fractions beyond milliseconds are truncated
 * (as `new Date()` does) because a JS `Date` cannot hold microseconds.
 */
function parseDateTime(text: string, clock: number): Date {
  const first = text.charCodeAt(0);
  if (first === 105) return new Date(MAX_TIME); // "infinity"
  if (first === 45) return new Date(-MAX_TIME); // "-infinity"

  const len = text.length;
  let i = 0;
  let year = 0;
  for (;;) {
    const d = text.charCodeAt(i) - 48;
    if (!(d >= 0 && d <= 9)) break; // also stops at NaN past the end
    year = year * 10 + d;
    i++;
  }
  // i is at the '-' before the month; the day ends at i + 6.
  if (i < 4 || text.charCodeAt(i) !== 45 || text.charCodeAt(i + 3) !== 45) {
    return new Date(NaN);
  }
  const month = twoDigits(text, i + 1) - 1;
  const day = twoDigits(text, i + 4);
  i += 6;

  let hour = 0;
  let minute = 0;
  let second = 0;
  let ms = 0;
  let offsetSeconds = 0;

  // A space followed by a digit starts the time; a space followed by "BC" does not.
  if (text.charCodeAt(i) === 32 && text.charCodeAt(i + 1) !== 66) {
    if (text.charCodeAt(i + 3) !== 58 || text.charCodeAt(i + 6) !== 58) return new Date(NaN);
    hour = twoDigits(text, i + 1);
    minute = twoDigits(text, i + 4);
    second = twoDigits(text, i + 7);
    i += 9;
    if (text.charCodeAt(i) === 46) { // '.'
      i++;
      let scale = 100;
      for (;;) {
        const d = text.charCodeAt(i) - 48;
        if (!(d >= 0 && d <= 9)) break;
        ms += d * scale;
        scale = (scale / 10) | 0; // digits past the third add 0: truncation
        i++;
      }
    }
    const sign = text.charCodeAt(i);
    if (sign === 43 || sign === 45) { // '+' or '-'
      offsetSeconds = twoDigits(text, i + 1) * 3600;
      i += 3;
      if (text.charCodeAt(i) === 58) {
        offsetSeconds += twoDigits(text, i + 1) * 60;
        i += 3;
        // Seconds appear for historical local mean time offsets such as +00:19:32.
        if (text.charCodeAt(i) === 58) {
          offsetSeconds += twoDigits(text, i + 1);
          i += 3;
        }
      }
      if (sign === 45) offsetSeconds = -offsetSeconds;
    }
  }

  // " BC" is always last. 1 BC is astronomical year 0, 2 BC is year -1, and so on.
  if (text.charCodeAt(len - 1) === 67 && text.charCodeAt(len - 2) === 66) year = 1 - year;

  if (clock === CLOCK_LOCAL) return localDate(year, month, day, hour, minute, second, ms);
  // Own day arithmetic: ~3x faster than Date.UTC, and free of its 0..99 -> 1900s quirk.
  const time = daysFromCivil(year, month, day) * 864e5 + hour * 3600000 + minute * 60000 +
    second * 1000 + ms - offsetSeconds * 1000;
  // new Date() turns times beyond ±8.64e15 into an Invalid Date, as the server's range is wider.
  return new Date(time);
}

/** The instant a local wall-clock reading names, like `new Date(y, m, d, ...)` for every year. */
export function localDate(
  year: number,
  month: number,
  day: number,
  hour: number,
  minute: number,
  second: number,
  ms: number,
): Date {
  if (year >= 0 && year < 100) {
    // The Date constructor reads years 0..99 as 1900..1999. Set the date first, then the
    // time: building the 19xx wall time could land in a DST gap of that year and shift it.
    const date = new Date(0);
    date.setFullYear(year, month, day);
    date.setHours(hour, minute, second, ms);
    return date;
  }
  return new Date(year, month, day, hour, minute, second, ms);
}

/**
 * The instant whose local wall clock reads what `wall` (ms since 1970 on a
 * UTC clock) reads: the date and time fields of `wall` by arithmetic, then
 * {@linkcode localDate}, which is what placing them in local time costs
 * (reading them back through seven `getUTC*` calls cost as much again).
 */
export function wallClockDate(wall: number): Date {
  if (!(wall >= -MAX_TIME && wall <= MAX_TIME)) return new Date(NaN); // beyond JS's range
  const days = Math.floor(wall / 864e5);
  // From here every quantity is a non-negative int32, so `/ n | 0` is an exact floor.
  let rest = wall - days * 864e5; // ms into the day, 0..86399999
  // The civil date of a day count (proleptic Gregorian, March-based 400-year eras).
  const shifted = days + 719468; // days since 0000-03-01
  const era = Math.floor(shifted / 146097);
  const dayOfEra = shifted - era * 146097; // 0..146096
  const yearOfEra = (dayOfEra - (dayOfEra / 1460 | 0) + (dayOfEra / 36524 | 0) -
        (dayOfEra / 146096 | 0)) / 365 | 0; // 0..399
  const dayOfYear = dayOfEra - (365 * yearOfEra + (yearOfEra / 4 | 0) - (yearOfEra / 100 | 0));
  const marchMonth = (5 * dayOfYear + 2) / 153 | 0; // March = 0 ... February = 11
  const day = dayOfYear - ((153 * marchMonth + 2) / 5 | 0) + 1;
  const month = marchMonth < 10 ? marchMonth + 2 : marchMonth - 10; // 0-based
  const year = yearOfEra + era * 400 + (month < 2 ? 1 : 0);
  const hour = rest / 3600000 | 0;
  rest -= hour * 3600000;
  const minute = rest / 60000 | 0;
  rest -= minute * 60000;
  const second = rest / 1000 | 0;
  return localDate(year, month, day, hour, minute, second, rest - second * 1000);
}

/**
 * Days since 1970-01-01 of a proleptic Gregorian date (`month` 0-based, any year).
 * Counts in 400-year eras starting on March 1st, so the leap day ends each era-year.
 */
function daysFromCivil(year: number, month: number, day: number): number {
  if (month < 2) year -= 1; // January and February belong to the previous March-based year
  const era = Math.floor(year / 400);
  const yearOfEra = year - era * 400; // 0..399
  const marchMonth = month < 2 ? month + 10 : month - 2; // March = 0 ... February = 11
  // (153 * m + 2) / 5 is the day of the year on which March-based month m starts.
  const dayOfYear = ((153 * marchMonth + 2) / 5 | 0) + day - 1;
  const dayOfEra = yearOfEra * 365 + (yearOfEra / 4 | 0) - (yearOfEra / 100 | 0) + dayOfYear;
  // 719468 days separate 0000-03-01 (era 0, day 0) from 1970-01-01.
  return era * 146097 + dayOfEra - 719468;
}

const decodeDate: TextDecoderFn = (text) => parseDateTime(text, CLOCK_UTC);
const decodeTimestamp: TextDecoderFn = (text) => parseDateTime(text, CLOCK_LOCAL);
const decodeTimestamptz: TextDecoderFn = (text) => parseDateTime(text, CLOCK_OFFSET);

// ---------------------------------------------------------------------------------------
// lookup

/** Decoders for non-array types; every OID not listed stays a string. */
function scalarDecoder(oid: number, bigint: boolean): TextDecoderFn | null {
  switch (oid) {
    case Oid.bool:
      return decodeBool;
    case Oid.int2:
    case Oid.int4:
    case Oid.oid:
    case Oid.float4:
    case Oid.float8:
      return decodeNumber;
    case Oid.int8:
      return bigint ? decodeBigInt : null;
    case Oid.bytea:
      return decodeBytea;
    case Oid.date:
      return decodeDate;
    case Oid.timestamp:
      return decodeTimestamp;
    case Oid.timestamptz:
      return decodeTimestamptz;
    case Oid.json:
    case Oid.jsonb:
      return decodeJson;
    default:
      return null;
  }
}

/**
 * Array decoders are closures over their element decoder: each is built the first time its type
 * is asked for (a cold start pays for none it does not decode) and kept per option set, so
 * `decoderFor` allocates once per array type at most. Index 0: `bigint: false`, 1: `bigint: true`.
 */
const arrayDecoders: [Map<number, TextDecoderFn>, Map<number, TextDecoderFn>] = [
  new Map(),
  new Map(),
];

/** The decoder of the built-in array type `oid`, or null when `oid` is none. */
function arrayDecoder(oid: number, bigint: boolean): TextDecoderFn | null {
  const built = arrayDecoders[bigint ? 1 : 0];
  let decode = built.get(oid);
  if (decode !== undefined) return decode;
  const elementOid = elementOf[oid];
  if (elementOid === undefined) return null;
  const element = scalarDecoder(elementOid, bigint);
  // box is the only built-in type whose array delimiter is not a comma.
  const delimiter = elementOid === Oid.box ? ";" : ",";
  decode = (text) => parseArrayLiteral(text, element, delimiter);
  built.set(oid, decode);
  return decode;
}

/**
 * Returns the text-format decoder for a type OID, or `null` when values of that type
 * are returned as the server's string unchanged (text, varchar, numeric, uuid,
 * int8 without `bigint`, and any unknown OID), so callers can skip the call entirely.
 *
 * | type | result |
 * | --- | --- |
 * | bool | `boolean` |
 * | int2, int4, oid, float4, float8 | `number` (including `NaN`, `±Infinity`) |
 * | int8 | `string`, or `bigint` when `opts.bigint` |
 * | bytea | `Buffer` (a `Uint8Array`) |
 * | date | `Date` at UTC midnight |
 * | timestamp | `Date` in local time |
 * | timestamptz | `Date` |
 * | json, jsonb | `JSON.parse` result |
 * | arrays of any built-in type | nested arrays of the element's result, `null` for NULL |
 *
 * `infinity` / `-infinity` dates become `new Date(8.64e15)` / `new Date(-8.64e15)`.
 */
export function decoderFor(oid: number, opts: DecodeOptions): TextDecoderFn | null {
  return scalarDecoder(oid, opts.bigint) ?? arrayDecoder(oid, opts.bigint);
}
