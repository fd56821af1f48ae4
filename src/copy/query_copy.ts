/**
 * A query run as a COPY (`query.writable()`, `readable()`, `writableStream()`,
 * `readableStream()`): the request of its direction, the stream of the kind
 * asked for over it, and its end as a query result.
 */
import type { QuerySpec } from "../connection/requests/query_request.ts";
import { QueryError } from "../errors.ts";
import type { CopyStreams } from "../query/query.ts";
import { Result } from "../query/result.ts";
import type { CopySink } from "./copy_columns.ts";
import {
  CopyInRequest,
  CopyOutRequest,
  type CopyRequest,
  type CopyResult,
} from "./copy_request.ts";
import { copyReadable, copyWritable } from "./node_streams.ts";
import { copyInWebStream, copyOutWebStream } from "./web_streams.ts";

/**
 * The COPY request for a query's spec, in the direction the stream `kind` needs; `fail` gives
 * its errors the query's details. COPY takes no parameters.
 */
export function copyRequest(
  spec: QuerySpec,
  kind: keyof CopyStreams,
  fail: (e: unknown) => Error,
): CopyRequest {
  if (spec.params.length > 0) {
    throw new QueryError("COPY_PARAMETERS", "COPY cannot take parameters");
  }
  const into = kind === "writable" || kind === "writableStream";
  return into ? new CopyInRequest(spec.text, fail) : new CopyOutRequest(spec.text, fail);
}

/** The stream of each kind over a COPY request of the matching direction. */
const copyStreams: { [K in keyof CopyStreams]: (req: CopyRequest) => CopyStreams[K] } = {
  writable: (req) => copyWritable(req as CopyInRequest),
  readable: (req) => copyReadable(req as CopyOutRequest),
  writableStream: (req) => copyInWebStream(req as CopyInRequest),
  readableStream: (req) => copyOutWebStream(req as CopyOutRequest),
};

/**
 * Sends the COPY and resolves with its stream once the server started it. No
 * closure here may outlive that: the request's promises must not reach the
 * stream, or a stream the user dropped could never be collected (see
 * abandonWhenCollected).
 */
export function startStream<K extends keyof CopyStreams>(
  sink: CopySink,
  kind: K,
  req: CopyRequest,
): Promise<CopyStreams[K]> {
  const stream = (copyStreams[kind] as (req: CopyRequest) => CopyStreams[K])(req);
  sink.send(req);
  return req.started.then(() => stream);
}

/**
 * A finished COPY as a query result: no rows, the count and command of its completion tag, its
 * text as the statement (a simple-protocol one: unnamed, no columns), the connection's state.
 */
export function copyResult(r: CopyResult): Result<unknown> {
  const result = new Result<unknown>();
  result.command = r.command;
  result.count = r.count;
  result.columns = [];
  result.statement = {
    name: "",
    text: r.text,
    string: r.text,
    parameterTypes: null,
    columns: result.columns,
  };
  if (r.state !== undefined) result.state = r.state;
  return result;
}
