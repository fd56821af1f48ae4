/**
 * COPY as Node streams (`query.readable()` / `query.writable()`), as
 * postgres.js gives them: `.on('data')`, `.pipe()`, `stream.pipeline()` and
 * `for await` work unchanged.
 */
import { Buffer } from "node:buffer";
import { Readable, Writable } from "node:stream";
import {
  abandonWhenCollected,
  type CopyInRequest,
  type CopyOutRequest,
  type CopyOutSink,
} from "./copy_request.ts";

/**
 * A COPY TO STDOUT's data as a Node Readable of Buffers, one per CopyData
 * message (a row, in the text and CSV formats). Reading from the server pauses
 * while the stream's buffer is full and resumes when it is read; destroying
 * the stream drops the rest of the data, so the connection stays usable.
 */
export class CopyReadable extends Readable {
  #req: CopyOutRequest;
  // Held here so it lives exactly as long as the stream: the request holds it weakly.
  #sink: CopyOutSink;

  constructor(req: CopyOutRequest) {
    super();
    this.#req = req;
    this.#sink = {
      data: (buf, start, end) => {
        const chunk = Buffer.allocUnsafe(end - start);
        chunk.set(buf.subarray(start, end));
        return this.push(chunk);
      },
      end: (err) => {
        if (err === null) this.push(null);
        else this.destroy(err);
      },
    };
    req.connect(this.#sink);
    abandonWhenCollected(this, req);
  }

  override _read(): void {
    this.#req.pull();
  }

  override _destroy(err: Error | null, callback: (error?: Error | null) => void): void {
    this.#req.discard(); // nothing if the COPY already ended
    callback(err);
  }
}

/**
 * A started COPY FROM STDIN as a Node Writable: each write is sent as CopyData
 * (writes buffered meanwhile leave together); `end()` sends CopyDone and
 * `'finish'` follows the server's confirmation; `destroy()` sends CopyFail.
 */
export class CopyWritable extends Writable {
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
    const bytes = chunks.length === 1 ? chunks[0].chunk : Buffer.concat(chunks.map((c) => c.chunk));
    this.#req.send(bytes).then(() => callback(), callback);
  }

  override _final(callback: (error?: Error | null) => void): void {
    this.#req.complete().then(() => callback(), callback);
  }

  override _destroy(err: Error | null, callback: (error?: Error | null) => void): void {
    // CopyFail unless the COPY already ended: the server aborts it and the table is untouched.
    this.#req.abort(err?.message ?? "the COPY stream was destroyed");
    callback(err);
  }
}
