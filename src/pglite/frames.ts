/**
 * The client's bytes as whole messages, and the server's as whole messages. PGlite must be
 * handed whole messages only: a call ends when its input does, and a message cut short there
 * reads as the client having gone away.
 */
import { i32, ProtocolViolation } from "../protocol/backend.ts";

/** Splits what the client writes into whole messages; the first is the untyped startup packet. */
export class Frames {
  #pending: Uint8Array = new Uint8Array(0);
  #untyped = true;

  /**
   * Adds `bytes` (copied: the caller reuses its buffer); returns the messages now whole, in
   * order, each a view of one copy.
   */
  push(bytes: Uint8Array): Uint8Array[] {
    let buf: Uint8Array;
    if (this.#pending.length === 0) buf = bytes.slice();
    else {
      buf = new Uint8Array(this.#pending.length + bytes.length);
      buf.set(this.#pending);
      buf.set(bytes, this.#pending.length);
    }
    const out: Uint8Array[] = [];
    let at = 0;
    for (;;) {
      const header = this.#untyped ? 4 : 5;
      if (buf.length - at < header) break;
      const length = i32(buf, this.#untyped ? at : at + 1);
      if (length < 4) throw new ProtocolViolation(`a message claims a length of ${length}`);
      const size = length + header - 4;
      if (buf.length - at < size) break;
      out.push(buf.subarray(at, at + size));
      at += size;
      this.#untyped = false;
    }
    this.#pending = buf.subarray(at);
    return out;
  }
}

/** Calls `fn` with each whole message of `buf` (type, body start, body end); returns the rest's offset. */
export function eachMessage(
  buf: Uint8Array,
  fn: (type: number, start: number, end: number) => void,
): number {
  let at = 0;
  while (buf.length - at >= 5) {
    const end = at + 1 + i32(buf, at + 1);
    if (end > buf.length) break;
    fn(buf[at], at + 5, end);
    at = end;
  }
  return at;
}

/** Joins byte arrays into one. */
export function concat(parts: readonly Uint8Array[]): Uint8Array {
  if (parts.length === 1) return parts[0];
  let n = 0;
  for (const p of parts) n += p.length;
  const out = new Uint8Array(n);
  n = 0;
  for (const p of parts) {
    out.set(p, n);
    n += p.length;
  }
  return out;
}
