/**
 * COPY as Node streams (`query.readable()` / `query.writable()`), as
 * postgres.js gives them: `.on('data')`, `.pipe()`, `stream.pipeline()`,
 * `write()`/`end()`/`'finish'`, `destroy(err)` and `for await` work unchanged.
 */
import type { Buffer } from "node:buffer";
import type { Readable, Writable } from "node:stream";
import { bufferModule, streamModule } from "../builtins.ts";
import {
  abandonWhenCollected,
  type CopyInRequest,
  type CopyOutRequest,
  type CopyOutSink,
  reasonText,
} from "./copy_request.ts";

/**
 * A COPY TO STDOUT's data as a Node Readable of Buffers, one per CopyData
 * message (a row, in the text and CSV formats). Reading from the server pauses
 * while the stream's buffer is full and resumes when it is read; destroying
 * the stream stops the COPY, so the connection stays usable.
 *
 * A failure is emitted as `'error'` after the rows that came before it, and
 * only once someone reads the stream or listens for errors: a COPY that fails
 * before its stream is read does not throw from an `'error'` event nobody
 * could have listened to yet.
 */
export function copyReadable(req: CopyOutRequest): Readable {
  return new (copyReadableClass ??= makeCopyReadable())(req);
}

/** The class, made on first use: node:stream loads only when a program asks for a Node stream. */
let copyReadableClass: ReturnType<typeof makeCopyReadable> | undefined;

function makeCopyReadable() {
  return class CopyReadable extends streamModule().Readable {
    #req: CopyOutRequest;
    // Held here so it lives as long as the stream: the request holds it weakly while paused.
    #sink: CopyOutSink;
    #reading = false; // _read was called and nothing was pushed since
    #failure: Error | null = null; // why the COPY failed, until it is emitted

    constructor(req: CopyOutRequest) {
      super();
      this.#req = req;
      this.#sink = {
        data: (buf, start, end) => {
          this.#reading = false;
          return this.push(bufferModule().Buffer.from(buf.subarray(start, end))); // a copy: buf is reused
        },
        end: (err) => {
          if (err === null) return void this.push(null);
          this.#failure = err;
          if (this.#reading || this.listenerCount("error") > 0) this.#deliverFailure();
        },
      };
      req.connect(this.#sink);
      abandonWhenCollected(this, req);
    }

    /**
     * Emits the failure once the rows buffered before it have been read: until
     * then an empty push ends this read, and Node calls `_read` again as the
     * reader takes more.
     */
    #deliverFailure(): void {
      if (this.readableLength === 0) return void this.destroy(this.#failure!);
      this.#reading = false;
      this.push(bufferModule().Buffer.alloc(0));
    }

    override _read(): void {
      if (this.#failure !== null) return this.#deliverFailure();
      this.#reading = true;
      this.#req.pull();
    }

    override _destroy(err: Error | null, callback: (error?: Error | null) => void): void {
      this.#req.stop(reasonText(err, "the COPY stream was destroyed")); // nothing once it ended
      callback(err);
    }
  };
}

/**
 * A started COPY FROM STDIN as a Node Writable: each write is sent as CopyData
 * (writes buffered meanwhile leave together); `end()` sends CopyDone and
 * `'finish'` follows the server's confirmation; `destroy()` sends CopyFail.
 */
export function copyWritable(req: CopyInRequest): Writable {
  return new (copyWritableClass ??= makeCopyWritable())(req);
}

/** The class, made on first use: node:stream loads only when a program asks for a Node stream. */
let copyWritableClass: ReturnType<typeof makeCopyWritable> | undefined;

function makeCopyWritable() {
  return class CopyWritable extends streamModule().Writable {
    #req: CopyInRequest;

    constructor(req: CopyInRequest) {
      super({ decodeStrings: true });
      this.#req = req;
      abandonWhenCollected(this, req);
    }

    override _write(
      chunk: Buffer,
      _encoding: string,
      callback: (error?: Error | null) => void,
    ): void {
      this.#req.send(chunk).then(() => callback(), callback);
    }

    override _writev(
      chunks: { chunk: Buffer; encoding: string }[],
      callback: (error?: Error | null) => void,
    ): void {
      this.#req.send(chunks.map((c) => c.chunk)).then(() => callback(), callback);
    }

    override _final(callback: (error?: Error | null) => void): void {
      this.#req.complete().then(() => callback(), callback);
    }

    override _destroy(err: Error | null, callback: (error?: Error | null) => void): void {
      // CopyFail unless the COPY already ended: the server aborts it and the table is untouched.
      this.#req.stop(reasonText(err, "the COPY stream was destroyed"));
      callback(err);
    }
  };
}
