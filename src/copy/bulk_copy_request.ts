/**
 * The two requests behind `sql.copyFrom` and `sql.copyTo`: a COPY driven by
 * the caller chunk by chunk instead of through a stream. Like every COPY they
 * go over the simple protocol and are barriers: the connection serves nothing
 * else until the COPY's ReadyForQuery.
 *
 * In: the caller writes whole CopyData chunks and, before writing the next,
 * waits for the previous one to reach the socket (backpressure down to the
 * server, while the caller encodes), then ends with CopyDone, or CopyFail to
 * make the server discard everything.
 * Out: each CopyData body is handed to the caller's sink (the bytes are the
 * read buffer's, left as they are until the sink is told to release them),
 * and the caller pauses reading while its consumer is behind.
 */
import * as fe from "../protocol/frontend.ts";
import type { Writer } from "../protocol/writer.ts";
import { ProtocolViolation } from "../protocol/backend.ts";
import { ConnectionError, type PostgresError, QueryError } from "../errors.ts";
import type { Column } from "../protocol/backend.ts";
import type { EncodeContext, PipelineRequest, RequestIO } from "../connection/requests/request.ts";
import { statementBounds } from "../connection/sequence.ts";

/** Common bookkeeping: one COPY statement's segment, settled by its ReadyForQuery. */
abstract class BulkCopyRequest implements PipelineRequest {
  readonly barrier = true;
  /** Where the pool sent it (for cancel). */
  route: PipelineRequest["route"] = undefined;
  /** The COPY statement. */
  readonly text: string;
  /** Rows the server reported in its completion tag, once it has. */
  count: number | null = null;
  protected io: RequestIO | null = null;
  /** The first failure: the server's error, the connection's, or the caller's. */
  failure: Error | null = null;
  /** Settles with the row count when the segment ends; rejects with `failure`. */
  readonly done: Promise<number>;
  #settled = false;
  #resolve!: (count: number) => void;
  #reject!: (e: Error) => void;

  constructor(text: string) {
    this.text = text;
    this.done = new Promise((resolve, reject) => {
      this.#resolve = resolve;
      this.#reject = reject;
    });
    this.done.catch(() => {}); // observed by the caller, who may stop listening early
  }

  /** Whether the segment is over (ReadyForQuery, or the connection failed). */
  get settled(): boolean {
    return this.#settled;
  }

  /** The connection's transaction status when the COPY was sent (I: outside a block). */
  status = 0x49;

  /** The fewest and most statements the text holds (sequence.ts). */
  fewestStatements = 1;
  /** The most statements the text holds. */
  mostStatements = 1;
  encode(w: Writer, ctx: EncodeContext): void {
    this.status = ctx.status;
    fe.query(w, this.text);
    [this.fewestStatements, this.mostStatements] = statementBounds(this.text);
  }
  attach(io: RequestIO): void {
    this.io = io;
  }
  parseComplete(): void {}
  parameterDescription(): void {}
  rowDescription(_columns: Column[]): void {}
  noData(): void {}
  dataRow(): void {}
  commandComplete(_command: string, count: number | null): void {
    this.count = count;
  }
  emptyQuery(): void {}
  portalSuspended(): void {}
  error(err: PostgresError): void {
    this.failure ??= err.attach(this.text, []);
  }
  ready(): void {
    this.#settle();
  }
  fail(err: Error): void {
    this.failure ??= err;
    this.#settle();
  }

  #settle(): void {
    if (this.#settled) return;
    this.#settled = true;
    this.finish();
    if (this.failure !== null) this.#reject(this.failure);
    else this.#resolve(this.count ?? 0);
  }

  /** Called once when the segment ends, before `done` settles. */
  protected abstract finish(): void;
}

/** `COPY ... FROM STDIN`, fed chunk by chunk. */
export class CopyFromRequest extends BulkCopyRequest {
  /** Resolves when the server is ready for data; rejects if the statement failed first. */
  readonly started: Promise<void>;
  #start!: { resolve(): void; reject(e: Error): void };
  #copying = false;
  #closed = false; // CopyDone or CopyFail written: nothing more may follow

