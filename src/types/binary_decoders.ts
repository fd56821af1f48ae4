/**
 * Decoders for PostgreSQL's binary output format, for the types where it
 * gives exactly the value the text decoders give and costs less on both
 * ends: the server skips formatting (timestamptz_out converts time zones and
 * prints, float8out searches for the shortest digits) and the client reads
 * fixed-width numbers instead of parsing text.
 *
 * Left in text on purpose: float4 (its binary value is the float32, not the
 * shortest decimal the text gives), int8 (a string by default), numeric,
 * json, uuid, and the character types, whose binary form is the same text.
 *
 * @module
 */
import { bufferModule } from "../builtins.ts";
import { Oid } from "./oids.ts";
import type { ByteDecoderFn } from "./byte_decoders.ts";
import { wallClockDate } from "./text_decoders.ts";
import { i16, i32, ProtocolViolation } from "../protocol/backend.ts";
import { DAY_MS, MAX_TIME, PG_EPOCH_MS } from "./formats.ts";

function width(start: number, end: number, size: number, type: string): void {
  if (end - start !== size) {
    throw new ProtocolViolation(`binary ${type} must be ${size} bytes, got ${end - start}`);
  }
}

const decodeBool: ByteDecoderFn = (buf, start, end) => {
  width(start, end, 1, "bool");
  return buf[start] !== 0;
};

const decodeInt2: ByteDecoderFn = (buf, start, end) => {
  width(start, end, 2, "int2");
  return i16(buf, start);
};

const decodeInt4: ByteDecoderFn = (buf, start, end) => {
  width(start, end, 4, "int4");
  return i32(buf, start);
};

const decodeOid: ByteDecoderFn = (buf, start, end) => {
  width(start, end, 4, "oid");
  return i32(buf, start) >>> 0;
};

/** One scratch cell to reinterpret eight big-endian bytes as a float64. */
const f64 = new Float64Array(1);
const f64Bytes = new Uint8Array(f64.buffer);
const littleEndian = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

const decodeFloat8: ByteDecoderFn = (buf, start, end) => {
  width(start, end, 8, "float8");
  if (littleEndian) { for (let i = 0; i < 8; i++) f64Bytes[i] = buf[start + 7 - i]; }
  else for (let i = 0; i < 8; i++) f64Bytes[i] = buf[start + i];
  return f64[0];
};

/**
 * A copy of the bytes, as a Buffer (a Uint8Array), like postgres.js gives.
 * `allocUnsafe` carves small ones out of Buffer's shared pool, as Node's
 * `Buffer.from` does, instead of a new ArrayBuffer per value (about 6x
 * faster); every byte is overwritten at once.
 */
const decodeBytea: ByteDecoderFn = (buf, start, end) => {
  const n = end - start;
  const out = bufferModule().Buffer.allocUnsafe(n);
  if (n > 64) out.set(buf.subarray(start, end));
  else for (let i = 0; i < n; i++) out[i] = buf[start + i]; // no view to make for a few bytes
  return out;
};

/** Microseconds since 2000-01-01 as milliseconds, rounded down as the text parser truncates. */
function microsToMs(buf: Uint8Array, start: number): number {
  const hi = i32(buf, start);
  const lo = i32(buf, start + 4) >>> 0;
  if (hi === 0x7fffffff && lo === 0xffffffff) return Infinity; // 'infinity'
  if (hi === -0x80000000 && lo === 0) return -Infinity; // '-infinity'
  // floor((hi * 2^32 + lo) / 1000) without BigInt, exactly: 2^32 = 4294967 * 1000 + 296, so
  // the quotient is hi * 4294967 plus floor((hi * 296 + lo) / 1000), all well below 2^53.
  // |hi * 296 + lo| < 2^40, so the double division is exact enough for floor to be exact
  // (no double modulo, which costs a call to fmod).
  return hi * 4294967 + Math.floor((hi * 296 + lo) / 1000);
}

const decodeTimestamptz: ByteDecoderFn = (buf, start, end) => {
  width(start, end, 8, "timestamptz");
  const ms = microsToMs(buf, start);
  if (ms === Infinity) return new Date(MAX_TIME);
  if (ms === -Infinity) return new Date(-MAX_TIME);
  return new Date(ms + PG_EPOCH_MS);
};

const decodeTimestamp: ByteDecoderFn = (buf, start, end) => {
  width(start, end, 8, "timestamp");
  const ms = microsToMs(buf, start);
  if (ms === Infinity) return new Date(MAX_TIME);
  if (ms === -Infinity) return new Date(-MAX_TIME);
  // The value is a wall-clock reading: its fields, placed in local time.
  return wallClockDate(ms + PG_EPOCH_MS);
};

const decodeDate: ByteDecoderFn = (buf, start, end) => {
  width(start, end, 4, "date");
  const days = i32(buf, start);
  if (days === 0x7fffffff) return new Date(MAX_TIME);
  if (days === -0x80000000) return new Date(-MAX_TIME);
  return new Date(days * DAY_MS + PG_EPOCH_MS);
};

/** The binary decoder for a type, or null where the column should stay in text. */
export function binaryDecoderFor(oid: number): ByteDecoderFn | null {
  switch (oid) {
    case Oid.bool:
      return decodeBool;
    case Oid.int2:
      return decodeInt2;
    case Oid.int4:
      return decodeInt4;
    case Oid.oid:
      return decodeOid;
    case Oid.float8:
      return decodeFloat8;
    case Oid.bytea:
      return decodeBytea;
    case Oid.date:
      return decodeDate;
    case Oid.timestamp:
      return decodeTimestamp;
    case Oid.timestamptz:
      return decodeTimestamptz;
    default:
      return null;
  }
}
