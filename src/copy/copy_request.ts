/**
 * COPY ... FROM STDIN and COPY ... TO STDOUT requests. COPY goes over the
 * simple protocol (it takes no parameters) and is a barrier: the connection
 * serves nothing else until the COPY ends. These requests speak the protocol
 * and keep the connection's state right; the streams users hold (Node streams
 * in copy_node_streams.ts, Web streams in copy_web_streams.ts) sit on top.
 *
 * A COPY whose stream is dropped unfinished would hold its connection for
 * ever: a COPY FROM waits for more data, a paused COPY TO for a reader. So a
 * request holds its stream only while data flows to it, and when the stream
 * is garbage-collected the request gives up (CopyFail, or the rest of the
 * data is cancelled or dropped) and the connection serves the next query.
 */
import * as fe from "../protocol/frontend.ts";
import type { Writer } from "../protocol/writer.ts";
import { type PostgresError, QueryError } from "../errors.ts";
import type { Column } from "../protocol/backend.ts";
import type {
  ConnectionState,
  EncodeContext,
  PipelineRequest,
  RequestIO,
} from "../connection/requests/request.ts";
import { statementBounds } from "../connection/sequence.ts";

/** The outcome of a COPY: rows copied (from the completion tag). */
export interface CopyResult {
  /** The command word (COPY). */
  command: string;
  /** Rows copied. */
  count: number;
  /** The text that ran. */
  text: string;
  /** The connection's state when the COPY ended (unset if it never reached one). */
  state?: ConnectionState;
}

/** Requests whose stream was collected give up; the request itself is the unregister token. */
const collected = new FinalizationRegistry<CopyRequest>((req) => req.abandon());

/**
 * Ties a request to the stream a user holds: when the stream is
 * garbage-collected before the COPY ended, the request is abandoned. The
 * request must not reference the stream strongly (except while data flows to
 * it), or it would never be collected.
 */
export function abandonWhenCollected(stream: object, req: CopyRequest): void {
  if (!req.finished) collected.register(stream, req, req);
}

/** A CopyFail reason is a C string: no NUL bytes. */
function failReason(reason: string): string {
  return reason.replaceAll("\0", " ");
}

/** The message a stream's abort/destroy reason gives the server. */
export function reasonText(reason: unknown, fallback: string): string {
  if (reason instanceof Error) return reason.message || fallback;
  return reason === undefined || reason === null ? fallback : String(reason);
}

/** Base for both directions: the segment's bookkeeping. */
export abstract class CopyRequest implements PipelineRequest {
  readonly barrier = true;
  /** Where the pool sent it (for cancel). */
  route: PipelineRequest["route"] = undefined;
  protected io: RequestIO | null = null;
  protected failure: Error | null = null;
  protected result: CopyResult;
  protected readonly text: string;
  #ctx: EncodeContext | null = null;
  /** Whether the segment is over (ReadyForQuery, or the connection failed). */
  finished = false;
  /** Whether the server started the COPY in the expected direction. */
  protected began = false;
  /** Settles when the COPY's segment ends: rejects with the server's (or the connection's) error. */
  readonly done: Promise<CopyResult>;
  /** Resolves when the server started the COPY (CopyInResponse or CopyOutResponse). */
  readonly started: Promise<void>;
  #resolve!: (r: CopyResult) => void;
  #reject!: (e: Error) => void;
  #start!: { resolve(): void; reject(e: Error): void };
  #decorate: (e: Error) => Error;

