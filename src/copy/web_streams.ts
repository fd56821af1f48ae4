/**
 * COPY as Web Streams (`query.readableStream()` / `query.writableStream()`),
 * for code written against the Streams API: `pipeTo`, `pipeThrough`,
 * `ReadableStream.from`, `new Response(stream)`.
 */
import { QueryError } from "../errors.ts";
import {
  abandonWhenCollected,
  type CopyInRequest,
  type CopyOutRequest,
  type CopyOutSink,
  reasonText,
} from "./copy_request.ts";

const encoder = new TextEncoder();

/** Keeps each stream's sink alive as long as the stream (the request holds it weakly while paused). */
const sinks = new WeakMap<ReadableStream<Uint8Array>, CopyOutSink>();

/**
 * A WritableStream over a started COPY FROM STDIN: each chunk is sent as
 * CopyData once the previous one reached the socket; `close()` sends CopyDone
 * and resolves when the server confirmed the COPY; `abort()` sends CopyFail.
 */
export function copyInWebStream(req: CopyInRequest): WritableStream<Uint8Array | string> {
  const stream = new WritableStream<Uint8Array | string>({
    write: (chunk) => {
      if (typeof chunk === "string") return req.send(encoder.encode(chunk));
      if (chunk instanceof Uint8Array) return req.send(chunk);
      // The stream errors and calls nothing else: end the COPY here so the connection is freed.
      req.stop("the COPY stream was given a chunk that is not bytes or a string");
      throw new QueryError(
        "INVALID_COPY_CHUNK",
        `COPY data must be a Uint8Array or a string, got ${chunk === null ? "null" : typeof chunk}`,
      );
    },
    close: async () => {
      await req.complete();
    },
    abort: async (reason) => {
      req.stop(reasonText(reason, "aborted by the client"));
      await req.done.catch(() => {});
    },
  });
  abandonWhenCollected(stream, req);
  return stream;
}

/**
 * A ReadableStream of a COPY TO STDOUT's data, one chunk per CopyData message.
 * Reading from the server pauses while `highWaterMark` chunks wait unread;
 * `cancel()` stops the COPY.
 */
export function copyOutWebStream(
  req: CopyOutRequest,
  highWaterMark = 16,
): ReadableStream<Uint8Array> {
  let controller!: ReadableStreamDefaultController<Uint8Array>;
  const stream = new ReadableStream<Uint8Array>({
    start: (c) => {
      controller = c;
    },
    pull: () => req.pull(),
    cancel: (reason) => req.stop(reasonText(reason, "the COPY stream was cancelled")),
  }, { highWaterMark });
  const sink: CopyOutSink = {
    data: (buf, start, end) => {
      try {
        controller.enqueue(buf.slice(start, end));
        return (controller.desiredSize ?? 1) > 0;
      } catch {
        req.stop("the COPY stream was closed"); // closed or errored: nobody will read the rest
        return true;
      }
    },
    end: (err) => {
      try {
        if (err === null) controller.close();
        else controller.error(err);
      } catch {
        // already closed or errored by the reader
      }
    },
  };
  sinks.set(stream, sink);
  req.connect(sink);
  abandonWhenCollected(stream, req);
  return stream;
}
