/**
 * A connection's byte stream over PGlite's session: what the connection writes goes to
 * `execProtocolRawStream`, one call per write (so a flush of pipelined queries costs one
 * call), and the answer's bytes are queued for the connection's read loop as PGlite produces
 * them. Calls run one at a time through the session.
 *
 * Three things differ from a socket, and are handled here:
 * - Startup: see startup.ts.
 * - Terminate ends the stream and is never handed over (PGlite would exit the process).
 * - COPY FROM STDIN: PGlite cannot wait for data between calls (a COPY that runs out of input
 *   ends the whole instance). A simple query that starts one is held, the client is told the
 *   COPY began (a CopyInResponse of our own), and the query goes with all its data in one call
 *   once CopyDone or CopyFail arrives; PGlite's own CopyInResponse is then left out. Every call
 *   ends with a CopyFail, which PGlite ignores outside a COPY, so a COPY FROM STDIN that was not
 *   recognised (sent by the extended protocol, or after another statement in the same query)
 *   fails with that message instead of taking the instance down.
 */
import { ConnectionError } from "../errors.ts";
import { Backend, utf8 } from "../protocol/backend.ts";
import * as fe from "../protocol/frontend.ts";
import { Writer } from "../protocol/writer.ts";
import { startsCopyIn } from "./copy_in.ts";
import { concat, eachMessage, Frames } from "./frames.ts";
import type { Session } from "./session.ts";
import { readStartup, settingsQuery, startupAnswer } from "./startup.ts";

const QUERY = 0x51; // Q
const COPY_DONE = 0x63; // c
const COPY_FAIL = 0x66; // f
const TERMINATE = 0x58; // X

function encoded(encode: (w: Writer) => void): Uint8Array {
  const w = new Writer(256);
  encode(w);
  return w.buf.slice(0, w.length);
}

/** Ends every call: see the module's comment. */
const STRAY_COPY_FAIL = encoded((w) =>
  fe.copyFail(
    w,
    "COPY ... FROM STDIN needs query.writable() in pgpipe, as a query of its own " +
      "(over PGlite its data must come in the same call)",
  )
);

/** Our CopyInResponse: text format, no column formats (pgpipe reads neither). */
const COPY_IN_RESPONSE = Uint8Array.of(Backend.CopyInResponse, 0, 0, 0, 7, 0, 0, 0);

/** An ErrorResponse FATAL 08P01 for a stream that did not open with a StartupMessage. */
const NOT_A_STARTUP = encoded((w) => {
  w.begin(Backend.ErrorResponse);
  for (const [code, value] of [["S", "FATAL"], ["V", "FATAL"], ["C", "08P01"]]) {
    w.u8(code.charCodeAt(0)).cstr(value);
  }
  w.u8(0x4d).cstr("a PGlite stream takes a StartupMessage first (no TLS, no cancel requests)");
  w.u8(0).end();
});

/** One connection's stream over a PGlite session (an `EmbeddedStream`). */
export class PGliteStream {
  #session: Session;
  #frames = new Frames();
  #started = false;
  #copy: Uint8Array[] | null = null; // a COPY FROM STDIN held with its data so far
  #chunks: Uint8Array[] = [];
  #wake: (() => void) | null = null;
  #ended = false; // no more answers: what is queued is read, then end of stream
  #error: Error | null = null;
  #closed = false;

  constructor(session: Session) {
    this.#session = session;
  }

