/**
 * A lazy query: created by the `sql` tag, sent only when awaited (or
 * `.execute()`d). Until then it can be embedded in another query as a fragment.
 */
import type { Buffer } from "node:buffer";
import type { Readable, Writable } from "node:stream";
import type { QueryConfig } from "./settings.ts";
import { cancelledByUser } from "../errors.ts";
import type { Result, Row } from "./result.ts";

/**
 * How rows are shaped.
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 * const sql = postgres();
 * const rows = await sql`select 1 as a, 2 as b`.values(); // mode "array": [[1, 2]]
 * ```
 */
export type QueryMode = "object" | "array" | "raw";

/**
 * A value of a row of type `R`, as `.values()` gives the rows: any of `R`'s property types (so
 * `any` for the default {@link Row}, as in postgres.js), or `unknown` for rows of unknown shape.
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 * const sql = postgres();
 * const rows = await sql<{ id: number; name: string }[]>`select id, name from users`.values();
 * const first: number | string = rows[0][0];
 * ```
 */
export type ColumnValue<R> = unknown extends R ? unknown
  : NonNullable<R>[keyof NonNullable<R>];

/** How a run is observed and steered: cancellation, and rows streamed to a callback. */
export interface RunControl {
  /** The runner's request once sent (opaque here), for `QueryRunner.cancel`. */
  request: unknown;
  /** Rows go to this callback, with the result they belong to, instead of into it (`forEach`). */
  each: ((row: unknown, result: unknown) => void) | undefined;
  /**
   * A cancel that came before the request existed (its text was still being read, as with
   * `sql.file`): the runner rejects with it instead of sending.
   */
  cancelled: Error | null;
}

/** A batch source for `cursor()`: the next batch (null at the end), and early close. */
export interface CursorSource {
  /** The next batch of rows; null when there are none left. */
  next(): Promise<unknown[] | null>;
  /** Stops early and frees the connection. */
  close(): Promise<void>;
}

/**
 * What `describe()` resolves to: the statement's parameter and result types.
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 * const sql = postgres();
 * const { types, columns } = await sql`select * from users where id = ${1}`.describe();
 * ```
 */
export interface DescribedStatement {
  /** The statement's name: "" (it is described as the unnamed statement). */
  name: string;
  /** The SQL text as sent. */
  string: string;
  /** Parameter type OIDs as the server resolved them. */
  types: number[];
  /** Result columns: name, type OID, and the source table OID and column number (0 if none). */
  columns: { name: string; type: number; table: number; number: number }[];
}

/** Runs a query; supplied by the client that created it. */
export interface QueryRunner {
  /** The client settings queries are built with (transform, custom types). */
  readonly config: QueryConfig;
  /** Sends the query; the promise settles with its result. */
  run(query: Query<readonly unknown[]>, control?: RunControl): Promise<Result<unknown>>;
  /** Cancels the request a run sent (see `Query.cancel`). */
  cancel(control: RunControl, reason: Error): void;
  /** Sends the query as a cursor reading `rows` rows at a time. */
  cursor(query: Query<readonly unknown[]>, rows: number): CursorSource;
  /** Prepares and describes the query without running it. */
  describe(query: Query<readonly unknown[]>): Promise<DescribedStatement>;
  /**
   * Starts a COPY whose data goes through the stream of `kind`; `control`
   * gets its request (for `cancel`).
   */
  copy<K extends keyof CopyStreams>(
    query: Query<readonly unknown[]>,
    kind: K,
    control: RunControl,
  ): CopyStart<CopyStreams[K]>;
}

/**
 * The streams a COPY's data can go through, by the name of the `Query` method
 * that returns each: Node streams (as postgres.js) and Web streams.
 */