  /** `decorate` gives an error the query's details before anyone sees it. */
  constructor(text: string, decorate: (e: Error) => Error = (e) => e) {
    this.text = text;
    this.result = { command: "", count: 0, text };
    this.#decorate = decorate;
    this.done = new Promise((resolve, reject) => {
      this.#resolve = resolve;
      this.#reject = reject;
    });
    this.started = new Promise((resolve, reject) => this.#start = { resolve, reject });
    // Observed through the streams and the query (or not at all, for a stream the user dropped).
    this.done.catch(() => {});
    this.started.catch(() => {});
  }

  /** Whether it was written to a connection (it is then stopped through the protocol). */
  get sent(): boolean {
    return this.io !== null;
  }

  /** The fewest and most statements the text holds (sequence.ts). */
  fewestStatements = 1;
  /** The most statements the text holds. */
  mostStatements = 1;
  encode(w: Writer, ctx: EncodeContext): void {
    this.#ctx = ctx;
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
  commandComplete(command: string, count: number | null): void {
    this.result.command = command;
    this.result.count = count ?? 0; // a COPY tag always carries its count
  }
  emptyQuery(): void {}
  portalSuspended(): void {}
  error(err: PostgresError): void {
    this.failure ??= err.attach(this.text, []);
  }
  ready(): void {
    this.result.state = this.#ctx?.state;
    this.#settle();
  }
  fail(err: Error): void {
    this.failure ??= err;
    this.#settle();
  }

  #settle(): void {
    if (this.finished) return;
    this.finished = true;
    collected.unregister(this);
    if (!this.began) this.failure ??= this.wrongKind();
    if (this.failure !== null) this.failure = this.#decorate(this.failure);
    if (!this.began) this.#start.reject(this.failure!);
    this.finish();
    if (this.failure !== null) this.#reject(this.failure);
    else this.#resolve(this.result);
  }

  /** The server is ready for this COPY. */
  protected begin(): void {
    this.began = true;
    this.#start.resolve();
  }

  /** The error when the query turned out not to be this kind of COPY. */
  protected abstract wrongKind(): QueryError;
  /** Called once when the segment ends, before `done` settles. */
  protected abstract finish(): void;
  /** Stops the COPY early: its stream was destroyed, cancelled or collected. */
  abstract stop(reason: string): void;

  /**
   * Stops the COPY early because its query was cancelled (`query.cancel()`,
   * `query.signal()`): as `stop`, and a stream still open ends with an error.
   */
  cancel(reason: Error): void {
    this.stop(reasonText(reason, "cancelled"));
  }

  /** The stream was garbage-collected before the COPY ended: let the connection go. */
  abandon(): void {
    this.stop("the COPY stream was garbage-collected before it was finished");
  }
}

/**
 * COPY ... FROM STDIN: the caller sends data with `send`, then `complete()`
 * (CopyDone) or `stop()` (CopyFail).
 */
export class CopyInRequest extends CopyRequest {
  #ended = false; // CopyDone or CopyFail written
  #stopWhenStarted: string | null = null;

  /** Whether the COPY still waits for data: neither CopyDone nor CopyFail was sent, nor did it end. */
  get open(): boolean {
    return !this.#ended && !this.finished;
  }

  /** The caller feeds it until CopyDone or CopyFail: nothing may queue behind it meanwhile. */
  get awaitsInput(): boolean {
    return this.open;
  }

  copyIn(): void {
    this.begin();
    if (this.#stopWhenStarted !== null) this.stop(this.#stopWhenStarted);
  }

  /** COPY TO STDOUT asked for as writable(): its data is read and dropped, then it rejects. */
  copyOut(): void {
    this.failure ??= this.wrongKind();
  }

  protected wrongKind(): QueryError {
    return new QueryError("NOT_COPY_FROM_STDIN", "writable() needs a COPY ... FROM STDIN query");
  }

  protected finish(): void {}

  /** Why data cannot be sent now, or null. */
  #refusal(): Error | null {
    if (this.failure !== null) return this.failure;
    if (this.#ended || this.finished) {
      return new QueryError("COPY_ENDED", "the COPY has already been finished or aborted");
    }
    return null;
  }

  /**
   * Sends one CopyData per chunk (all in the next write); resolves when they
   * were handed to the socket (backpressure).
   */
  send(chunks: Uint8Array | readonly Uint8Array[]): Promise<void> {
    const refused = this.#refusal();
    if (refused !== null) return Promise.reject(refused);
    const all = chunks instanceof Uint8Array ? [chunks] : chunks;
    this.io!.write((w) => {
      for (const bytes of all) if (bytes.length > 0) fe.copyData(w, bytes);
    });
    return this.io!.flushed();
  }

  /** Sends CopyDone; resolves when the server confirmed the COPY (its completion tag). */
  complete(): Promise<CopyResult> {
    const refused = this.#refusal();
    if (refused !== null) return Promise.reject(refused);
    this.#ended = true;
    this.io!.write(fe.copyDone);
    return this.done;
  }

