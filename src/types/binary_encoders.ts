/**
 * Binary encoders: JavaScript values to PostgreSQL's binary input format (the
 * `typreceive` side), one per type, for `COPY ... FROM STDIN (FORMAT binary)`.
 *
 * Each encoder appends one whole field as COPY and array elements frame it: a
 * 32-bit length, then the bytes. NULL (`-1`) and `undefined` are the caller's
 * business. A value of the wrong kind (a string for int4, 2^40 for int4, an
 * invalid Date) throws an {@linkcode EncodeError}; the caller adds the row and
 * column. The server still checks what only it knows (varchar lengths,
 * numeric typmods, JSON syntax, encoding).
 *
 * What each type takes is what pgpipe decodes it to, so rows read with
 * `copyTo` load back unchanged: int8 and numeric also take their decimal
 * strings, date/timestamp/timestamptz take Dates, uuid its text.
 *
 * @module
 */
import type { Writer } from "../protocol/writer.ts";
import { QueryError } from "../errors.ts";
import { Oid } from "./oids.ts";
import { Parameter } from "./encode.ts";
import { NumericError, writeNumeric } from "./binary_numeric.ts";
import { DAY_MS, HEX_VALUE, MAX_DIMENSIONS, MAX_TIME, PG_EPOCH_MS, TWO_32 } from "./formats.ts";

/** Appends one field (length, then bytes) for a non-null value; throws {@linkcode EncodeError}. */
export type BinaryEncoder = (w: Writer, value: unknown) => void;

/** Why a value cannot be encoded for its column: `INVALID_VALUE` or `UNDEFINED_VALUE`. */
export class EncodeError extends QueryError {
  /** Creates the error; the message says what was expected and what was given. */
  constructor(code: "INVALID_VALUE" | "UNDEFINED_VALUE", message: string) {
    super(code, message);
    this.name = "EncodeError";
  }
}

const INT64_MIN = -9223372036854775808;

/** A short, safe rendering of a value for error messages. */
export function describeValue(value: unknown): string {
  switch (typeof value) {
    case "string":
      return value.length > 40 ? JSON.stringify(value.slice(0, 40)) + "..." : JSON.stringify(value);
    case "number":
      return Object.is(value, -0) ? "-0" : String(value);
    case "bigint":
      return `${value}n`;
    case "object":
      if (value === null) return "null";
      if (value instanceof Date) return `Date(${value.getTime()})`;
      if (Array.isArray(value)) return `an array of ${value.length}`;
      return `a ${value.constructor?.name ?? "object"}`;
    default:
      return String(typeof value === "symbol" ? "a symbol" : typeof value);
  }
}

// Fields are written byte by byte into the writer's buffer after one `ensure` per field: a
// DataView call (and its bounds check) per integer costs more than the encoding itself.

/** Stores a big-endian 32-bit integer (signed or unsigned: the low 32 bits) at `p`. */
function put32(b: Uint8Array, p: number, v: number): void {
  b[p] = v >>> 24;
  b[p + 1] = v >>> 16;
  b[p + 2] = v >>> 8;
  b[p + 3] = v;
}

/** Appends a field of `len` bytes: the length, then `a` (and `b`) as 32-bit integers. */
function put(w: Writer, len: 4 | 8, a: number, b = 0): void {
  w.ensure(4 + len);
  const buf = w.buf;
  const p = w.length;
  put32(buf, p, len);
  put32(buf, p + 4, a);
  if (len === 8) put32(buf, p + 8, b);
  w.length = p + 4 + len;
}

/** Appends a NULL field (length -1). */
export function writeNull(w: Writer): void {
  w.ensure(4);
  put32(w.buf, w.length, -1);
  w.length += 4;
}

/** Appends a row's field count (binary COPY's 16-bit tuple header). */
export function writeFieldCount(w: Writer, n: number): void {
  w.ensure(2);
  w.buf[w.length] = n >>> 8;
  w.buf[w.length + 1] = n;
  w.length += 2;
}