export interface CopyStreams {
  /** COPY ... TO STDOUT as a Node `Readable` of Buffers. */
  readable: Readable;
  /** COPY ... FROM STDIN as a Node `Writable` of strings and bytes. */
  writable: Writable;
  /** COPY ... TO STDOUT as a Web `ReadableStream` of bytes. */
  readableStream: ReadableStream<Uint8Array>;
  /** COPY ... FROM STDIN as a Web `WritableStream` of strings and bytes. */
  writableStream: WritableStream<Uint8Array | string>;
}

/** A COPY the runner started: its stream once the server is ready, and its outcome. */
export interface CopyStart<S> {
  /** Resolves with the stream once the server started the COPY. */
  stream: Promise<S>;
  /** Settles when the COPY ends: its count and command, or the server's error. */
  result: Promise<Result<unknown>>;
}

/** A query cancelled before it was sent, or on the server (57014). */
function isCancellation(e: unknown): boolean {
  return (e as { code?: string })?.code === "57014";
}

/**
 * Returned by a `cursor` callback to stop reading early (as in postgres.js).
 *
 * @example
 * ```ts
 * import postgres, { CLOSE } from "jsr:@pgpipe/pgpipe";
 * const sql = postgres();
 * await sql`select * from big`.cursor(100, (rows) => rows.some((r) => r.done) ? CLOSE : undefined);
 * ```
 */
export const CLOSE: unique symbol = Symbol("pgpipe.cursor.close");

/** How `sql.unsafe` and `sql.file` queries differ from tagged ones. */
export interface QueryOptions {
  /** The single string is raw SQL with its own `$n` placeholders (`sql.unsafe`). */
  unsafe?: boolean;
  /** Read the SQL text from this file when the query runs (`sql.file`). */
  file?: string | URL;
  /** Use a named prepared statement (default: the client's `prepare` option). */
  prepare?: boolean;
  /** Use the simple protocol: no parameters, several statements allowed. */
  simple?: boolean;
  /** The query cannot run (building it failed): it rejects with this when run. */
  failure?: unknown;
}

/**
 * A query built by the `sql` tag. It is a thenable: `await` runs it once and
 * every later `await` gets the same outcome.
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 * const sql = postgres();
 * const users = await sql<{ id: number; name: string }[]>`select id, name from users`;
 * const pairs = await sql`select id, name from users`.values(); // [[1, "ada"], ...]
 * const [one, two] = await sql`select 1 as a; select 2 as b`.simple(); // one result per statement
 * ```
 */
export class Query<T extends readonly unknown[] = Row[]> implements PromiseLike<Result<T[number]>> {
  /** The template's literal parts (the same object for every call of a given template). */
  readonly strings: TemplateStringsArray;
  /** The interpolated values: parameters, or fragments to inline. */
  readonly args: readonly unknown[];
  /** Row shape: objects, arrays of values, or arrays of raw bytes. */
  mode: QueryMode = "object";
  /** `strings[0]` is raw SQL with its own `$n` placeholders (made by `sql.unsafe`). */
  readonly unsafe: boolean = false;
  /** The file the SQL text is read from when the query runs (made by `sql.file`), or null. */
  readonly file: string | URL | null = null;
  /**
   * Stack frames of the code that wrote the query, appended to the stack of
   * the error it fails with (the whole stack with the `debug` option).
   */
  origin = "";
  /** Named prepared statement or not; null: the client's `prepare` option. */
  prepare: boolean | null = null;
  /** Sent with the simple protocol (no parameters; several statements allowed). */
  isSimple = false;
  /**
   * Why the query cannot run, when building it failed (e.g. the text given to
   * `sql.unsafe` threw when converted to a string): it rejects with this.
   */
  readonly failure: unknown = undefined;
  #runner: QueryRunner;
  #promise: Promise<Result<T[number]>> | null = null;
  #signal: AbortSignal | null = null;
  #control: RunControl | null = null;
  #cancelled: Error | null = null;

