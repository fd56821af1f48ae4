/**
 * A growable byte buffer that frontend messages are encoded into.
 *
 * Messages are framed in place: `begin(type)` reserves the length field and
 * `end()` fills it in, so a message is never built twice or copied.
 */

const encoder = new TextEncoder();

/** Appends big-endian integers, C strings and raw bytes to a reusable buffer. */
export class Writer {
  /** The backing storage; only `[0, length)` is meaningful. */
  buf: Uint8Array;
  /** The number of bytes written so far. */
  length = 0;
  #view: DataView;
  #start = -1;

  constructor(capacity = 16384) {
    this.buf = new Uint8Array(capacity);
    this.#view = new DataView(this.buf.buffer);
  }

  /** Makes room for `n` more bytes, doubling so appends stay amortised O(1). */
  ensure(n: number): void {
    const need = this.length + n;
    if (need <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < need) size *= 2;
    const next = new Uint8Array(size);
    next.set(this.buf.subarray(0, this.length));
    this.buf = next;
    this.#view = new DataView(next.buffer);
  }

  /** Starts a message of the given type byte (0 for the untyped startup packets). */
  begin(type: number): this {
    this.ensure(5);
    if (type !== 0) this.buf[this.length++] = type;
    this.#start = this.length;
    this.length += 4;
    return this;
  }

  /** Ends the current message by writing its length (which counts itself). */
  end(): this {
    this.#view.setInt32(this.#start, this.length - this.#start);
    this.#start = -1;
    return this;
  }

  /** Appends one byte. */
  u8(v: number): this {
    this.ensure(1);
    this.buf[this.length++] = v;
    return this;
  }

  /** Appends a big-endian 16-bit integer. */
  i16(v: number): this {
    this.ensure(2);
    this.#view.setInt16(this.length, v);
    this.length += 2;
    return this;
  }

  /** Appends a big-endian 32-bit integer. */
  i32(v: number): this {
    this.ensure(4);
    this.#view.setInt32(this.length, v);
    this.length += 4;
    return this;
  }

  /** Writes a big-endian 32-bit integer at an earlier position. */
  setI32(at: number, v: number): void {
    this.#view.setInt32(at, v);
  }

  /** Appends a string as UTF-8 without a terminator; returns its byte length. */
  str(s: string): number {
    const n = s.length;
    // ASCII is the common case and a plain loop beats encodeInto for short strings.
    if (n < 64) {
      this.ensure(n);
      const buf = this.buf;
      let pos = this.length;
      let i = 0;
      for (; i < n; i++) {
        const c = s.charCodeAt(i);
        if (c > 0x7f) break;
        buf[pos++] = c;
      }
      if (i === n) {
        this.length = pos;
        return n;
      }
    }
    this.ensure(n * 3);
    const { written } = encoder.encodeInto(s, this.buf.subarray(this.length));
    this.length += written;
    return written;
  }

  /** Appends a NUL-terminated UTF-8 string. */
  cstr(s: string): this {
    this.str(s);
    return this.u8(0);
  }

  /** Appends raw bytes. */
  bytes(b: Uint8Array): this {
    this.ensure(b.length);
    this.buf.set(b, this.length);
    this.length += b.length;
    return this;
  }

  /** Forgets everything written; keeps the storage. */
  reset(): void {
    this.length = 0;
  }
}
