/**
 * The framing of COPY data, both formats, as bytes: what goes around the
 * values of `COPY ... FROM STDIN` and how the rows of `COPY ... TO STDOUT`
 * are cut out of the server's CopyData messages.
 *
 * Binary: an 11-byte signature, a flags word and a header extension, then per
 * row a 16-bit field count and each field as a 32-bit length (-1: NULL) and
 * its bytes, and a count of -1 at the end. Text: one line per row, fields
 * separated by tabs, `\N` for NULL, backslash escapes for tab, newline,
 * carriage return and backslash.
 *
 * The server sends one row per CopyData message, but the protocol allows any
 * split, so the readers carry a partial row over to the next message.
 *
 * @module
 */
import type { Writer } from "../protocol/writer.ts";
import { i16, i32, ProtocolViolation, utf8 } from "../protocol/backend.ts";

/** `PGCOPY\n\377\r\n\0`: the first bytes of every binary COPY stream. */
export const BINARY_SIGNATURE: Uint8Array = new Uint8Array([
  0x50,
  0x47,
  0x43,
  0x4f,
  0x50,
  0x59,
  0x0a,
  0xff,
  0x0d,
  0x0a,
  0x00,
]);
/** Signature, flags and extension length. */
const HEADER_BYTES = 19;
/** Flags bit 16: every row starts with an OID field (`WITH OIDS`, gone since PostgreSQL 12). */
const HAS_OIDS = 1 << 16;

/** Appends the binary COPY header: signature, no flags, no extension. */
export function writeBinaryHeader(w: Writer): void {
  w.bytes(BINARY_SIGNATURE).i32(0).i32(0);
}

/** Appends the binary COPY trailer (a field count of -1). */
export function writeBinaryTrailer(w: Writer): void {
  w.i16(-1);
}

/**
 * Receives one row: field `i` is `buf[fields[2i], fields[2i + 1])`, or NULL
 * when `fields[2i]` is -1. `buf` is only valid during the call. `out` is
 * what the caller passed to `feed`: where the decoded row goes.
 */
export type BinaryRowHandler = (buf: Uint8Array, fields: Int32Array, out: unknown[]) => void;

/** The `out` of a feed given none. */
const NO_OUT: unknown[] = [];

/** Appends `buf[start, end)` to `carry` (or starts it). */
function append(carry: Uint8Array | null, buf: Uint8Array, start: number, end: number): Uint8Array {
  if (carry === null) return buf.slice(start, end);
  const joined = new Uint8Array(carry.length + end - start);
  joined.set(carry);
  joined.set(buf.subarray(start, end), carry.length);
  return joined;
}

/** Cuts rows of `columns` fields out of a binary COPY stream, message by message. */
export class BinaryCopyReader {
  readonly #columns: number;
  readonly #fields: Int32Array;
  readonly #row: BinaryRowHandler;
  #header = false;
  #ended = false;
  #carry: Uint8Array | null = null;

  /** Rows must have `columns` fields; each goes to `row`. */
  constructor(columns: number, row: BinaryRowHandler) {
    this.#columns = columns;
    this.#fields = new Int32Array(columns * 2);
    this.#row = row;
  }

  /** Whether the trailer has been read. */
  get ended(): boolean {
    return this.#ended;
  }

  /** Whether a partial row or header is waiting for more bytes. */
  get partial(): boolean {
    return this.#carry !== null || !this.#header;
  }

  /**
   * Reads one CopyData body, handing each row and `out` to the row handler;
   * throws a ProtocolViolation for malformed data.
   */
  feed(buf: Uint8Array, start: number, end: number, out: unknown[] = NO_OUT): void {
    if (this.#carry !== null) {
      const joined = append(this.#carry, buf, start, end);
      this.#carry = null;
      const at = this.#parse(joined, 0, joined.length, out);
      if (at < joined.length) this.#carry = joined.subarray(at);
      return;
    }
    const at = this.#parse(buf, start, end, out);
    if (at < end) this.#carry = buf.slice(at, end);
  }

  /** Parses whole rows; returns where the unparsed rest starts. */
  #parse(buf: Uint8Array, at: number, end: number, out: unknown[]): number {
    if (!this.#header) {
      if (end - at < HEADER_BYTES) return at;
      for (let i = 0; i < BINARY_SIGNATURE.length; i++) {
        if (buf[at + i] !== BINARY_SIGNATURE[i]) {
          throw new ProtocolViolation("binary COPY data does not start with its signature");
        }
      }
      if ((i32(buf, at + 11) & HAS_OIDS) !== 0) {
        throw new ProtocolViolation("binary COPY data with OIDs is not supported");
      }
      const extension = i32(buf, at + 15);
      if (extension < 0) throw new ProtocolViolation("binary COPY header extension is negative");
      if (end - at < HEADER_BYTES + extension) return at;
      at += HEADER_BYTES + extension;
      this.#header = true;
    }
    const n = this.#columns;
    const fields = this.#fields;
    while (at < end) {
      if (this.#ended) throw new ProtocolViolation("binary COPY data after its trailer");
      if (end - at < 2) return at;
      const count = i16(buf, at);
      if (count === -1) {
        this.#ended = true;
        at += 2;
        continue;
      }
      if (count !== n) {
        throw new ProtocolViolation(`binary COPY row has ${count} fields, expected ${n}`);
      }
      let p = at + 2;
      for (let i = 0; i < n; i++) {
        if (end - p < 4) return at;
        const len = i32(buf, p);
        p += 4;
        if (len === -1) {
          fields[2 * i] = -1;
          continue;
        }
        if (len < -1) throw new ProtocolViolation(`binary COPY field length ${len}`);
        if (end - p < len) return at;
        fields[2 * i] = p;
        fields[2 * i + 1] = p + len;
        p += len;
      }
      this.#row(buf, fields, out);
      at = p;
    }
    return at;
  }
}

// ---------------------------------------------------------------------------------------
// text format

const TAB = 9;
const NEWLINE = 10;
const BACKSLASH = 92;

/** Appends `text` escaped for a text COPY field (`\N` for null). */
export function writeTextField(w: Writer, text: string | null): void {
  if (text === null) {
    w.u8(BACKSLASH).u8(78); // \N
    return;
  }
  let escaped = text;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === BACKSLASH || c === TAB || c === NEWLINE || c === 13) {
      escaped = text.replace(/[\\\t\n\r]/g, (ch) => ESCAPES[ch]);
      break;
    }
  }
  w.str(escaped);
}