  /**
   * Sends CopyFail: the server aborts the COPY (the table is untouched; inside
   * a transaction, the transaction is aborted too) and the connection is free
   * again. Does nothing once the COPY has ended.
   */
  stop(reason: string): void {
    if (this.#ended || this.finished) return;
    if (!this.began) {
      this.#stopWhenStarted ??= reason;
      return;
    }
    this.#ended = true;
    this.io!.write((w) => fe.copyFail(w, failReason(reason)));
  }
}

/**
 * Where a COPY TO's data goes. The request holds it strongly only while data
 * flows to it, and weakly while its reader is behind: a paused stream the
 * user dropped can then be collected.
 */
export interface CopyOutSink {
  /** One CopyData body in `buf[start, end)`, valid only during the call; false when full. */
  data(buf: Uint8Array, start: number, end: number): boolean;
  /** The COPY ended: `null` when complete, else why it failed. Not called if it never began. */
  end(err: Error | null): void;
}

/** COPY ... TO STDOUT: each CopyData goes to the sink, with backpressure. */
export class CopyOutRequest extends CopyRequest {
  #sink: WeakRef<CopyOutSink> | null = null;
  #held: CopyOutSink | null = null; // while reading from the server is not paused
  #discard = false; // the stream was cancelled, destroyed or collected: drop the rest
  #cancelled = false;
  #idleAtStart = false;
  #cancelledBy: Error | null = null; // the query was cancelled: its stream ends with an error

  /** Sets where the data goes (see CopyOutSink for how it is held). */
  connect(sink: CopyOutSink): void {
    this.#sink = new WeakRef(sink);
    this.#held = sink;
  }

  copyOut(): void {
    this.#idleAtStart = !this.io!.inTransaction();
    this.begin();
    if (this.#discard) this.#cancelIfSafe(); // stopped before the server started it
  }

  /** COPY FROM STDIN asked for as readable(): refused at once with CopyFail. */
  copyIn(): void {
    this.failure ??= this.wrongKind();
    this.io!.write((w) => fe.copyFail(w, "readable() needs a COPY ... TO STDOUT query"));
  }

  protected wrongKind(): QueryError {
    return new QueryError("NOT_COPY_TO_STDOUT", "readable() needs a COPY ... TO STDOUT query");
  }

  copyData(buf: Uint8Array, start: number, end: number): void {
    if (this.#discard) return;
    const sink = this.#held ?? this.#sink?.deref();
    if (sink === undefined) return this.abandon();
    if (!sink.data(buf, start, end) && !this.#discard) {
      this.io!.pauseReading();
      this.#held = null; // the reader is behind: if it is dropped now, it can be collected
    }
  }

  /** Only a text that names HEADER can make the server send a header line. */
  get copyHeader(): boolean {
    return /header/i.test(this.text);
  }

  copyDone(): void {}

  /** The reader wants more: resume reading from the server. */
  pull(): void {
    if (this.finished) return;
    this.#held ??= this.#sink?.deref() ?? null;
    // Before the COPY began, reading was never paused for it (only a request ahead of it runs).
    if (this.began) this.io!.resumeReading();
  }

  /**
   * The reader is gone (cancelled, destroyed, collected). Outside a
   * transaction block the server is asked to cancel the COPY, so a large
   * export does not run on for nobody (the query then rejects with 57014);
   * inside one that would abort the transaction, so the rest is read and
   * dropped instead. Either way the connection stays usable.
   */
  stop(_reason: string): void {
    if (this.finished) return;
    this.#discard = true;
    this.#held = null;
    if (this.began) this.#cancelIfSafe();
    this.io?.resumeReading();
  }

  override cancel(reason: Error): void {
    if (this.finished) return;
    this.#cancelledBy = reason;
    this.stop(reasonText(reason, "cancelled"));
  }

  #cancelIfSafe(): void {
    if (this.#idleAtStart && !this.#cancelled) {
      this.#cancelled = true;
      this.io!.cancel();
    }
  }

  protected finish(): void {
    const sink = this.#held ?? this.#sink?.deref();
    this.#held = null;
    this.io?.resumeReading();
    if (!this.began) return; // readable() rejects instead
    if (this.#cancelledBy !== null) return sink?.end(this.failure ?? this.#cancelledBy);
    if (!this.#discard) sink?.end(this.failure); // else nobody reads it any more
  }
}
