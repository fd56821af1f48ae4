/**
 * What the pipeline needs from a request: a way to encode itself, and a
 * handler for each backend message that belongs to it. The connection calls
 * these in FIFO order; ReadyForQuery settles the request.
 */
import type { Column } from "../protocol/backend.ts";
import type { Writer } from "../protocol/writer.ts";
import type { PostgresError } from "../errors.ts";
import type { StatementCache } from "./statement.ts";
import type { DecodeOptions } from "../types/text_decoders.ts";

/** The connection state a request may use while encoding. */
export interface EncodeContext {
  /** This connection's named statements. */
  readonly statements: StatementCache;
  /** How values are decoded on this connection. */
  readonly decode: DecodeOptions;
}

/** One Sync-terminated segment in the pipeline. */
export interface PipelineRequest {
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
  /** An ErrorResponse for this request. */
  error(err: PostgresError): void;
  /** ReadyForQuery: the segment is over; settle. */
  ready(): void;
  /** The request cannot complete: the connection failed, or could not be opened. */
  fail(err: Error): void;
}