  async read(p: Uint8Array): Promise<number | null> {
    while (this.#chunks.length === 0) {
      if (this.#error !== null) throw this.#error;
      if (this.#ended || this.#closed) return null;
      await new Promise<void>((resolve) => this.#wake = resolve);
      this.#wake = null;
    }
    let n = 0;
    while (n < p.length && this.#chunks.length > 0) {
      const chunk = this.#chunks[0];
      const take = Math.min(chunk.length, p.length - n);
      p.set(take === chunk.length ? chunk : chunk.subarray(0, take), n);
      n += take;
      if (take === chunk.length) this.#chunks.shift();
      else this.#chunks[0] = chunk.subarray(take);
    }
    return n;
  }

  /** Takes all of `p`; resolves once the calls it made have run. */
  async write(p: Uint8Array): Promise<number> {
    if (this.#closed || this.#ended) {
      throw new ConnectionError("CONNECTION_CLOSED", "the PGlite stream has ended");
    }
    const calls: Promise<void>[] = [];
    let batch: Uint8Array[] = [];
    const send = () => {
      if (batch.length > 0) calls.push(this.#call([...batch, STRAY_COPY_FAIL]));
      batch = [];
    };
    for (const m of this.#frames.push(p)) {
      if (!this.#started) {
        this.#started = true;
        calls.push(this.#startup(m));
        continue;
      }
      const type = m[0];
      if (this.#copy !== null) {
        this.#copy.push(m);
        if (type === COPY_DONE || type === COPY_FAIL) {
          calls.push(this.#copyCall([...this.#copy, STRAY_COPY_FAIL]));
          this.#copy = null;
        }
        continue;
      }
      if (type === TERMINATE) {
        send();
        this.#terminate();
        break;
      }
      if (type === QUERY && startsCopyIn(utf8(m, 5, m.length - 1))) {
        send();
        this.#copy = [m];
        calls.push(this.#session.run(() => this.#deliver(COPY_IN_RESPONSE)));
        continue;
      }
      batch.push(m);
    }
    send();
    await Promise.all(calls);
    return p.length;
  }

  /** Ends the stream at once: pending reads see its end, and the session is reset and freed. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#chunks = [];
    this.#copy = null;
    this.#wake?.();
    this.#session.release(this);
  }

  /** Queues a copy of `data` (PGlite hands a view of its memory) for the read loop. */
  #deliver(data: Uint8Array): void {
    if (this.#closed || data.length === 0) return;
    this.#chunks.push(data.slice());
    this.#wake?.();
  }

  #failed(e: unknown): never {
    this.#error ??= e instanceof Error ? e : new Error(String(e));
    this.#wake?.();
    throw this.#error;
  }

  #call(parts: Uint8Array[]): Promise<void> {
    return this.#session.call(concat(parts), (data) => this.#deliver(data))
      .catch((e) => this.#failed(e));
  }

  /** The held COPY and its data: PGlite's CopyInResponse is dropped (ours went before). */
  #copyCall(parts: Uint8Array[]): Promise<void> {
    const out: Uint8Array[] = [];
    return this.#session.call(concat(parts), (data) => out.push(data.slice())).then(() => {
      const answer = concat(out);
      let dropped = false;
      const kept: Uint8Array[] = [];
      const rest = eachMessage(answer, (type, start, end) => {
        if (type === Backend.CopyInResponse && !dropped) dropped = true;
        else kept.push(answer.subarray(start - 5, end));
      });
      kept.push(answer.subarray(rest));
      this.#deliver(concat(kept));
    }, (e) => this.#failed(e));
  }

  /** Terminate: the answers already asked for are read, then the stream ends. */
  #terminate(): void {
    this.#session.run(() => {
      this.#ended = true;
      this.#wake?.();
    });
    // Free for the next stream as soon as the work asked for is done (a pool replacing this
    // connection opens the next one at once).
    this.#session.release(this);
  }

  /** The StartupMessage, then the startup parameters (see startup.ts); one answer. */
  #startup(packet: Uint8Array): Promise<void> {
    const { code, params } = readStartup(packet);
    if (code >> 16 !== 3) {
      return this.#session.run(() => {
        this.#deliver(NOT_A_STARTUP);
        this.#ended = true;
      });
    }
    const pg = this.#session.pg;
    const collect = async (input: Uint8Array) => {
      const out: Uint8Array[] = [];
      await pg.execProtocolRawStream(input, { onRawData: (data) => out.push(data.slice()) });
      return concat(out);
    };
    return this.#session.run(async () => {
      const started = await collect(packet);
      const settings = await collect(encoded((w) => fe.query(w, settingsQuery(params))));
      const { answer, failed } = startupAnswer(started, settings, params);
      this.#deliver(answer);
      if (failed) this.#ended = true;
    }).catch((e) => this.#failed(e));
  }
}
