/**
 * UTF-8 bytes of a receive buffer as a string, the way that costs least for
 * the short values COPY rows are full of: up to 12 ASCII bytes by
 * fixed-arity `String.fromCharCode` calls (about a third of a decoder call's
 * time, and a flat string: V8 only makes ropes from 13 characters), anything
 * longer or not ASCII by `Buffer#toString`, itself about a third of
 * TextDecoder's time.
 *
 * @module
 */
import { Buffer } from "node:buffer";
import { utf8 } from "../protocol/backend.ts";

/** A node Buffer over the last buffer read from, whose `toString` decodes UTF-8 fastest. */
let viewed: Uint8Array | null = null;
let view: Buffer = Buffer.alloc(0);

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
  if (end - start <= 12) return shortAscii(buf, start, end - start) ?? utf8(buf, start, end);
  if (buf !== viewed) {
    viewed = buf;
    view = Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength);
  }
  return view.toString("utf8", start, end);
}

/**
 * ASCII that a decoder wrote into its own scratch buffer, through that
 * buffer's own Buffer view (passing the scratch to `text` would replace the
 * cached view of the read buffer, and make a new one per value).
 */
export function asciiText(scratch: Buffer, start: number, end: number): string {
  if (end - start <= 12) return shortAscii(scratch, start, end - start)!;
  return scratch.toString("latin1", start, end);
}