const ESCAPES: Record<string, string> = { "\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r" };

/**
 * Receives one row of a text COPY stream: each field's text, or null for
 * NULL, and the `out` given to `feed` (see BinaryRowHandler).
 */
export type TextRowHandler = (values: (string | null)[], out: unknown[]) => void;

/** Values of `\b \f \n \r \t \v` after a backslash. */
const LETTER_ESCAPES: Record<number, number> = {
  98: 8,
  102: 12,
  110: 10,
  114: 13,
  116: 9,
  118: 11,
};

/** Cuts rows of `columns` fields out of a text COPY stream, line by line. */
export class TextCopyReader {
  readonly #columns: number;
  readonly #row: TextRowHandler;
  #carry: Uint8Array | null = null;
  #scratch = new Uint8Array(256);

  /** Rows must have `columns` fields; each goes to `row`. */
  constructor(columns: number, row: TextRowHandler) {
    this.#columns = columns;
    this.#row = row;
  }

  /** Whether a partial line is waiting for more bytes. */
  get partial(): boolean {
    return this.#carry !== null;
  }

  /**
   * Reads one CopyData body, handing each row and `out` to the row handler;
   * throws a ProtocolViolation for malformed data.
   */
  feed(buf: Uint8Array, start: number, end: number, out: unknown[] = NO_OUT): void {
    if (this.#carry !== null) {
      buf = append(this.#carry, buf, start, end);
      start = 0;
      end = buf.length;
      this.#carry = null;
    }
    let line = start;
    for (let i = start; i < end; i++) {
      if (buf[i] !== NEWLINE) continue;
      this.#line(buf, line, i, out);
      line = i + 1;
    }
    if (line < end) this.#carry = buf.slice(line, end);
  }

  #line(buf: Uint8Array, start: number, end: number, out: unknown[]): void {
    if (end - start === 2 && buf[start] === BACKSLASH && buf[start + 1] === 46) return; // \.
    const values: (string | null)[] = new Array(this.#columns);
    let field = start;
    let n = 0;
    for (let i = start; i <= end; i++) {
      if (i < end && buf[i] !== TAB) continue;
      if (n === this.#columns) {
        throw new ProtocolViolation(`text COPY row has more than ${this.#columns} fields`);
      }
      values[n++] = this.#field(buf, field, i);
      field = i + 1;
    }
    if (n !== this.#columns) {
      throw new ProtocolViolation(`text COPY row has ${n} fields, expected ${this.#columns}`);
    }
    this.#row(values, out);
  }

  /** One field's text with its escapes resolved. */
  #field(buf: Uint8Array, start: number, end: number): string | null {
    let i = start;
    while (i < end && buf[i] !== BACKSLASH) i++;
    if (i === end) return utf8(buf, start, end);
    if (end - start === 2 && buf[start] === BACKSLASH && buf[start + 1] === 78) return null; // \N
    if (this.#scratch.length < end - start) this.#scratch = new Uint8Array(end - start);
    const out = this.#scratch;
    let n = 0;
    for (i = start; i < end; i++) {
      const c = buf[i];
      if (c !== BACKSLASH || i + 1 === end) {
        out[n++] = c;
        continue;
      }
      const next = buf[++i];
      const letter = LETTER_ESCAPES[next];
      if (letter !== undefined) out[n++] = letter;
      else if (next >= 48 && next <= 55) { // \ooo: one to three octal digits
        let v = next - 48;
        for (let k = 0; k < 2 && i + 1 < end && buf[i + 1] >= 48 && buf[i + 1] <= 55; k++) {
          v = v * 8 + buf[++i] - 48;
        }
        out[n++] = v & 0xff;
      } else if (next === 120 && i + 1 < end && hexDigit(buf[i + 1]) >= 0) { // \xhh
        let v = hexDigit(buf[++i]);
        if (i + 1 < end && hexDigit(buf[i + 1]) >= 0) v = v * 16 + hexDigit(buf[++i]);
        out[n++] = v;
      } else out[n++] = next; // \\ and any other character stand for themselves
    }
    return utf8(out, 0, n);
  }
}

function hexDigit(c: number): number {
  if (c >= 48 && c <= 57) return c - 48;
  const lower = c | 32;
  return lower >= 97 && lower <= 102 ? lower - 87 : -1;
}