const f64 = new Float64Array(1);
const f64Bytes = new Uint8Array(f64.buffer);
const f32 = new Float32Array(1);
const f32Bytes = new Uint8Array(f32.buffer);
const littleEndian = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

function invalid(expected: string, value: unknown): EncodeError {
  return new EncodeError("INVALID_VALUE", `expected ${expected}, got ${describeValue(value)}`);
}

/**
 * The slow path of every encoder: a typed value (`sql.typed(v, oid)`,
 * `sql.json(v)`) is encoded by its value; anything else is refused.
 */
function retry(w: Writer, value: unknown, encode: BinaryEncoder, expected: string): void {
  if (value instanceof Parameter) {
    const inner = value.value;
    if (inner === null) writeNull(w); // NULL: a field or an array element alike
    else if (inner !== undefined) encode(w, inner);
    else throw new EncodeError("UNDEFINED_VALUE", "a typed value holds undefined; use null");
    return;
  }
  throw invalid(expected, value);
}

// ---------------------------------------------------------------------------------------
// numbers

function checkedInteger(value: unknown, min: number, max: number, type: string): number {
  if (typeof value === "number") {
    if (Number.isInteger(value) && value >= min && value <= max) return value;
    if (Number.isInteger(value)) throw invalid(`an integer in ${type}'s range`, value);
  } else if (typeof value === "bigint") {
    if (value >= BigInt(min) && value <= BigInt(max)) return Number(value);
    throw invalid(`an integer in ${type}'s range`, value);
  }
  return NaN;
}

const encodeInt2: BinaryEncoder = (w, value) => {
  const n = checkedInteger(value, -32768, 32767, "int2");
  if (n !== n) return retry(w, value, encodeInt2, "an integer (number or bigint)");
  w.ensure(6);
  put32(w.buf, w.length, 2);
  w.buf[w.length + 4] = n >>> 8;
  w.buf[w.length + 5] = n;
  w.length += 6;
};

const encodeInt4: BinaryEncoder = (w, value) => {
  if (typeof value === "number" && (value | 0) === value) return put(w, 4, value);
  const n = checkedInteger(value, -2147483648, 2147483647, "int4");
  if (n !== n) return retry(w, value, encodeInt4, "an integer (number or bigint)");
  put(w, 4, n);
};

const encodeOid: BinaryEncoder = (w, value) => {
  const n = checkedInteger(value, 0, 4294967295, "oid");
  if (n !== n) return retry(w, value, encodeOid, "an unsigned 32-bit integer");
  put(w, 4, n);
};

function writeInt64(w: Writer, value: number): void {
  const hi = Math.floor(value / TWO_32); // exact: value is an integer and 2^32 a power of two
  put(w, 8, hi, value - hi * TWO_32);
}

function writeBigInt64(w: Writer, value: bigint): void {
  put(w, 8, Number(value >> 32n), Number(BigInt.asUintN(32, value)));
}

/**
 * int8 from decimal text (an optional sign and digits, as int8's strings are):
 * up to 15 digits, which a double holds exactly, by arithmetic; longer ones
 * through BigInt. False when the text is not an integer.
 */
function writeInt8Text(w: Writer, text: string): boolean {
  const n = text.length;
  const sign = text.charCodeAt(0);
  const negative = sign === 45; // -
  let i = negative || sign === 43 ? 1 : 0;
  if (i === n) return false;
  if (n - i <= 15) {
    let v = 0;
    for (; i < n; i++) {
      const d = text.charCodeAt(i) - 48;
      if (d < 0 || d > 9) return false;
      v = v * 10 + d;
    }
    writeInt64(w, negative ? -v : v);
    return true;
  }
  for (; i < n; i++) {
    const d = text.charCodeAt(i) - 48;
    if (d < 0 || d > 9) return false;
  }
  const big = BigInt(text);
  if (BigInt.asIntN(64, big) !== big) throw invalid("an integer in int8's range", text);
  writeBigInt64(w, big);
  return true;
}

