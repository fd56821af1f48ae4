/**
 * Decoders for every field of a binary `COPY ... TO STDOUT`, where unlike a
 * query's result no column can stay in text: the types the binary results of
 * queries already use (binary_decoders.ts), plus int8, float4, numeric, the
 * character types, uuid, json, jsonb and arrays of them. Each gives exactly
 * what the text decoder gives for the same value: int8 and numeric as
 * strings (int8 as bigint with the `bigint` option), float4 as the shortest
 * decimal that reads back as the same float32, which is what the server
 * prints.
 *
 * @module
 */
import { i32, ProtocolViolation } from "../protocol/backend.ts";
import { binaryDecoderFor } from "./binary_decoders.ts";
import type { ByteDecoderFn } from "./byte_decoders.ts";
import { elementOf, Oid } from "./oids.ts";
import { readNumeric } from "./binary_numeric.ts";
import { text } from "./utf8_text.ts";
import type { DecodeOptions } from "./text_decoders.ts";
import { MAX_DIMENSIONS, TWO_32 } from "./formats.ts";

function width(start: number, end: number, size: number, type: string): void {
  if (end - start !== size) {
    throw new ProtocolViolation(`binary ${type} must be ${size} bytes, got ${end - start}`);
  }
}

/** An int8 that fits a double exactly (|v| < 2^53) as a number, else null. */
function smallInt8(buf: Uint8Array, start: number): number | null {
  const hi = i32(buf, start);
  if (hi < -0x200000 || hi >= 0x200000) return null;
  return hi * TWO_32 + (i32(buf, start + 4) >>> 0);
}

function bigInt8(buf: Uint8Array, start: number): bigint {
  return (BigInt(i32(buf, start)) << 32n) | BigInt(i32(buf, start + 4) >>> 0);
}

/** int8 as its decimal text (pgpipe's default for int8). */
const decodeInt8Text: ByteDecoderFn = (buf, start, end) => {
  width(start, end, 8, "int8");
  const small = smallInt8(buf, start);
  return small === null ? bigInt8(buf, start).toString() : String(small);
};

/** int8 as a bigint (the `bigint` option). */
const decodeInt8BigInt: ByteDecoderFn = (buf, start, end) => {
  width(start, end, 8, "int8");
  const small = smallInt8(buf, start);
  return small === null ? bigInt8(buf, start) : BigInt(small);
};

const f32 = new Float32Array(1);
const f32Bytes = new Uint8Array(f32.buffer);
const littleEndian = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/** Significant digits of a number's shortest text (`-0.00125` has 3, `1.5e-7` 2). */
function significantDigits(t: string): number {
  let count = 0;
  let leading = true;
  for (let i = 0; i < t.length; i++) {
    const c = t.charCodeAt(i);
    if (c === 101) break; // e: the exponent is not a digit of the value
    if (c < 48 || c > 57 || (leading && c === 48)) continue; // sign, point, leading zeros
    leading = false;
    count++;
  }
  return count;
}

/** float4 as the shortest decimal that is the same float32 (float4out's output, as a number). */
const decodeFloat4: ByteDecoderFn = (buf, start, end) => {
  width(start, end, 4, "float4");
  if (littleEndian) { for (let i = 0; i < 4; i++) f32Bytes[i] = buf[start + 3 - i]; }
  else for (let i = 0; i < 4; i++) f32Bytes[i] = buf[start + i];
  const v = f32[0];
  // Integers of up to 7 digits are their own shortest form.
  if (!Number.isFinite(v) || (Number.isInteger(v) && v < 1e7 && v > -1e7)) return v;
  // A double's shortest form of at most 7 significant digits is also the float32's: every
  // shorter decimal is further away than half a float32 ulp (2^-24 relative, under 1e-7).
  if (significantDigits(String(v)) <= 7) return v;
  // Else the fewest digits (1 to 9) that read back as this float32: more digits never
  // round-trip worse, so a binary search needs 3 or 4 toPrecision calls instead of up to 9.
  let lo = 1;
  let hi = 9;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (Math.fround(+v.toPrecision(mid)) === v) hi = mid;
    else lo = mid + 1;
  }
  return +v.toPrecision(lo);
};

/** The character types, enums and anything else whose binary form is its UTF-8 text. */
export const decodeText: ByteDecoderFn = text;

const decodeJson: ByteDecoderFn = (buf, start, end) => JSON.parse(text(buf, start, end));

/** jsonb's binary output is a version byte (1) and the JSON text. */
const decodeJsonb: ByteDecoderFn = (buf, start, end) => {
  if (end - start < 1 || buf[start] !== 1) {
    throw new ProtocolViolation(`unsupported binary jsonb version ${buf[start]}`);
  }
  return JSON.parse(text(buf, start + 1, end));
};

/** Each byte's two lowercase hex digits, as character codes (high digit in the top byte). */
const HEX_CODES = new Uint16Array(256);
for (let i = 0; i < 256; i++) {
  const digits = (i < 16 ? "0" : "") + i.toString(16);
  HEX_CODES[i] = (digits.charCodeAt(0) << 8) | digits.charCodeAt(1);
}
/**
 * The text form's character codes are written here, then made into one string by one
 * `String.fromCharCode.apply`: over a plain array of small integers V8 takes its fast path
 * (about as fast as `Buffer#toString`, which would load node:buffer), over a typed array not.
 */