  /** Made by the `sql` tag; not meant to be called directly. */
  constructor(
    strings: TemplateStringsArray,
    args: readonly unknown[],
    runner: QueryRunner,
    options?: QueryOptions,
  ) {
    this.strings = strings;
    this.args = args;
    this.#runner = runner;
    if (options !== undefined) { // tagged templates (the hot path) have none
      this.unsafe = options.unsafe ?? false;
      this.file = options.file ?? null;
      this.prepare = options.prepare ?? null;
      this.isSimple = options.simple ?? false;
      if (options.failure !== undefined) this.failure = options.failure;
    }
  }

  /**
   * Sends the query with the simple protocol, which allows several statements
   * (the result is then an array of results, one per statement) but no
   * parameters: a query with any rejects with `SIMPLE_QUERY_PARAMETERS`.
   */
  simple(): this {
    this.isSimple = true;
    return this;
  }

  /** Rows as arrays of values in column order instead of objects. */
  values(): Query<ColumnValue<T[number]>[][]> {
    this.mode = "array";
    return this as unknown as Query<ColumnValue<T[number]>[][]>;
  }

  /** Rows as arrays of the raw bytes the server sent for each value (null for NULL). */
  raw(): Query<(Buffer | null)[][]> {
    this.mode = "raw";
    return this as unknown as Query<(Buffer | null)[][]>;
  }

  /**
   * Sends the query now instead of when it is first awaited. Its failure is
   * delivered when it is awaited; until then it does not count as unhandled.
   */
  execute(): this {
    this.#start().catch(() => {});
    return this;
  }