  constructor(text: string) {
    super(text);
    this.started = new Promise((resolve, reject) => this.#start = { resolve, reject });
    this.started.catch(() => {});
  }

  copyIn(): void {
    this.#copying = true;
    this.#start.resolve();
  }

  /** Fed from the caller's rows until CopyDone or CopyFail: nothing may queue behind it. */
  get awaitsInput(): boolean {
    return !this.#closed && !this.settled;
  }

  protected finish(): void {
    if (!this.#copying) {
      this.#start.reject(
        this.failure ?? new QueryError("NOT_COPY_FROM_STDIN", "the statement is not COPY FROM"),
      );
    }
    this.#closed = true;
  }

  /**
   * Queues `bytes` as one CopyData message (copied: the caller may reuse its
   * buffer at once); `sent()` says when it reached the socket. Throws the
   * failure when the COPY can no longer take data.
   */
  write(bytes: Uint8Array): void {
    if (this.failure !== null) throw this.failure;
    if (this.#closed || this.io === null) throw this.#notCopying();
    this.io.write((w) => fe.copyData(w, bytes));
  }

  /**
   * Resolves once everything written so far has reached the socket, or the
   * connection failed: never rejects, so it may wait unobserved while the
   * caller encodes the next chunk. Check `failure` after it.
   */
  sent(): Promise<void> {
    return this.io === null ? Promise.resolve() : this.io.flushed();
  }

  /** Ends the data with CopyDone; resolves with the rows the server copied. */
  end(): Promise<number> {
    if (!this.#closed && this.failure === null && this.io !== null) {
      this.#closed = true;
      this.io.write(fe.copyDone);
    }
    return this.done;
  }

  /**
   * Makes the server discard the COPY (CopyFail with `reason`), so nothing of
   * it is stored; resolves once the segment is over and the connection free.
   */
  async abort(reason: string): Promise<void> {
    if (this.#copying && !this.#closed && this.io !== null) {
      this.#closed = true;
      this.io.write((w) => fe.copyFail(w, reason));
    }
    await this.done.catch(() => {});
  }

  #notCopying(): Error {
    return new ConnectionError("CONNECTION_CLOSED", "the COPY is no longer taking data");
  }
}

/** Where a CopyToRequest hands its data. */
export interface CopyOutSink {
  /**
   * One CopyData body; its bytes (the read buffer's) stay as they are until
   * `release`. What it throws fails this COPY only.
   */
  data(buf: Uint8Array, start: number, end: number): void;
  /** The read buffer is about to change: copy what is still needed of it. */
  release(): void;
}

/** `COPY ... TO STDOUT`, each CopyData body handed to its sink as it arrives. */
export class CopyToRequest extends BulkCopyRequest {
  readonly #sink: CopyOutSink;
  #started = false;
  #discard = false;
  #paused = false;

  constructor(text: string, sink: CopyOutSink) {
    super(text);
    this.#sink = sink;
  }

  copyOut(): void {
    this.#started = true;
  }

  copyData(buf: Uint8Array, start: number, end: number): void {
    if (this.#discard) return;
    try {
      this.#sink.data(buf, start, end);
    } catch (e) {
      // Fails this COPY, never the connection: the rest is read and dropped.
      this.#discard = true;
      this.resume();
      if (e instanceof ProtocolViolation) {
        const err = new ConnectionError("PROTOCOL_VIOLATION", e.message, { cause: e });
        err.outcome = "unknown";
        this.failure ??= err;
      } else this.failure ??= e instanceof Error ? e : new Error(String(e));
    }
  }

  /** Only a text that names HEADER can make the server send a header line. */
  get copyHeader(): boolean {
    return /header/i.test(this.text);
  }

  copyDone(): void {}

  beforeRead(): void {
    if (!this.#discard) this.#sink.release();
  }

  /** Stops handing data to the sink; the rest is read and dropped. */
  discard(): void {
    this.#discard = true;
    this.resume();
  }

  /** Stops reading from the server until `resume()` (the consumer is behind). */
  pause(): void {
    if (this.#paused || this.settled || this.#discard) return;
    this.#paused = true;
    this.io?.pauseReading();
  }

  /** Reads from the server again. */
  resume(): void {
    if (!this.#paused) return;
    this.#paused = false;
    this.io?.resumeReading();
  }

  protected finish(): void {
    // The read loop goes on to the next request: what the sink kept of its buffer must go now.
    if (!this.#discard) this.#sink.release();
    this.resume();
    if (this.failure === null && !this.#started) {
      this.failure = new QueryError("NOT_COPY_TO_STDOUT", "the statement is not COPY TO STDOUT");
    }
  }
}