const encodeInt8: BinaryEncoder = (w, value) => {
  if (typeof value === "number") {
    if (Number.isInteger(value) && value >= INT64_MIN && value < -INT64_MIN) {
      return writeInt64(w, value);
    }
  } else if (typeof value === "bigint") {
    if (BigInt.asIntN(64, value) === value) return writeBigInt64(w, value);
  } else if (typeof value === "string" && writeInt8Text(w, value)) return;
  return retry(
    w,
    value,
    encodeInt8,
    "an integer (number, bigint or decimal string) in int8's range",
  );
};

const encodeFloat8: BinaryEncoder = (w, value) => {
  if (typeof value === "number") {
    w.ensure(12);
    const b = w.buf;
    const p = w.length;
    put32(b, p, 8);
    f64[0] = value;
    if (littleEndian) { for (let i = 0; i < 8; i++) b[p + 4 + i] = f64Bytes[7 - i]; }
    else for (let i = 0; i < 8; i++) b[p + 4 + i] = f64Bytes[i];
    w.length = p + 12;
    return;
  }
  retry(w, value, encodeFloat8, "a number");
};

const FLOAT4_MAX = 3.4028234663852886e38;

const encodeFloat4: BinaryEncoder = (w, value) => {
  if (typeof value === "number") {
    // float4in refuses what overflows or underflows float32; so does this, instead of storing
    // Infinity or 0 for a finite, non-zero number.
    const rounded = Math.fround(value);
    if (
      (Math.abs(value) > FLOAT4_MAX && Number.isFinite(value)) || (rounded === 0 && value !== 0)
    ) {
      throw invalid("a number in float4's range", value);
    }
    w.ensure(8);
    const b = w.buf;
    const p = w.length;
    put32(b, p, 4);
    f32[0] = value;
    if (littleEndian) { for (let i = 0; i < 4; i++) b[p + 4 + i] = f32Bytes[3 - i]; }
    else for (let i = 0; i < 4; i++) b[p + 4 + i] = f32Bytes[i];
    w.length = p + 8;
    return;
  }
  retry(w, value, encodeFloat4, "a number");
};

const encodeBool: BinaryEncoder = (w, value) => {
  if (value === true || value === false) {
    w.ensure(5);
    put32(w.buf, w.length, 1);
    w.buf[w.length + 4] = value ? 1 : 0;
    w.length += 5;
    return;
  }
  retry(w, value, encodeBool, "a boolean");
};

// ---------------------------------------------------------------------------------------
// numeric

const encodeNumeric: BinaryEncoder = (w, value) => {
  let written: boolean;
  try {
    written = writeNumeric(w, value);
  } catch (e) {
    if (e instanceof NumericError) throw invalid(e.message, value);
    throw e;
  }
  if (!written) retry(w, value, encodeNumeric, "a decimal number (string, number or bigint)");
};

// ---------------------------------------------------------------------------------------
// text, bytea, json, uuid

/** Writes a string's UTF-8 bytes after a 32-bit length. */
function writeText(w: Writer, text: string): void {
  w.ensure(4);
  const at = w.length;
  w.length += 4;
  const n = w.str(text);
  put32(w.buf, at, n);
}

/** text, varchar, bpchar, name, enums: strings; numbers and bigints as their decimal text. */
const encodeText: BinaryEncoder = (w, value) => {
  if (typeof value === "string") return writeText(w, value);
  if (typeof value === "number" || typeof value === "bigint") {
    return writeText(w, Object.is(value, -0) ? "-0" : String(value));
  }
  retry(w, value, encodeText, "a string");
};

const encodeBytea: BinaryEncoder = (w, value) => {
  if (value instanceof Uint8Array) {
    w.ensure(4);
    put32(w.buf, w.length, value.length);
    w.length += 4;
    w.bytes(value);
    return;
  }
  retry(w, value, encodeBytea, "a Uint8Array");
};

/**
 * JSON text for a json or jsonb field: a string is taken as JSON text (as a
 * parameter is), `sql.json(value)` and every other value are stringified.
 */
