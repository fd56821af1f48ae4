/**
 * Decoders that read a text-format value straight from the receive buffer,
 * for the types where making a string first would be pure garbage: bool and
 * the integer types up to 32 bits (oid included). The result equals what the
 * string decoders give for the same bytes.
 */
import { Oid } from "./oids.ts";

/** Decodes the text-format value in `buf[start, end)`. */
export type ByteDecoderFn = (buf: Uint8Array, start: number, end: number) => unknown;

const decodeBool: ByteDecoderFn = (buf, start) => buf[start] === 0x74; // "t"

/** Parses decimal digits with an optional sign; anything else gives NaN, as `+text` would. */
const decodeInteger: ByteDecoderFn = (buf, start, end) => {
  let i = start;
  const negative = buf[i] === 0x2d; // "-"
  if (negative) i++;
  if (i === end) return NaN;
  let n = 0;
  for (; i < end; i++) {
    const d = buf[i] - 0x30;
    if (d < 0 || d > 9) return NaN;
    n = n * 10 + d;
  }
  return negative ? -n : n;
};

/** The byte decoder for a type, or null where the string path is needed. */
export function byteDecoderFor(oid: number): ByteDecoderFn | null {
  switch (oid) {
    case Oid.bool:
      return decodeBool;
    case Oid.int2:
    case Oid.int4:
    case Oid.oid:
      return decodeInteger;
    default:
      return null;
  }
}
