/**
 * UTF-8 bytes of a receive buffer as a string, the way that costs least for
 * the short values COPY rows are full of: up to 12 ASCII bytes by
 * fixed-arity `String.fromCharCode` calls (about a third of a decoder call's
 * time, and a flat string: V8 only makes ropes from 13 characters), anything
 * longer or not ASCII by the protocol's `utf8()` (`Buffer#toString` over a
 * view kept on the receive buffer, about a third of TextDecoder's time, with
 * the same strict re-decode of invalid bytes as every other text value).
 *
 * @module
 */
import { utf8 } from "../protocol/backend.ts";

const fromCodes = String.fromCharCode;

/** Up to 12 ASCII bytes as a flat string by one call; null when a byte is not ASCII. */
function shortAscii(b: Uint8Array, s: number, n: number): string | null {
  let bits = 0;
  for (let i = s; i < s + n; i++) bits |= b[i];
  if (bits > 0x7f) return null;
  switch (n) {
    case 0:
      return "";
    case 1:
      return fromCodes(b[s]);
    case 2:
      return fromCodes(b[s], b[s + 1]);
    case 3:
      return fromCodes(b[s], b[s + 1], b[s + 2]);
    case 4:
      return fromCodes(b[s], b[s + 1], b[s + 2], b[s + 3]);
    case 5:
      return fromCodes(b[s], b[s + 1], b[s + 2], b[s + 3], b[s + 4]);
    case 6:
      return fromCodes(b[s], b[s + 1], b[s + 2], b[s + 3], b[s + 4], b[s + 5]);
    case 7:
      return fromCodes(b[s], b[s + 1], b[s + 2], b[s + 3], b[s + 4], b[s + 5], b[s + 6]);
    case 8:
      return fromCodes(b[s], b[s + 1], b[s + 2], b[s + 3], b[s + 4], b[s + 5], b[s + 6], b[s + 7]);
    case 9:
      return fromCodes(
        b[s],
        b[s + 1],
        b[s + 2],
        b[s + 3],
        b[s + 4],
        b[s + 5],
        b[s + 6],
        b[s + 7],
        b[s + 8],
      );
    case 10:
      return fromCodes(
        b[s],
        b[s + 1],
        b[s + 2],
        b[s + 3],
        b[s + 4],
        b[s + 5],
        b[s + 6],
        b[s + 7],
        b[s + 8],
        b[s + 9],
      );
    case 11:
      return fromCodes(
        b[s],
        b[s + 1],
        b[s + 2],
        b[s + 3],
        b[s + 4],
        b[s + 5],
        b[s + 6],
        b[s + 7],
        b[s + 8],
        b[s + 9],
        b[s + 10],
      );
    default:
      return fromCodes(
        b[s],
        b[s + 1],
        b[s + 2],
        b[s + 3],
        b[s + 4],
        b[s + 5],
        b[s + 6],
        b[s + 7],
        b[s + 8],
        b[s + 9],
        b[s + 10],
        b[s + 11],
      );
  }
}

/** The UTF-8 text of `buf[start, end)`. */
export function text(buf: Uint8Array, start: number, end: number): string {
  return (end - start <= 12 ? shortAscii(buf, start, end - start) : null) ?? utf8(buf, start, end);
}

/** Decodes long ASCII text: every ASCII byte is its own character in windows-1252 too. */
const asciiDecoder = new TextDecoder("windows-1252");

/**
 * ASCII that a decoder wrote into its own scratch array (passing the scratch to `text` would
 * replace the cached view of the read buffer, and make a new one per value). Built from the
 * character codes without node:buffer, whose first use loads Deno's Node compatibility layer.
 */
export function asciiText(scratch: Uint8Array, start: number, end: number): string {
  const n = end - start;
  if (n <= 12) return shortAscii(scratch, start, n)!;
  // One call takes a few thousand arguments safely; longer text (a numeric of many digits) is rare.
  if (n <= 4096) return fromCodes.apply(null, scratch.subarray(start, end) as unknown as number[]);
  return asciiDecoder.decode(scratch.subarray(start, end));
}