function jsonText(value: unknown): string {
  if (typeof value === "string") return value;
  const json = JSON.stringify(value instanceof Parameter ? value.value : value);
  if (json === undefined) throw invalid("a value with a JSON representation", value);
  return json;
}

const encodeJson: BinaryEncoder = (w, value) => {
  if (value instanceof Parameter && value.value == null) return retry(w, value, encodeJson, "");
  writeText(w, jsonText(value));
};

/** jsonb's binary input is a version byte (1) and the JSON text. */
const encodeJsonb: BinaryEncoder = (w, value) => {
  if (value instanceof Parameter && value.value == null) return retry(w, value, encodeJsonb, "");
  const text = jsonText(value);
  w.ensure(5);
  const at = w.length;
  w.buf[at + 4] = 1;
  w.length += 5;
  const n = w.str(text);
  put32(w.buf, at, n + 1);
};

/** Where each byte's two hex digits start in the canonical form `8-4-4-4-12`. */
const CANONICAL = [0, 2, 4, 6, 9, 11, 14, 16, 19, 21, 24, 26, 28, 30, 32, 34];

/** The canonical form, read with one table lookup per digit; false when it is not that form. */
function writeCanonicalUuid(w: Writer, text: string): boolean {
  if (
    text.length !== 36 || text.charCodeAt(8) !== 45 || text.charCodeAt(13) !== 45 ||
    text.charCodeAt(18) !== 45 || text.charCodeAt(23) !== 45
  ) return false;
  w.ensure(20);
  const b = w.buf;
  const p = w.length;
  let seen = 0; // every character code or-ed, and every digit value: negative or > 127 is bad
  for (let k = 0; k < 16; k++) {
    const c1 = text.charCodeAt(CANONICAL[k]);
    const c2 = text.charCodeAt(CANONICAL[k] + 1);
    const hi = HEX_VALUE[c1 & 127];
    const lo = HEX_VALUE[c2 & 127];
    seen |= c1 | c2 | hi | lo;
    b[p + 4 + k] = (hi << 4) | lo;
  }
  if (seen < 0 || seen > 127) return false;
  put32(b, p, 16);
  w.length = p + 20;
  return true;
}

function hexValue(c: number): number {
  return c < 128 ? HEX_VALUE[c] : -1;
}

/**
 * uuid text as uuid_in reads it: 32 hex digits, a hyphen allowed after any
 * group of four, optionally in braces.
 */
const encodeUuid: BinaryEncoder = (w, value) => {
  if (typeof value !== "string") return retry(w, value, encodeUuid, "a uuid string");
  if (writeCanonicalUuid(w, value)) return;
  const n = value.length;
  let i = 0;
  const braced = value.charCodeAt(0) === 123; // {
  if (braced) i = 1;
  w.ensure(20);
  const b = w.buf;
  const p = w.length;
  for (let byte = 0; byte < 16; byte++) {
    const hi = hexValue(value.charCodeAt(i));
    const lo = hexValue(value.charCodeAt(i + 1));
    if (hi < 0 || lo < 0) throw invalid("a uuid string", value);
    b[p + 4 + byte] = (hi << 4) | lo;
    i += 2;
    if (byte % 2 === 1 && byte < 15 && value.charCodeAt(i) === 45) i++; // -
  }
  if (braced) {
    if (value.charCodeAt(i) !== 125) throw invalid("a uuid string", value); // }
    i++;
  }
  if (i !== n) throw invalid("a uuid string", value);
  put32(b, p, 16);
  w.length = p + 20;
};

// ---------------------------------------------------------------------------------------
// date and time

/** A Date's time in ms, or NaN when the value is not a valid Date. */
function timeOf(value: unknown): number {
  return value instanceof Date ? value.getTime() : NaN;
}

/** Writes ms since 2000-01-01 as int64 microseconds, exactly, without BigInt. */
function writeMicros(w: Writer, ms: number): void {
  const hi = Math.floor(ms / TWO_32); // ms = hi * 2^32 + lo, 0 <= lo < 2^32
  const lo = (ms - hi * TWO_32) * 1000; // below 2^42: exact
  const carry = Math.floor(lo / TWO_32);
  put(w, 8, hi * 1000 + carry, lo - carry * TWO_32);
}

