/**
 * Splits the byte stream from the server into messages, in place.
 *
 * Bytes are read straight into {@link Framer.space}; {@link Framer.next} then
 * yields each complete message as a type and a body range of {@link Framer.buf}.
 * A message larger than the buffer grows it to the exact size needed, but only
 * as its bytes actually arrive, so a lying length cannot force a huge allocation.
 */
import { i32, ProtocolViolation } from "./backend.ts";

/** PostgreSQL never sends a message over 1 GiB (its allocation limit). */
export const MAX_MESSAGE_BYTES = 0x40000000;

/** Incremental message framer over a reusable receive buffer. */
export class Framer {
  /** The receive buffer; message bodies are ranges of it. */
  buf: Uint8Array;
  /** Type byte of the message found by the last successful {@link next}. */
  type = 0;
  /** Body start of that message. */
  start = 0;
  /** Body end (exclusive) of that message. */
  end = 0;
  #read = 0; // parse position
  #filled = 0; // bytes received
  #want = 0; // bytes the message at #read needs in all, once its header is known
  #whole: Uint8Array | null = null; // a view of all of buf, reused while buf stays the same

  constructor(capacity = 65536) {
    this.buf = new Uint8Array(capacity);
  }

  /** The free tail of the buffer to read socket data into (compacting or growing first). */
  space(): Uint8Array {
    if (this.#read > 0 && (this.#filled === this.buf.length || this.#want > 0)) {
      // Move the partial message to the front so it can complete in place.
      this.buf.copyWithin(0, this.#read, this.#filled);
      this.#filled -= this.#read;
      this.#read = 0;
    }
    if (this.#filled === this.buf.length) {
      const target = this.#want > this.buf.length
        ? Math.min(this.#want, this.buf.length * 4)
        : this.buf.length * 2;
      const next = new Uint8Array(target);
      next.set(this.buf.subarray(0, this.#filled));
      this.buf = next;
      this.#whole = null;
    }
    // Mostly everything was consumed: reuse one view instead of making one per read.
    if (this.#filled === 0) return this.#whole ??= this.buf.subarray(0);
    return this.buf.subarray(this.#filled);
  }

  /** Records that `n` bytes were read into {@link space}. */
  advance(n: number): void {
    this.#filled += n;
  }

  /** Finds the next complete message; false when more bytes are needed. */
  next(): boolean {
    const at = this.#read;
    const available = this.#filled - at;
    if (available < 5) {
      if (available === 0) this.#read = this.#filled = 0;
      this.#want = 0;
      return false;
    }
    const length = i32(this.buf, at + 1);
    if (length < 4 || length > MAX_MESSAGE_BYTES) {
      throw new ProtocolViolation(
        `message ${String.fromCharCode(this.buf[at])} declares an invalid length ${length}`,
      );
    }
    if (available < length + 1) {
      this.#want = length + 1;
      return false;
    }
    this.#want = 0;
    this.type = this.buf[at];
    this.start = at + 5;
    this.end = at + 1 + length;
    this.#read = this.end;
    return true;
  }

  /** Bytes received but not yet returned as messages. */
  get pending(): number {
    return this.#filled - this.#read;
  }
}