  #start(): Promise<Result<T[number]>> {
    return this.#promise ??= this.#run() as Promise<Result<T[number]>>;
  }

  #run(each?: (row: unknown, result: unknown) => void): Promise<Result<unknown>> {
    const signal = this.#signal;
    if (this.#cancelled !== null) return Promise.reject(this.#cancelled);
    const control: RunControl = { request: null, each, cancelled: null };
    this.#control = control;
    if (signal === null) return this.#runner.run(this, control);
    if (signal.aborted) return Promise.reject(signal.reason);
    const onAbort = () => this.cancel(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    const running = this.#runner.run(this, control);
    return running.then(
      (result) => {
        signal.removeEventListener("abort", onAbort);
        return result;
      },
      (e) => {
        signal.removeEventListener("abort", onAbort);
        // Cancelled by the signal (on the server or before sending): reject with its reason.
        throw signal.aborted && isCancellation(e) ? signal.reason : e;
      },
    );
  }

  /**
   * Cancels the query. Not yet sent: it is dropped and rejects with a
   * PostgresError of code 57014 ("canceling statement due to user request"),
   * as if the server had cancelled it. In flight: the server is asked to cancel
   * it when it is the statement running (its neighbours in the pipeline are not
   * affected), and it rejects with the server's 57014 error, unless it finished
   * first. `reason`, an Error, replaces that error for a query not yet sent.
   * A COPY started through one of its stream methods is stopped as its
   * stream's `destroy()`/`abort()`/`cancel()` would stop it.
   */
  cancel(reason?: unknown): void {
    const error = reason instanceof Error ? reason : cancelledByUser();
    if (this.#promise === null) {
      this.#cancelled = error;
      return;
    }
    if (this.#control !== null) this.#runner.cancel(this.#control, error);
  }

  /**
   * Ties the query to an AbortSignal: aborting cancels it (see `cancel`) and
   * the query rejects with the signal's reason.
   */
  signal(signal: AbortSignal): this {
    this.#signal = signal;
    return this;
  }

  /**
   * Calls `fn` for each row as it arrives, without keeping the rows; resolves
   * with the result (count and command, no rows).
   */
  forEach(fn: (row: T[number], result: Result<T[number]>) => void): Promise<Result<T[number]>> {
    return this.#promise ??= this.#run((row, result) =>
      fn(row as T[number], result as Result<T[number]>)
    ) as Promise<Result<T[number]>>;
  }

  /**
   * Reads the rows in batches of `rows` through a cursor, so memory stays
   * bounded by the batch size. Iterate it with `for await`; `break` closes it.
   * With a callback, each batch is passed to `fn` (return `CLOSE` to stop).
   */
  cursor(rows?: number): AsyncIterable<T[number][]>;
  /** Calls `fn` with each batch of `rows` rows; return `CLOSE` from it to stop early. */
  cursor(rows: number, fn: (rows: T[number][]) => unknown): Promise<void>;
  /** Calls `fn` with each row, as a one-row array (a batch of 1). */
  cursor(fn: (rows: T[number][]) => unknown): Promise<void>;
  cursor(
    a?: number | ((rows: T[number][]) => unknown),
    b?: (rows: T[number][]) => unknown,
  ): AsyncIterable<T[number][]> | Promise<void> {
    const rows = typeof a === "number" ? a : 1;
    const fn = typeof a === "function" ? a : b;
    if (!Number.isInteger(rows) || rows < 1) {
      throw new RangeError(`cursor batch size must be a positive integer, got ${rows}`);
    }
    const iterable = this.#iterate(rows);
    if (fn === undefined) return iterable;
    return (async () => {
      for await (const batch of iterable) if (await fn(batch) === CLOSE) break;
    })();
  }

  #iterate(rows: number): AsyncIterable<T[number][]> {
    const open = () => this.#runner.cursor(this, rows);
    return {
      [Symbol.asyncIterator](): AsyncIterator<T[number][]> {
        let source: CursorSource | null = null;
        return {
          async next(): Promise<IteratorResult<T[number][]>> {
            source ??= open();
            for (;;) {
              const batch = await source.next();
              if (batch === null) return { done: true, value: undefined };
              if (batch.length > 0) return { done: false, value: batch as T[number][] };
            }
          },
          async return(): Promise<IteratorResult<T[number][]>> {
            await source?.close();
            return { done: true, value: undefined };
          },
        };
      },
    };
  }

  /** Prepares the query and resolves with its parameter and result types, without running it. */
  describe(): Promise<DescribedStatement> {
    return this.#runner.describe(this);
  }

  /**
   * For `COPY ... FROM STDIN`: resolves with a Node `Writable` once the server
   * is ready for data, as in postgres.js. Write strings or bytes; `end()`
   * finishes the COPY and `'finish'` is emitted once the server confirmed it
   * (a server error is emitted as `'error'` instead); `destroy(err)` aborts it
   * with CopyFail (the table is untouched). It works as the destination of
   * `pipe()` and `stream.pipeline()`. Awaiting the query afterwards gives the
   * COPY's outcome: a `Result` with `count` rows copied, or the server's error.
   *
   * @example
   * ```ts
   * import postgres from "jsr:@pgpipe/pgpipe";
   * import { Readable } from "node:stream";
   * import { pipeline } from "node:stream/promises";
   * const sql = postgres();
   * const query = sql`copy users (name, age) from stdin`;
   * await pipeline(Readable.from(["Murray\t68\n", "Walter\t80\n"]), await query.writable());
   * console.log((await query).count); // 2
   * ```
   */
  writable(): Promise<Writable> {
    return this.#copy("writable");
  }

  /**
   * For `COPY ... TO STDOUT`: resolves with a Node `Readable` of Buffers, one
   * per CopyData message (a row, in the text and CSV formats), once the server
   * started the COPY, as in postgres.js. Reading from the server pauses while
   * the stream's buffer is full. `destroy()` stops the COPY (outside a
   * transaction the server is asked to cancel it, inside one the rest is read
   * and dropped); the connection stays usable either way. Awaiting the query
   * afterwards gives the COPY's outcome.
   *
   * @example
   * ```ts
   * import postgres from "jsr:@pgpipe/pgpipe";
   * const sql = postgres();
   * const readable = await sql`copy (select name, age from users) to stdout`.readable();
   * for await (const row of readable) console.log(row.toString()); // "Murray\t68\n"
   * ```
   */
  readable(): Promise<Readable> {
    return this.#copy("readable");
  }

  /**
   * For `COPY ... FROM STDIN`, as a Web `WritableStream` (e.g. the target of
   * `pipeTo`): resolves once the server is ready for data. `close()` finishes
   * the COPY and resolves when the server confirmed it; `abort()` cancels it
   * with CopyFail.
   *
   * @example
   * ```ts
   * import postgres from "jsr:@pgpipe/pgpipe";
   * const sql = postgres();
   * await ReadableStream.from(["1\tAda\n", "2\tAlan\n"])
   *   .pipeTo(await sql`copy users (id, name) from stdin`.writableStream());
   * ```
   */
  writableStream(): Promise<WritableStream<Uint8Array | string>> {
    return this.#copy("writableStream");
  }

  /**
   * For `COPY ... TO STDOUT`, as a Web `ReadableStream` of bytes with
   * backpressure: resolves once the server started the COPY. `cancel()` stops
   * it, as `destroy()` does for {@linkcode Query.readable}.
   *
   * @example
   * ```ts
   * import postgres from "jsr:@pgpipe/pgpipe";
   * const sql = postgres();
   * const csv = await sql`copy users to stdout with (format csv, header)`.readableStream();
   * await csv.pipeTo((await Deno.create("users.csv")).writable);
   * ```
   */
  readableStream(): Promise<ReadableStream<Uint8Array>> {
    return this.#copy("readableStream");
  }

  /**
   * Starts the COPY; from then on the query's own promise is the COPY's
   * outcome, and `cancel()`/`signal()` stop it.
   */
  #copy<K extends keyof CopyStreams>(kind: K): Promise<CopyStreams[K]> {
    if (this.#cancelled !== null) return Promise.reject(this.#cancelled);
    const signal = this.#signal;
    if (signal?.aborted) return Promise.reject(signal.reason);
    const control: RunControl = { request: null, each: undefined, cancelled: null };
    const started = this.#runner.copy(this, kind, control);
    let result = started.result;
    if (signal !== null) {
      const onAbort = () =>
        this.#runner.cancel(
          control,
          signal.reason instanceof Error ? signal.reason : cancelledByUser(),
        );
      signal.addEventListener("abort", onAbort, { once: true });
      result = result.then(
        (r) => {
          signal.removeEventListener("abort", onAbort);
          return r;
        },
        (e) => {
          signal.removeEventListener("abort", onAbort);
          // Stopped by the signal: reject with its reason, as other queries do.
          throw signal.aborted && isCancellation(e) ? signal.reason : e;
        },
      );
      result.catch(() => {}); // observed by awaiting the query, if ever
    }
    if (this.#promise === null) {
      this.#promise = result as Promise<Result<T[number]>>;
      this.#control = control;
    }
    return started.stream;
  }

  /** Runs the query (once) and settles with its result. */
  then<A = Result<T[number]>, B = never>(
    onfulfilled?: ((value: Result<T[number]>) => A | PromiseLike<A>) | null,
    onrejected?: ((reason: unknown) => B | PromiseLike<B>) | null,
  ): Promise<A | B> {
    return this.#start().then(onfulfilled, onrejected);
  }

  /** Runs the query (once) and handles its failure. */
  catch<B = never>(
    onrejected?: ((reason: unknown) => B | PromiseLike<B>) | null,
  ): Promise<Result<T[number]> | B> {
    return this.#start().catch(onrejected);
  }

  /** Runs the query (once) and calls `onfinally` when it settles. */
  finally(onfinally?: (() => void) | null): Promise<Result<T[number]>> {
    return this.#start().finally(onfinally);
  }

  /** Shown by `Object.prototype.toString`. */
  get [Symbol.toStringTag](): string {
    return "Query";
  }
}