function writeInfinity(w: Writer, positive: boolean): void {
  if (positive) put(w, 8, 0x7fffffff, -1);
  else put(w, 8, -0x80000000, 0);
}

const encodeTimestamptz: BinaryEncoder = (w, value) => {
  const t = timeOf(value);
  if (t !== t) return retry(w, value, encodeTimestamptz, "a valid Date");
  if (t === MAX_TIME || t === -MAX_TIME) return writeInfinity(w, t > 0);
  writeMicros(w, t - PG_EPOCH_MS);
};

/**
 * timestamp without time zone holds a wall-clock reading: the Date's local
 * time, the same reading pgpipe gives back when it decodes one.
 */
const encodeTimestamp: BinaryEncoder = (w, value) => {
  const t = timeOf(value);
  if (t !== t) return retry(w, value, encodeTimestamp, "a valid Date");
  if (t === MAX_TIME || t === -MAX_TIME) return writeInfinity(w, t > 0);
  const offset = (value as Date).getTimezoneOffset() * 60000;
  writeMicros(w, Math.round(t - offset) - PG_EPOCH_MS);
};

/** date: the Date's UTC day (pgpipe decodes a date to UTC midnight). */
const encodeDate: BinaryEncoder = (w, value) => {
  const t = timeOf(value);
  if (t !== t) return retry(w, value, encodeDate, "a valid Date");
  if (t === MAX_TIME) put(w, 4, 0x7fffffff);
  else if (t === -MAX_TIME) put(w, 4, -0x80000000);
  else put(w, 4, Math.floor((t - PG_EPOCH_MS) / DAY_MS));
};

// ---------------------------------------------------------------------------------------
// arrays

/**
 * An encoder for arrays of `elementOid` (written in the header, where the
 * server checks it). Nested arrays are dimensions and must be rectangular;
 * null elements are NULL, `undefined` ones become `undef` or fail.
 */
export function arrayEncoder(
  elementOid: number,
  element: BinaryEncoder,
  undef: unknown,
): BinaryEncoder {
  const encode: BinaryEncoder = (w, value) => {
    if (!Array.isArray(value)) return retry(w, value, encode, "an array");
    if (value.length > 0 && !Array.isArray(value[0])) {
      return writeFlat(w, value, elementOid, element, undef);
    }
    const dims: number[] = [];
    let empty = false;
    for (let a: unknown = value; Array.isArray(a); a = a[0]) {
      dims.push(a.length);
      if (a.length === 0) {
        empty = true;
        break;
      }
    }
    if (empty) {
      // `[]` and `[[], []]` are both the empty array, as '{}' and '{{},{}}' are.
      if (dims.length > 1) checkEmpty(value, dims.length - 1);
      w.i32(12).i32(0).i32(0).i32(elementOid);
      return;
    }
    if (dims.length > MAX_DIMENSIONS) {
      throw invalid(`an array of at most ${MAX_DIMENSIONS} dimensions`, value);
    }
    const at = w.length;
    w.i32(0).i32(dims.length);
    const flags = w.length;
    w.i32(0).i32(elementOid);
    for (let d = 0; d < dims.length; d++) w.i32(dims[d]).i32(1);
    if (writeElements(w, value, dims, 0, element, undef)) w.setI32(flags, 1);
    w.setI32(at, w.length - at - 4);
  };
  return encode;
}

/**
 * A one-dimensional array, the common case: the header, then each element
 * straight into the chunk, with no walk over dimensions.
 */
