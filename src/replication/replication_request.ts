/**
 * START_REPLICATION as a pipeline request: the command goes over the simple
 * protocol, the server answers CopyBothResponse, and from then on CopyData
 * flows both ways (the server's WAL stream in, our status updates out) until
 * either side sends CopyDone; the command then completes with ReadyForQuery.
 * It is a barrier, so nothing else is written on the connection meanwhile.
 */
import * as fe from "../protocol/frontend.ts";
import type { Writer } from "../protocol/writer.ts";
import type { PostgresError } from "../errors.ts";
import type { EncodeContext, PipelineRequest, RequestIO } from "../connection/requests/request.ts";

/** Receives each CopyData body of the stream, `buf[start, end)`, valid only during the call. */
export type StreamData = (buf: Uint8Array, start: number, end: number) => void;

/** A replication stream on its connection. */
export class ReplicationRequest implements PipelineRequest {
  readonly barrier = true;
  /** Where the request was sent (for cancel; not used: a stream is stopped, not cancelled). */
  route: PipelineRequest["route"] = undefined;
  /** Resolves when the server starts streaming; rejects if the command failed instead. */
  readonly started: Promise<void>;
  /**
   * Settles when the command is over: resolves after a clean CopyDone
   * exchange, rejects with the server's error or the connection's failure.
   */
  readonly done: Promise<void>;
  #text: string;
  #onData: StreamData;
  #io: RequestIO | null = null;
  #streaming = false;
  #sentDone = false;
  #settled = false;
  #failure: Error | null = null;
  #start!: { resolve(): void; reject(e: Error): void };
  #end!: { resolve(): void; reject(e: Error): void };

  constructor(text: string, onData: StreamData) {
    this.#text = text;
    this.#onData = onData;
    this.started = new Promise((resolve, reject) => this.#start = { resolve, reject });
    this.done = new Promise((resolve, reject) => this.#end = { resolve, reject });
    // Observed by whoever runs the stream; these keep an unobserved outcome from going unhandled.
    this.started.catch(() => {});
    this.done.catch(() => {});
  }

  /** Whether CopyData can still be written to the server. */
  get writable(): boolean {
    return this.#streaming && !this.#sentDone && !this.#settled;
  }

  /** Writes messages into the stream (standby status updates); dropped once it is ending. */
  write(encode: (w: Writer) => void): void {
    if (this.writable) this.#io!.write(encode);
  }

  /** Ends our side of the stream with CopyDone; the server answers with its own and completes. */
  stop(): void {
    if (!this.writable) return;
    this.#sentDone = true;
    this.#io!.write(fe.copyDone);
  }

  encode(w: Writer, _ctx: EncodeContext): void {
    fe.query(w, this.#text);
  }
  attach(io: RequestIO): void {
    this.#io = io;
  }
  copyBoth(): void {
    this.#streaming = true;
    this.#start.resolve();
  }
  copyData(buf: Uint8Array, start: number, end: number): void {
    if (this.#streaming) this.#onData(buf, start, end);
  }
  copyDone(): void {
    // The server ended its side; the command completes only once ours is ended too.
    if (this.#streaming && !this.#sentDone) {
      this.#sentDone = true;
      this.#io!.write(fe.copyDone);
    }
  }
  parseComplete(): void {}
  parameterDescription(): void {}
  rowDescription(): void {}
  noData(): void {}
  dataRow(): void {}
  commandComplete(): void {}
  emptyQuery(): void {}
  portalSuspended(): void {}
  error(err: PostgresError): void {
    this.#failure ??= err.attach(this.#text, []);
  }
  ready(): void {
    this.#settle(
      this.#failure ??
        (this.#streaming ? null : new Error("START_REPLICATION ended without streaming")),
    );
  }
  fail(err: Error): void {
    this.#failure ??= err;
    this.#settle(this.#failure);
  }

  #settle(err: Error | null): void {
    if (this.#settled) return;
    this.#settled = true;
    if (err === null) {
      this.#end.resolve();
      return;
    }
    if (!this.#streaming) this.#start.reject(err);
    this.#end.reject(err);
  }
}
