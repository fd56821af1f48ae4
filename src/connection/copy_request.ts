/**
 * COPY ... FROM STDIN and COPY ... TO STDOUT as Web Streams. COPY goes over the
 * simple protocol (it takes no parameters) and is a barrier: the connection
 * serves nothing else until the COPY ends. Backpressure both ways: writes wait
 * for the socket, and a slow reader pauses reading from the server.
 */
import * as fe from "../protocol/frontend.ts";
import type { Writer } from "../protocol/writer.ts";
import { type PostgresError, QueryError } from "../errors.ts";
import type { Column } from "../protocol/backend.ts";
import type { EncodeContext, PipelineRequest, RequestIO } from "./request.ts";

const encoder = new TextEncoder();

/** The outcome of a COPY: rows copied (from the completion tag). */
export interface CopyResult {
  /** The command word (COPY). */
  command: string | null;
  /** Rows copied. */
  count: number | null;
}

/** Base for both directions: the segment's bookkeeping. */
abstract class CopyRequest implements PipelineRequest {
  readonly barrier = true;
  /** Where the pool sent it (for cancel). */
  route: PipelineRequest["route"] = undefined;
  protected io: RequestIO | null = null;
  protected failure: Error | null = null;
  protected result: CopyResult = { command: null, count: null };
  protected readonly text: string;
  /** Settles when the COPY's segment ends. */
  readonly done: Promise<CopyResult>;
  #resolve!: (r: CopyResult) => void;
  #reject!: (e: Error) => void;

  constructor(text: string) {
    this.text = text;
    this.done = new Promise((resolve, reject) => {
      this.#resolve = resolve;
      this.#reject = reject;
    });
    this.done.catch(() => {}); // observed through the stream
  }

  encode(w: Writer, _ctx: EncodeContext): void {
    fe.query(w, this.text);
  }
  attach(io: RequestIO): void {
    this.io = io;
  }
  parseComplete(): void {}
  parameterDescription(): void {}
  rowDescription(_columns: Column[]): void {}
  noData(): void {}
  dataRow(): void {}
  commandComplete(command: string, count: number | null): void {
    this.result = { command, count };
  }
  emptyQuery(): void {}
  portalSuspended(): void {}
  error(err: PostgresError): void {
    this.failure ??= err.attach(this.text, []);
  }
  ready(): void {
    this.finish();
    if (this.failure !== null) this.#reject(this.failure);
    else this.#resolve(this.result);
  }
  fail(err: Error): void {
    this.failure ??= err;
    this.finish();
    this.#reject(err);
  }
  /** Called once when the segment ends, before `done` settles. */
  protected abstract finish(): void;
}

/** COPY ... FROM STDIN: a WritableStream of bytes or strings. */
export class CopyInRequest extends CopyRequest {
  #started = false;
  #start!: { resolve(): void; reject(e: Error): void };
  /** Resolves when the server is ready for data (CopyInResponse). */
  readonly started: Promise<void>;

  constructor(text: string) {
    super(text);
    this.started = new Promise((resolve, reject) => this.#start = { resolve, reject });
    this.started.catch(() => {});
  }

  copyIn(): void {
    this.#started = true;
    this.#start.resolve();
  }

  protected finish(): void {
    if (!this.#started) {
      this.#start.reject(
        this.failure ??
          new QueryError("NOT_COPY_FROM_STDIN", "writable() needs a COPY ... FROM STDIN query"),
      );
    }
  }

  /** The stream: each chunk is sent as CopyData; close sends CopyDone, abort CopyFail. */
  stream(): WritableStream<Uint8Array | string> {
    return new WritableStream<Uint8Array | string>({
      start: () => this.started,
      write: (chunk) => {
        if (this.failure !== null) throw this.failure;
        const bytes = typeof chunk === "string" ? encoder.encode(chunk) : chunk;
        this.io!.write((w) => fe.copyData(w, bytes));
        return this.io!.flushed(); // backpressure: the next chunk waits for the socket
      },
      close: async () => {
        this.io!.write(fe.copyDone);
        await this.done;
      },
      abort: async (reason) => {
        this.io!.write((w) => fe.copyFail(w, String(reason ?? "aborted by the client")));
        await this.done.catch(() => {});
      },
    });
  }
}

/** COPY ... TO STDOUT: a ReadableStream of the server's CopyData chunks. */
export class CopyOutRequest extends CopyRequest {
  #controller: ReadableStreamDefaultController<Uint8Array> | null = null;
  #started = false;
  #discard = false; // the reader cancelled: drop the rest

  copyOut(): void {
    this.#started = true;
  }

  copyData(buf: Uint8Array, start: number, end: number): void {
    const c = this.#controller;
    if (this.#discard || c === null) return;
    c.enqueue(buf.slice(start, end));
    if ((c.desiredSize ?? 1) <= 0) this.io!.pauseReading();
  }

  copyDone(): void {}

  protected finish(): void {
    this.io?.resumeReading();
    const c = this.#controller;
    if (c === null || this.#discard) return;
    if (this.failure !== null) c.error(this.failure);
    else if (!this.#started) {
      c.error(new QueryError("NOT_COPY_TO_STDOUT", "readable() needs a COPY ... TO STDOUT query"));
    } else c.close();
  }

  /** The stream; `highWaterMark` chunks are buffered before reading from the server pauses. */
  stream(highWaterMark = 16): ReadableStream<Uint8Array> {
    return new ReadableStream<Uint8Array>({
      start: (controller) => {
        this.#controller = controller;
      },
      pull: () => {
        this.io?.resumeReading();
      },
      cancel: () => {
        // The server still sends the rest; it is read and dropped so the connection stays usable.
        this.#discard = true;
        this.io?.resumeReading();
      },
    }, { highWaterMark });
  }
}
