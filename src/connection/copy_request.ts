/**
 * COPY ... FROM STDIN and COPY ... TO STDOUT requests. COPY goes over the
 * simple protocol (it takes no parameters) and is a barrier: the connection
 * serves nothing else until the COPY ends. These requests speak the protocol
 * and keep the connection's state right; the streams users hold (Node streams
 * in copy_node_streams.ts, Web streams in copy_web_streams.ts) sit on top.
 *
 * A COPY whose stream is dropped unfinished would hold its connection for
 * ever: a COPY FROM waits for more data, a paused COPY TO for a reader. So a
 * request never holds its stream strongly, and when the stream is
 * garbage-collected the request gives up (CopyFail, or the rest of the data is
 * read and dropped) and the connection serves the next query.
 */
import * as fe from "../protocol/frontend.ts";
import type { Writer } from "../protocol/writer.ts";
import { type PostgresError, QueryError } from "../errors.ts";
import type { Column } from "../protocol/backend.ts";
import type { EncodeContext, PipelineRequest, RequestIO } from "./request.ts";

/** The outcome of a COPY: rows copied (from the completion tag). */
export interface CopyResult {
  /** The command word (COPY). */
  command: string | null;
  /** Rows copied. */
  count: number | null;
}

/** What a request does when the stream it serves was collected unfinished. */
interface Abandonable {
  abandon(): void;
}

/** Requests whose stream was collected give up; the request itself is the unregister token. */
const collected = new FinalizationRegistry<Abandonable>((req) => req.abandon());

/**
 * Ties a request to the stream a user holds: when the stream is
 * garbage-collected before the COPY ended, the request is abandoned. The
 * request must not reference the stream strongly, or it would never be collected.
 */
export function abandonWhenCollected(stream: object, req: CopyRequest): void {
  collected.register(stream, req, req);
}

/** A CopyFail reason is a C string: no NUL bytes. */
function failReason(reason: string): string {
  return reason.replaceAll("\0", " ");
}

/** Base for both directions: the segment's bookkeeping. */
export abstract class CopyRequest implements PipelineRequest, Abandonable {
  readonly barrier = true;
  /** Where the pool sent it (for cancel). */
  route: PipelineRequest["route"] = undefined;
  protected io: RequestIO | null = null;
  protected failure: Error | null = null;
  protected result: CopyResult = { command: null, count: null };
  protected readonly text: string;
  /** Whether the segment is over (ReadyForQuery, or the connection failed). */
  protected finished = false;
  /** Whether the server started the COPY in the expected direction. */
  protected began = false;
  /** Settles when the COPY's segment ends. */
  readonly done: Promise<CopyResult>;
  /** Resolves when the server started the COPY (CopyInResponse or CopyOutResponse). */
  readonly started: Promise<void>;
  #resolve!: (r: CopyResult) => void;
  #reject!: (e: Error) => void;
  #start!: { resolve(): void; reject(e: Error): void };

  constructor(text: string) {
    this.text = text;
    this.done = new Promise((resolve, reject) => {
      this.#resolve = resolve;
      this.#reject = reject;
    });
    this.started = new Promise((resolve, reject) => this.#start = { resolve, reject });
    // Observed through the streams (or not at all, for a stream the user dropped).
    this.done.catch(() => {});
    this.started.catch(() => {});
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
    if (!this.began) this.#start.reject(this.failure ?? this.wrongKind());
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
  /** The stream was garbage-collected before the COPY ended: let the connection go. */
  abstract abandon(): void;
}

/**
 * COPY ... FROM STDIN: the caller sends data with `send`, then `complete()`
 * (CopyDone) or `abort()` (CopyFail).
 */
export class CopyInRequest extends CopyRequest {
  #ended = false; // CopyDone or CopyFail written
  #abortWhenStarted: string | null = null;

  copyIn(): void {
    this.begin();
    if (this.#abortWhenStarted !== null) this.abort(this.#abortWhenStarted);
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

  /** Sends one CopyData; resolves when it was handed to the socket (backpressure). */
  send(bytes: Uint8Array): Promise<void> {
    const refused = this.#refusal();
    if (refused !== null) return Promise.reject(refused);
    if (bytes.length === 0) return Promise.resolve();
    this.io!.write((w) => fe.copyData(w, bytes));
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
   * Sends CopyFail: the server aborts the COPY (the table is untouched) and
   * the connection is free again. Does nothing once the COPY has ended.
   */
  abort(reason: string): void {
    if (this.#ended || this.finished) return;
    if (!this.began) {
      this.#abortWhenStarted = reason;
      return;
    }
    this.#ended = true;
    this.io!.write((w) => fe.copyFail(w, failReason(reason)));
  }

  abandon(): void {
    this.abort("the COPY stream was garbage-collected before it was finished");
  }
}

/**
 * Where a COPY TO's data goes. The request holds it weakly: it is kept alive
 * by the stream it feeds, so a stream the user dropped can be collected.
 */
export interface CopyOutSink {
  /** One CopyData body in `buf[start, end)`, valid only during the call; false when full. */
  data(buf: Uint8Array, start: number, end: number): boolean;
  /** The COPY ended: `null` when complete, else why it failed. */
  end(err: Error | null): void;
}

/** COPY ... TO STDOUT: each CopyData goes to the sink, with backpressure. */
export class CopyOutRequest extends CopyRequest {
  #sink: WeakRef<CopyOutSink> | null = null;
  #discard = false; // the stream was cancelled, destroyed or collected: drop the rest

  /** Sets where the data goes (held weakly; see CopyOutSink). */
  connect(sink: CopyOutSink): void {
    this.#sink = new WeakRef(sink);
  }

  copyOut(): void {
    this.begin();
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
    const sink = this.#sink?.deref();
    if (sink === undefined) return this.abandon();
    if (!sink.data(buf, start, end)) this.io!.pauseReading();
  }

  copyDone(): void {}

  /** The reader wants more: resume reading from the server. */
  pull(): void {
    if (!this.finished) this.io?.resumeReading();
  }

  /**
   * The reader is gone (cancelled, destroyed): the server still sends the
   * rest, which is read and dropped so the connection stays usable.
   */
  discard(): void {
    this.#discard = true;
    this.pull();
  }

  abandon(): void {
    this.discard();
  }

  protected finish(): void {
    this.io?.resumeReading();
    if (this.#discard) return;
    this.#sink?.deref()?.end(this.failure ?? (this.began ? null : this.wrongKind()));
  }
}