function writeFlat(
  w: Writer,
  a: readonly unknown[],
  elementOid: number,
  element: BinaryEncoder,
  undef: unknown,
): void {
  const n = a.length;
  w.ensure(24);
  const at = w.length;
  const b = w.buf;
  put32(b, at + 4, 1); // dimensions
  put32(b, at + 8, 0); // flags: no NULLs (set below if there are)
  put32(b, at + 12, elementOid);
  put32(b, at + 16, n);
  put32(b, at + 20, 1); // lower bound
  w.length = at + 24;
  if (writeLeaves(w, a, element, undef)) put32(w.buf, at + 8, 1);
  put32(w.buf, at, w.length - at - 4);
}

/** An element's EncodeError, saying which element. */
function elementError(err: unknown, i: number): unknown {
  if (!(err instanceof EncodeError)) return err;
  return new EncodeError(err.code as "INVALID_VALUE", `array element ${i}: ${err.message}`);
}

/** Every sub-array of an empty multi-dimensional array must be empty too. */
function checkEmpty(value: readonly unknown[], depth: number): void {
  for (const a of value) {
    if (!Array.isArray(a) || (depth > 1 ? (checkEmpty(a, depth - 1), false) : a.length !== 0)) {
      throw invalid("a rectangular array (sub-arrays of equal length)", value);
    }
  }
}

/** Writes the elements of one level; true if any was NULL. */
function writeElements(
  w: Writer,
  a: readonly unknown[],
  dims: readonly number[],
  depth: number,
  element: BinaryEncoder,
  undef: unknown,
): boolean {
  if (a.length !== dims[depth]) {
    throw invalid("a rectangular array (sub-arrays of equal length)", a);
  }
  if (depth === dims.length - 1) return writeLeaves(w, a, element, undef);
  let nulls = false;
  for (const e of a) {
    if (!Array.isArray(e)) throw invalid("a rectangular array (sub-arrays of equal length)", e);
    if (writeElements(w, e, dims, depth + 1, element, undef)) nulls = true;
  }
  return nulls;
}

/** Writes the elements of an array's last dimension; true if any was NULL. */
function writeLeaves(
  w: Writer,
  a: readonly unknown[],
  element: BinaryEncoder,
  undef: unknown,
): boolean {
  let nulls = false;
  for (let i = 0; i < a.length; i++) {
    let e = a[i];
    if (e === undefined) {
      if (undef === undefined) {
        throw new EncodeError(
          "UNDEFINED_VALUE",
          `array element ${i} is undefined; use null for NULL`,
        );
      }
      e = undef;
    }
    if (e === null) {
      writeNull(w);
      nulls = true;
    } else if (Array.isArray(e)) {
      throw invalid("a rectangular array (sub-arrays of equal length)", a);
    } else {
      try {
        element(w, e);
      } catch (err) {
        throw elementError(err, i);
      }
    }
  }
  return nulls;
}

// ---------------------------------------------------------------------------------------
// lookup

/**
 * The binary encoder of a scalar built-in type, or null where pgpipe has
 * none (the load then uses COPY's text format). Enums and the other types
 * whose binary input is their text take {@linkcode textEncoder}.
 */
export function binaryEncoderFor(oid: number): BinaryEncoder | null {
  switch (oid) {
    case Oid.bool:
      return encodeBool;
    case Oid.int2:
      return encodeInt2;
    case Oid.int4:
      return encodeInt4;
    case Oid.int8:
      return encodeInt8;
    case Oid.oid:
      return encodeOid;
    case Oid.float4:
      return encodeFloat4;
    case Oid.float8:
      return encodeFloat8;
    case Oid.numeric:
      return encodeNumeric;
    case Oid.text:
    case Oid.varchar:
    case Oid.bpchar:
    case Oid.name:
      return encodeText;
    case Oid.bytea:
      return encodeBytea;
    case Oid.json:
      return encodeJson;
    case Oid.jsonb:
      return encodeJsonb;
    case Oid.uuid:
      return encodeUuid;
    case Oid.date:
      return encodeDate;
    case Oid.timestamp:
      return encodeTimestamp;
    case Oid.timestamptz:
      return encodeTimestamptz;
    default:
      return null;
  }
}

/** The encoder for types whose binary input is their text (enums): UTF-8 text. */
export const textEncoder: BinaryEncoder = encodeText;
