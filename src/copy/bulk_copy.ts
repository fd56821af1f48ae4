/**
 * `sql.copyFrom` and `sql.copyTo`: bulk load and bulk read through binary
 * COPY, on every `sql` (the pool, a transaction, a reserved connection).
 * The loads (their encoders, decoders and formats: most of src/copy/) are
 * imported on a program's first bulk COPY, not with pgpipe: a COPY is sent
 * only after a catalog lookup's answer anyway, so the import changes no order.
 */
import type { Identifier } from "../query/identifier.ts";
import type { Query } from "../query/query.ts";
import type { Row } from "../query/result.ts";
import { copyToArguments } from "./copy_arguments.ts";
import type { CopyEnv, CopyFromOptions, CopyFromSource } from "./copy_from.ts";
import type { CopyToOptions } from "./copy_to.ts";

/**
 * Bulk COPY of JavaScript rows, in and out, in binary.
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 * const sql = postgres();
 * const n = await sql.copyFrom("points", [[1, 2.5], [2, 3.5]]); // 2
 * for await (const rows of sql.copyTo("points")) console.log(rows); // [{ id: 1, v: 2.5 }, ...]
 * ```
 */
export interface BulkCopy {
  /**
   * Loads rows into `table` with `COPY ... FROM STDIN (FORMAT binary)` and
   * resolves with the number of rows copied.
   *
   * Rows are arrays (values in the order of `options.columns`, default every
   * column of the table) or objects (keys mapped to columns by
   * `transform.column.to`; default the first row's keys), from an array, an
   * iterable, an async iterable or a ReadableStream. The column types are
   * looked up once, each value is encoded by the binary encoder of its
   * column's type, and rows are encoded into a chunk while the previous one
   * goes out, a chunk only sent once the previous one reached the socket,
   * so memory stays flat however large the source.
   *
   * A value that does not fit its column, an `undefined`, a row of the wrong
   * length, the source throwing, or `options.signal` aborting makes pgpipe
   * send CopyFail: nothing is stored, the connection stays usable, and the
   * promise rejects (a {@linkcode CopyRowError} names the row and column).
   * An empty source resolves with 0 without contacting the server.
   *
   * @example
   * ```ts
   * import postgres from "jsr:@pgpipe/pgpipe";
   * const sql = postgres();
   * async function* events() {
   *   for (let i = 0; i < 1_000_000; i++) yield { id: i, at: new Date(), payload: { i } };
   * }
   * const count = await sql.copyFrom("events", events());
   * ```
   */
  copyFrom(
    table: string | Identifier,
    rows: CopyFromSource,
    options?: CopyFromOptions,
  ): Promise<number>;
  /**
   * Reads a table (or a query's result) with `COPY ... TO STDOUT (FORMAT
   * binary)`, as batches of rows decoded as a query's rows are (objects, or
   * arrays with `values: true`). One batch is decoded at a time, as the
   * consumer asks for it, and reading pauses while two more wait as bytes, so
   * memory stays bounded; `break` cancels the COPY.
   *
   * `source` is a table name (a string or `sql("schema.table")`) or a query
   * without parameters (`` sql`select ...` ``).
   *
   * @example
   * ```ts
   * import postgres from "jsr:@pgpipe/pgpipe";
   * const sql = postgres();
   * for await (const rows of sql.copyTo(sql`select id, total from orders where total > 100`)) {
   *   for (const { id, total } of rows) console.log(id, total);
   * }
   * ```
   */
  copyTo<T = Row>(
    source: string | Identifier | Query<readonly unknown[]>,
    options?: CopyToOptions & { values?: false },
  ): AsyncIterable<T[]>;
  /** Same, rows as arrays of values in column order. */
  copyTo(
    source: string | Identifier | Query<readonly unknown[]>,
    options: CopyToOptions & { values: true },
  ): AsyncIterable<unknown[][]>;
}

/** The two methods over one sink (pool or connection) and the client's settings. */
export function bulkCopy(env: CopyEnv): BulkCopy {
  return {
    copyFrom: (table, rows, options) =>
      import("./copy_from.ts").then((m) => m.copyFrom(env, table, rows, options)),
    copyTo: (source: unknown, options: CopyToOptions = {}) => {
      // Bad arguments throw at the call; the load gets them checked.
      const args = copyToArguments(source, options, env.config.columnTo);
      return lazyIterable(async () =>
        (await import("./copy_to.ts")).copyTo(env, source, args)
      ) as AsyncIterable<any[]>;
    },
  };
}

/** An async iterable over the one `load` gives, loaded when iteration starts. */
function lazyIterable<T>(load: () => Promise<AsyncIterable<T>>): AsyncIterable<T> {
  return {
    [Symbol.asyncIterator](): AsyncIterator<T> {
      let inner: Promise<AsyncIterator<T>> | null = null;
      const started = () => inner ??= load().then((it) => it[Symbol.asyncIterator]());
      return {
        next: async () => await (await started()).next(),
        return: async (value?: unknown) => {
          if (inner === null) return { done: true, value: value as T };
          const it = await inner;
          return it.return ? await it.return(value) : { done: true, value: value as T };
        },
      };
    },
  };
}