const uuidChars: number[] = [];
for (let p = 0; p < 36; p++) uuidChars.push(p === 8 || p === 13 || p === 18 || p === 23 ? 45 : 48);

const decodeUuid: ByteDecoderFn = (buf, start, end) => {
  width(start, end, 16, "uuid");
  let p = 0;
  for (let i = 0; i < 16; i++) {
    if (i === 4 || i === 6 || i === 8 || i === 10) p++; // over a hyphen
    const h = HEX_CODES[buf[start + i]];
    uuidChars[p] = h >>> 8;
    uuidChars[p + 1] = h & 255;
    p += 2;
  }
  return String.fromCharCode.apply(null, uuidChars);
};

/**
 * A decoder for binary arrays whose elements `element` decodes: nested arrays
 * per dimension, null for NULL elements (lower bounds are dropped, as the
 * text decoder drops them).
 */
export function arrayDecoder(element: ByteDecoderFn): ByteDecoderFn {
  return (buf, start, end) => {
    if (end - start < 12) throw new ProtocolViolation("binary array is shorter than its header");
    const ndim = i32(buf, start);
    if (ndim === 0) return [];
    if (ndim < 0 || ndim > MAX_DIMENSIONS || end - start < 12 + 8 * ndim) {
      throw new ProtocolViolation(`binary array with ${ndim} dimensions`);
    }
    if (ndim === 1) return readFlat(buf, start + 20, end, i32(buf, start + 12), element);
    const dims: number[] = [];
    for (let d = 0; d < ndim; d++) dims.push(i32(buf, start + 12 + 8 * d));
    const at = [start + 12 + 8 * ndim];
    const out = readLevel(buf, at, end, dims, 0, element);
    if (at[0] !== end) throw new ProtocolViolation("binary array has bytes after its elements");
    return out;
  };
}

/** The elements of a one-dimensional array, read in one loop. */
function readFlat(
  buf: Uint8Array,
  p: number,
  end: number,
  n: number,
  element: ByteDecoderFn,
): unknown[] {
  if (n < 0) throw new ProtocolViolation(`binary array dimension of ${n}`);
  const out = new Array<unknown>(n);
  for (let i = 0; i < n; i++) {
    if (end - p < 4) throw new ProtocolViolation("binary array is truncated");
    const len = i32(buf, p);
    p += 4;
    if (len === -1) out[i] = null;
    else {
      if (len < 0 || len > end - p) throw new ProtocolViolation("binary array is truncated");
      out[i] = element(buf, p, p + len);
      p += len;
    }
  }
  if (p !== end) throw new ProtocolViolation("binary array has bytes after its elements");
  return out;
}

function readLevel(
  buf: Uint8Array,
  at: number[],
  end: number,
  dims: readonly number[],
  depth: number,
  element: ByteDecoderFn,
): unknown[] {
  const n = dims[depth];
  if (n < 0) throw new ProtocolViolation(`binary array dimension of ${n}`);
  const out = new Array<unknown>(n);
  const leaf = depth === dims.length - 1;
  for (let i = 0; i < n; i++) {
    if (!leaf) {
      out[i] = readLevel(buf, at, end, dims, depth + 1, element);
      continue;
    }
    const p = at[0];
    if (end - p < 4) throw new ProtocolViolation("binary array is truncated");
    const len = i32(buf, p);
    if (len === -1) {
      out[i] = null;
      at[0] = p + 4;
      continue;
    }
    if (len < 0 || len > end - p - 4) throw new ProtocolViolation("binary array is truncated");
    out[i] = element(buf, p + 4, p + 4 + len);
    at[0] = p + 4 + len;
  }
  return out;
}

/** A scalar decoder, or null where pgpipe has none for the binary form. */
function scalarDecoder(oid: number, opts: DecodeOptions): ByteDecoderFn | null {
  switch (oid) {
    case Oid.int8:
      return opts.bigint ? decodeInt8BigInt : decodeInt8Text;
    case Oid.float4:
      return decodeFloat4;
    case Oid.numeric:
      return readNumeric;
    case Oid.text:
    case Oid.varchar:
    case Oid.bpchar:
    case Oid.name:
      return decodeText;
    case Oid.json:
      return decodeJson;
    case Oid.jsonb:
      return decodeJsonb;
    case Oid.uuid:
      return decodeUuid;
    default:
      return binaryDecoderFor(oid);
  }
}

/**
 * The decoder for a built-in type's binary COPY field (arrays of them too),
 * or null where the value must be read from the text format instead.
 */
export function copyDecoderFor(oid: number, opts: DecodeOptions): ByteDecoderFn | null {
  const scalar = scalarDecoder(oid, opts);
  if (scalar !== null) return scalar;
  const element = elementOf[oid];
  if (element === undefined) return null;
  const decodeElement = scalarDecoder(element, opts);
  return decodeElement === null ? null : arrayDecoder(decodeElement);
}
