/**
 * The CopyData messages of a `COPY ... TO STDOUT` that arrived before the
 * consumer asked for their rows, kept as bytes in one reused buffer.
 *
 * Kept undecoded, a row costs its wire size (a few hundred bytes, off the
 * JavaScript heap) instead of the objects, strings and arrays it decodes to,
 * and those are made only when the consumer asks for them, so they die young
 * instead of surviving garbage collections while they wait.
 *
 * Messages are not copied one by one (a copy of a range needs a view of it,
 * one more object per row): consecutive messages of the receive buffer are
 * remembered as one run, copied whole, headers included, by {@link flush},
 * which must run before the receive buffer is read into again.
 *
 * @module
 */
import { i32, ProtocolViolation } from "../protocol/backend.ts";

/** A message's type byte and length. */
const HEADER = 5;

/** A FIFO of backend messages over one growable byte buffer. */
export class CopyBacklog {
  /** The bytes; the body {@link shift} found is `buf[start, end)`. */
  buf: Uint8Array;
  /** Start of the body the last successful {@link shift} found. */
  start = 0;
  /** End (exclusive) of that body. */
  end = 0;
  #head = 0; // first byte not yet shifted
  #tail = 0; // end of the bytes copied in
  #copied = 0; // messages in [#head, #tail)
  #run: Uint8Array | null = null; // the receive buffer holding the run not yet copied
  #runStart = 0; // its first message's header
  #runEnd = 0; // its last message's end
  #runCount = 0;

  constructor(capacity = 65536) {
    this.buf = new Uint8Array(capacity);
  }

  /** Messages queued (copied or not yet). */
  get count(): number {
    return this.#copied + this.#runCount;
  }

  /**
   * Queues the message whose body is `src[start, end)`, its 5-byte header
   * right before it (as the framer leaves it); `src` must stay as it is
   * until {@link flush}.
   */
  push(src: Uint8Array, start: number, end: number): void {
    if (src !== this.#run || start !== this.#runEnd + HEADER) {
      this.flush();
      this.#run = src;
      this.#runStart = start - HEADER;
    }
    this.#runEnd = end;
    this.#runCount++;
  }

  /** Copies the pending run in: the receive buffer may change after this. */
  flush(): void {
    const src = this.#run;
    if (src === null) return;
    const n = this.#runEnd - this.#runStart;
    if (this.#tail + n > this.buf.length) this.#room(n);
    this.buf.set(src.subarray(this.#runStart, this.#runEnd), this.#tail);
    this.#tail += n;
    this.#copied += this.#runCount;
    this.#run = null;
    this.#runCount = 0;
  }

  /** Takes the oldest copied message's body into `start`/`end`; false when none is. */
  shift(): boolean {
    if (this.#copied === 0) return false;
    const at = this.#head;
    const length = i32(this.buf, at + 1);
    if (length < 4 || at + 1 + length > this.#tail) {
      throw new ProtocolViolation(`a queued message declares a length of ${length}`);
    }
    this.start = at + HEADER;
    this.end = at + 1 + length;
    this.#head = this.end;
    if (--this.#copied === 0) this.#head = this.#tail = 0; // the body stays until the next flush
    return true;
  }

  /** Drops every queued message. */
  clear(): void {
    this.#copied =
      this.#head =
      this.#tail =
      this.#runCount =
        0;
    this.#run = null;
  }

  /** Makes room for `n` more bytes: moves the queued ones to the front, or grows. */
  #room(n: number): void {
    const queued = this.#tail - this.#head;
    if (queued + n > this.buf.length / 2) {
      const next = new Uint8Array(Math.max(this.buf.length * 2, queued + n));
      next.set(this.buf.subarray(this.#head, this.#tail));
      this.buf = next;
    } else this.buf.copyWithin(0, this.#head, this.#tail);
    this.#head = 0;
    this.#tail = queued;
  }
}
