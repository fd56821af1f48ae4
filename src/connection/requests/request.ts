/**
 * What the pipeline needs from a request: a way to encode itself, and a
 * handler for each backend message that belongs to it. The connection calls
 * these in FIFO order; ReadyForQuery settles the request.
 */
import type { Column } from "../../protocol/backend.ts";
import type { Writer } from "../../protocol/writer.ts";
import type { PostgresError } from "../../errors.ts";
import type { StatementCache } from "../statement.ts";
import type { DecodeOptions } from "../../types/text_decoders.ts";
import type { TlsPath } from "../transport/transport.ts";

/** A connection's identity and transaction status, as postgres.js reports it on results. */
export interface ConnectionState {
  /** Backend process ID. */
  pid: number;
  /** Backend secret key. */
  secret: number;
  /** Transaction status: "I" idle, "T" in a transaction block, "E" in a failed block. */
  status: string;
  /** The TLS implementation: `"native"` (Deno.startTls), `"node"` (node:tls), or null (plain). */
  tls: TlsPath | null;
}

/** The connection state a request may use while encoding. */
export interface EncodeContext {
  /** This connection's named statements. */
  readonly statements: StatementCache;
  /** How values are decoded on this connection. */
  readonly decode: DecodeOptions;
  /** Backend process ID (for `Result.state`). */
  readonly pid: number;
  /** Backend secret key (for `Result.state`). */
  readonly secret: number;
  /** Transaction status byte of the last ReadyForQuery. */
  readonly status: number;
  /** pid, secret and status as results report them (one frozen object per status). */
  readonly state: ConnectionState;
  /**
   * While `fetch_types`' catalog query is in this connection's pipeline: settles once its answer
   * is registered (or it failed). A query written before it that returns a user-defined type
   * keeps its rows until then, to decode them with the types it registers.
   */
  readonly typesPending: Promise<void> | null;
}

/**
 * What a request that holds the connection (a cursor, a COPY, a replication
 * stream) may do while it is in flight: write more messages, wait for them to
 * be sent, and pause reading while its consumer is behind.
 */
export interface RequestIO {
  /** Encodes more messages now; they leave with the next flush (this tick). */
  write(encode: (w: Writer) => void): void;
  /** Resolves when everything encoded so far has been handed to the socket. */
  flushed(): Promise<void>;
  /** Stops reading from the socket (backpressure from a slow consumer). */
  pauseReading(): void;
  /** Resumes reading. */
  resumeReading(): void;
  /**
   * Asks the server to cancel the statement it is running (a CancelRequest):
   * while a barrier request holds the connection, that is its own statement.
   */
  cancel(): void;
  /** Whether a transaction block was open at the last ReadyForQuery. */
  inTransaction(): boolean;
}

/** One Sync-terminated segment in the pipeline. */
export interface PipelineRequest {
  /** `fetch_types`' catalog query: settles when it has registered its types, or failed. */
  readonly typesDone?: Promise<void>;
  /**
   * Whether it may be written before `fetch_types`' catalog query on a new connection: its rows
   * wait for the catalog's types when they need them (see EncodeContext.typesPending).
   */
  readonly mayPrecedeTypes?: boolean;
  /** Sent as a simple-protocol Query (no Sync of its own). */
  readonly simpleProtocol?: boolean;
  /**
   * Sent on a connection a pool shares among callers, with others: if it
   * leaves a transaction block open, the connection is closed (rolling the
   * transaction back) rather than let later queries run inside it.
   */
  readonly shared?: boolean;
  /** The connection the pool routed it to, so it can be cancelled there. */
  route?: { cancel(req: PipelineRequest, reason: Error): void };
  /**
   * A barrier holds the connection from when it is written until its
   * ReadyForQuery: requests sent meanwhile wait locally (cursors, COPY).
   */
  readonly barrier?: boolean;
  /**
   * A barrier fed by its caller (a COPY FROM STDIN whose data phase is open): true until the
   * caller ends it. Nothing may wait behind it, since a caller who awaits a query before ending
   * the COPY would wait for ever: the pool sends elsewhere or refuses with COPY_IN_PROGRESS.
   */
  readonly awaitsInput?: boolean;
  /**
   * Inside a transaction: encoded without a Sync of its own, so queries written together share
   * one (the connection adds it). An error aborts the transaction anyway; the server then skips
   * the rest of the batch, and those requests get `error(…, true)`.
   */
  readonly batchable?: boolean;
  /**
   * What `encode` asked the server for, so the connection knows which answers may come and in
   * what order (`Plan` bits, `sequence.ts`); absent or 0: a simple-protocol Query.
   */
  readonly plan?: number;
  /** Rows each Execute asks for (a cursor): a PortalSuspended must follow exactly that many. */
  readonly rowLimit?: number;
  /**
   * A COPY TO whose text may ask for a header line (which arrives as one more CopyData than the
   * completion tag counts); absent: it may.
   */
  readonly copyHeader?: boolean;
  /** Called once when the request is encoded, for requests that write again later. */
  attach?(io: RequestIO): void;
  /**
   * Whether the request should be sent again instead of failing with `err`
   * (e.g. a stale prepared statement); `idle` is true outside a transaction block.
   */
  retryable?(err: PostgresError, idle: boolean): boolean;
  /**
   * Prepares the request to be sent again after a cancel meant for another
   * request hit it; false if it cannot be (it then fails with that error).
   */
  restart?(): boolean;
  /** CopyInResponse: the server waits for CopyData, then CopyDone or CopyFail. */
  copyIn?(): void;
  /** CopyOutResponse: CopyData messages follow, then CopyDone. */
  copyOut?(): void;
  /** CopyBothResponse: CopyData flows both ways (a replication stream) until CopyDone. */
  copyBoth?(): void;
  /**
   * One CopyData body in `buf[start, end)`: the bytes stay as they are during
   * the call, and for a request with `beforeRead`, until that is called.
   */
  copyData?(buf: Uint8Array, start: number, end: number): void;
  /**
   * The read loop handed out every complete message of its receive buffer and
   * is about to read into it again (called on the head request only).
   */
  beforeRead?(): void;
  /** CopyDone from the server. */
  copyDone?(): void;
  /** Appends this request's messages, ending with Sync. */
  encode(w: Writer, ctx: EncodeContext): void;
  /** ParseComplete. */
  parseComplete(): void;
  /** ParameterDescription. */
  parameterDescription(types: number[]): void;
  /** RowDescription. */
  rowDescription(columns: Column[], ctx: EncodeContext): void;
  /** NoData: the statement returns no rows. */
  noData(): void;
  /** A DataRow body in `buf[start, end)`, valid only during the call. */
  dataRow(buf: Uint8Array, start: number, end: number): void;
  /** CommandComplete. */
  commandComplete(command: string, count: number | null): void;
  /** EmptyQueryResponse. */
  emptyQuery(): void;
  /** PortalSuspended (a row limit was reached). */
  portalSuspended(): void;
  /**
   * An ErrorResponse for this request; `skipped`: the server never ran it (an earlier query
   * of its batch failed) and `err` says so.
   */
  error(err: PostgresError, skipped?: boolean): void;
  /** ReadyForQuery: the segment is over; settle. */
  ready(): void;
  /** The request cannot complete: the connection failed, or could not be opened. */
  fail(err: Error): void;
}
