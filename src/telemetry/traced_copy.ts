/** COPY in spans: a query's COPY, and `sql.copyFrom`/`copyTo`. */
import { Identifier } from "../query/identifier.ts";
import { Query } from "../query/query.ts";
import type { Result } from "../query/result.ts";
import type { BulkCopy } from "../copy/bulk_copy.ts";
import type { Telemetry } from "./telemetry.ts";
import type { OperationTrace } from "./traces.ts";

/** Ends a COPY's span when it ends (its own function: nothing here may reach the stream). */
export function traceCopy(trace: OperationTrace, done: Promise<Result<unknown>>): void {
  done.then((r) => trace.done(null, r.count), (e) => trace.done(e));
}

/** The SQL a bulk COPY's span is named and described by (its text is built inside the COPY). */
function bulkText(source: unknown, direction: "from stdin" | "to stdout"): string {
  const target = typeof source === "string"
    ? source
    : source instanceof Identifier
    ? source.text
    : source instanceof Query
    ? `(${source.strings.join("?")})`
    : "";
  return `copy ${target} ${direction}`;
}

/** `sql.copyFrom`/`copyTo` with one span each (rows counted), when telemetry is on. */
export function tracedBulkCopy(telemetry: Telemetry, bulk: BulkCopy): BulkCopy {
  const copyFrom: BulkCopy["copyFrom"] = (table, rows, options) => {
    const trace = telemetry.operation(bulkText(table, "from stdin"), "copy", true);
    const done = bulk.copyFrom(table, rows, options);
    done.then((n) => trace.done(null, n), (e) => trace.done(e));
    return done;
  };
  const copyTo = ((source: Parameters<BulkCopy["copyTo"]>[0], options?: { values?: boolean }) => {
    const batches = bulk.copyTo(source, options as never) as AsyncIterable<unknown[]>;
    return {
      async *[Symbol.asyncIterator]() {
        const trace = telemetry.operation(bulkText(source, "to stdout"), "copy", true);
        let failure: unknown = null;
        try {
          for await (const batch of batches) {
            trace.rows += batch.length;
            yield batch;
          }
        } catch (e) {
          failure = e;
          throw e;
        } finally {
          trace.done(failure);
        }
      },
    };
  }) as BulkCopy["copyTo"];
  return { copyFrom, copyTo };
}
