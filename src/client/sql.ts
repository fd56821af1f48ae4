/**
 * The `sql` function: a tagged template that builds lazy queries, plus the
 * client methods hanging off it. The same tag is built for the pool, for a
 * transaction and for a reserved connection; only where requests go differs.
 */
import type { Connection } from "../connection/connection.ts";
import {
  QueryRequest,
  type QuerySpec,
  type ResultTarget,
} from "../connection/requests/query_request.ts";
import { CursorRequest } from "../connection/requests/cursor_request.ts";
import {
  CopyInRequest,
  CopyOutRequest,
  CopyRequest,
  type CopyResult,
} from "../copy/copy_request.ts";
import { CopyReadable, CopyWritable } from "../copy/node_streams.ts";
import { copyInWebStream, copyOutWebStream } from "../copy/web_streams.ts";
import type { PipelineRequest } from "../connection/requests/request.ts";
import { ConnectionError, PostgresError, QueryError } from "../errors.ts";
import { compile } from "../query/compile.ts";
import { clientDecode, type QueryConfig, queryConfig } from "../query/settings.ts";
import type { Typed } from "../query/custom_types.ts";
import { readQueryFile } from "../query/file.ts";
import { Helper } from "../query/helpers.ts";
import { Identifier } from "../query/identifier.ts";
import {
  CLOSE,
  type CopyStart,
  type CopyStreams,
  type CursorSource,
  type DescribedStatement,
  Query,
  type QueryRunner,
  type RunControl,
} from "../query/query.ts";
import { fileQuery, type UnsafeOptions, unsafeQuery } from "../query/raw.ts";
import { originOf, type QueryDetails, withQueryDetails } from "../query/origin.ts";
import { Result, type Row } from "../query/result.ts";
import { array, json } from "../query/typed_values.ts";
import {
  inferOid,
  Parameter,
  serialize,
  serializeCustom,
  serializeParameter,
} from "../types/encode.ts";
import type { Options } from "../config/options.ts";
import { resolveOptions } from "../config/resolve.ts";
import type { PasswordSource } from "../connection/startup.ts";
import { socketPath } from "../connection/transport/transport.ts";
import { Pool } from "./pool.ts";
import { arrayTypesRequest } from "./fetch_types.ts";
import { mayEndTransaction } from "../query/transaction_end.ts";
import { quoteIdentifier } from "../connection/requests/driver_queries.ts";
import { Listener, type ListenHandle, type NotifyHandler } from "../listen/listen.ts";
import { type LargeObject, openLargeObject } from "../large_object/large_object.ts";
import {
  type SubscribeHandler,
  Subscriber,
  type SubscriptionHandle,
} from "../replication/subscribe.ts";
import { type BulkCopy, bulkCopy } from "../copy/bulk_copy.ts";
import { Telemetry } from "../telemetry/telemetry.ts";
import type { OtelContext } from "../telemetry/otel.ts";
import { type OperationTrace, QueryTrace, type TransactionTrace } from "../telemetry/traces.ts";
import { tracedBulkCopy } from "../telemetry/traced_copy.ts";

/** The most parameters one query may carry (a 16-bit count in Bind; postgres.js's limit). */
const MAX_PARAMETERS = 65534;

/**
 * Options shown back on `sql.options`, in postgres.js's shape: every host and
 * port as arrays, `path` for a unix socket, `pass` for the password. The
 * password is there (as `pass`, and `password`) but not enumerable, so
 * logging the options does not print it.
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 * const sql = postgres("postgres://ada:secret@db1,db2:5433/app");
 * console.log(sql.options.host, sql.options.port); // ["db1", "db2"] [5432, 5433]
 * console.log(sql.options.pass); // "secret" (not shown by console.log(sql.options))
 * ```
 */
export interface PublicOptions {
  /** Every host (or socket directory), in the order given. */
  host: string[];
  /** The port of each host. */
  port: number[];
  /** The unix socket file, when the first host is a socket directory. */
  path?: string;
  /** Database. */
  database: string;
  /** User. */
  user: string;
  /** The password as given (options, URL or environment); not enumerable. */
  readonly pass?: PasswordSource;
  /** The same as `pass`; not enumerable. */
  readonly password?: PasswordSource;
  /** The sslmode in force (postgres.js's `ssl`). */
  ssl: string;
  /** The same as `ssl` (pgpipe's name). */
  sslmode: string;
  /** `postgres` (an SSLRequest first) or `direct` (TLS at once, PostgreSQL 17+). */
  sslnegotiation: string;
  /** Most connections. */
  max: number;
  /** Seconds an idle connection is kept (0: for ever). */
  idle_timeout: number;
  /** Seconds allowed to connect, or the object given, read at each attempt. */
  connect_timeout: number | { valueOf(): number };
  /** Seconds a connection lives before it is replaced (0: for ever). */
  max_lifetime: number;
  /** Most requests in flight per connection. */
  max_pipeline: number;
  /** Whether named prepared statements are used. */
  prepare: boolean;
  /** Whether array types are fetched on the first connection. */
  fetch_types: boolean;
  /** Whether `debug` is on (a hook or whole stacks). */
  debug: boolean;
  /** The `target_session_attrs` in force. */
  target_session_attrs: string;
  /** The publications `sql.subscribe` streams (the option as given, default `alltables`). */
  publications: string;
  /** The startup parameters sent to the server (application_name, any `connection` values). */
  connection: Record<string, string>;
  /** The server's parameters: the same object as `sql.parameters`. */
  parameters: Readonly<Record<string, string>>;
}

/**
 * The tagged template shared by a client, a transaction and a reserved
 * connection: call it to build a query, await the query to run it. Called as a
 * plain function it makes identifiers and helpers to interpolate.
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 * const sql = postgres();
 * const rows = await sql`select * from users where id = ${1}`;
 * await sql`insert into users ${sql({ name: "Ada", age: 36 })}`;
 * await sql`select ${sql(["name", "age"])} from ${sql("public.users")}`;
 * ```
 */
export interface SqlTag extends BulkCopy {
  /** Builds a query from a template; values become parameters. */
  <T extends readonly unknown[] = Row[]>(
    strings: TemplateStringsArray,
    ...values: unknown[]
  ): Query<T>;
  /** An escaped identifier: `sql("public.users")` is `"public"."users"`. */
  (name: string): Identifier;
  /** A list of escaped identifiers: `sql("a", "b")` is `"a","b"`. */
  (name: string, ...names: string[]): Helper;
  /** An insert/update/select/values helper over an object or rows, with the columns to use (default: all keys of the first). */
  <T extends object>(value: T | readonly T[], ...columns: (keyof T & string)[]): Helper;
  /** Same, with the columns as one array. */
  <T extends object>(value: T | readonly T[], columns: readonly (keyof T & string)[]): Helper;
  /** A list of values (after `in` or `values`) or of column names (after `select`). */
  (values: readonly unknown[]): Helper;
  /**
   * Raw SQL with its own `$n` placeholders. Without arguments it uses the simple
   * protocol (several statements allowed: one result each); `prepare` defaults to false.
   */
  unsafe<T extends readonly unknown[] = Row[]>(
    text: string,
    args?: readonly unknown[],
    options?: UnsafeOptions,
  ): Query<T>;
  /** Same, with options and no arguments. */
  unsafe<T extends readonly unknown[] = Row[]>(text: string, options: UnsafeOptions): Query<T>;
  /** Like `unsafe`, with the text read from a file when the query runs. */
  file<T extends readonly unknown[] = Row[]>(
    path: string | URL,
    args?: readonly unknown[],
    options?: UnsafeOptions,
  ): Query<T>;
  /** Same, with options and no arguments. */
  file<T extends readonly unknown[] = Row[]>(path: string | URL, options: UnsafeOptions): Query<T>;
  /** A jsonb parameter: the value's JSON text (even for a string). */
  json(value: unknown): Parameter;
  /** An array parameter of an element type OID (or an array type OID); see the README. */
  array(values: readonly unknown[], type?: number): Parameter;
  /** A parameter of a type OID; `sql.typed.<name>(value)` for each custom type. */
  readonly typed: Typed;
  /** The same as `typed` (postgres.js has both). */
  readonly types: Typed;
  /** Return it from a `cursor` callback to stop reading early. */
  readonly CLOSE: typeof CLOSE;
  /** The class of errors reported by the server, for `err instanceof sql.PostgresError`. */
  readonly PostgresError: typeof PostgresError;
}

/**
 * What a transaction callback's result resolves to: an array of queries
 * (pipelined together) becomes the array of their results.
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 * const sql = postgres();
 * const [a, b] = await sql.begin((tx) => [tx`select 1 as x`, tx`select 2 as y`]); // two Results
 * ```
 */
export type UnwrapQueries<T> = T extends readonly unknown[]
  ? { -readonly [K in keyof T]: Awaited<T[K]> }
  : Awaited<T>;

/**
 * A transaction's `sql`: queries go to the transaction's connection, in
 * order, pipelined.
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 * const sql = postgres();
 * await sql.begin(async (tx) => {
 *   await tx`insert into log (msg) values (${"a"})`;
 *   await tx.savepoint(async (sp) => {
 *     await sp`insert into log (msg) values (${"b"})`;
 *   });
 * });
 * ```
 */
export interface TransactionSql extends SqlTag {
  /**
   * Two-phase commit: when the transaction succeeds it ends with
   * `PREPARE TRANSACTION 'name'` instead of COMMIT, to be finished later with
   * `COMMIT PREPARED 'name'` (or `ROLLBACK PREPARED`), from any connection. The
   * server needs `max_prepared_transactions` above 0.
   *
   * @example
   * ```ts
   * import postgres from "jsr:@pgpipe/pgpipe";
   * const sql = postgres();
   * await sql.begin(async (tx) => {
   *   await tx`insert into ledger (amount) values (${10})`;
   *   await tx.prepare("ledger-42");
   * });
   * await sql`commit prepared 'ledger-42'`;
   * ```
   */
  prepare(name: string): Promise<void>;
  /** Runs `fn` inside a savepoint: released on success, rolled back to on a throw (which is rethrown). */
  savepoint<T>(fn: (sql: TransactionSql) => T | Promise<T>): Promise<UnwrapQueries<T>>;
  /** Same, with a savepoint name. */
  savepoint<T>(
    name: string,
    fn: (sql: TransactionSql) => T | Promise<T>,
  ): Promise<UnwrapQueries<T>>;
}

/**
 * A transaction opened without a callback, for `await using`: it rolls back
 * when the scope exits unless `commit()` was called.
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 * const sql = postgres();
 * {
 *   await using tx = await sql.begin();
 *   await tx`update accounts set balance = balance - 10 where id = ${1}`;
 *   await tx.commit();
 * }
 * ```
 */
export interface Transaction extends TransactionSql {
  /** Commits and returns the connection to the pool. */
  commit(): Promise<void>;
  /** Rolls back and returns the connection to the pool. */
  rollback(): Promise<void>;
  /** Rolls back unless committed. */
  [Symbol.asyncDispose](): Promise<void>;
}

/**
 * A connection reserved for one caller until released.
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 * const sql = postgres();
 * await using reserved = await sql.reserve();
 * // Session-scoped work must stay on one connection: take and release the lock there.
 * await reserved`select pg_advisory_lock(${42})`;
 * await reserved`update jobs set taken = true where id = ${7}`;
 * await reserved`select pg_advisory_unlock(${42})`;
 * ```
 */
export interface ReservedSql extends SqlTag {
  /** Returns the connection to the pool. */
  release(): void;
  /** Releases the connection. */
  [Symbol.asyncDispose](): Promise<void>;
}

/**
 * A client: call it as a tagged template to build a query, await the query to
 * run it. Queries issued concurrently are pipelined on one connection.
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 * const sql = postgres("postgres://app@localhost/app");
 * const [user] = await sql`select * from users where id = ${1}`;
 * await sql.end();
 * ```
 */
export interface Sql extends SqlTag {
  /** The resolved options (the password only as non-enumerable `pass` and `password`). */
  readonly options: PublicOptions;
  /**
   * The server's parameters as it reports them (`server_version`, `TimeZone`,
   * `application_name`, ...): empty until the first connection is open, then
   * kept up to date as the server reports changes (the same object throughout).
   *
   * @example
   * ```ts
   * import postgres from "jsr:@pgpipe/pgpipe";
   * const sql = postgres();
   * await sql`select 1`;
   * console.log(sql.parameters.server_version);
   * ```
   */
  readonly parameters: Readonly<Record<string, string>>;
  /**
   * Runs `fn` in a transaction on a reserved connection: committed when `fn`
   * resolves, rolled back (and the error rethrown) when it throws. If `fn`
   * returns an array of queries they are awaited together (pipelined).
   */
  begin<T>(fn: (sql: TransactionSql) => T | Promise<T>): Promise<UnwrapQueries<T>>;
  /** Same, with transaction modes, e.g. `"isolation level serializable"` or `"read only"`. */
  begin<T>(options: string, fn: (sql: TransactionSql) => T | Promise<T>): Promise<UnwrapQueries<T>>;
  /** Opens a transaction to use with `await using`; see {@link Transaction}. */
  begin(options?: string): Promise<Transaction>;
  /** Reserves a connection for this caller alone until `release()`. */
  reserve(): Promise<ReservedSql>;
  /**
   * Calls `fn` with each notification's payload on `channel`. Listening uses
   * one dedicated connection, reopened (and every channel listened to again)
   * if it is lost; `onlisten` is called each time listening (re)starts.
   */
  listen(channel: string, fn: NotifyHandler, onlisten?: () => void): Promise<ListenHandle>;
  /** Sends a notification (`pg_notify`), the payload as a parameter. */
  notify(channel: string, payload: string): Promise<void>;
  /**
   * Calls `fn` for each row change that `pattern` matches, streamed by logical
   * replication (the `pgoutput` plugin) from the publications named by the
   * `publications` option (default `alltables`; create it yourself, e.g.
   * `create publication alltables for all tables`). The server needs
   * `wal_level = logical`, and the user the REPLICATION attribute (or superuser).
   *
   * `pattern` is `operation[:[schema.]table[=key]]`: the operation `*`,
   * `insert`, `update`, `delete` (or `truncate`, which `*` leaves out); the
   * schema defaults to `public`; `key` is the row's replica identity (primary
   * key) values joined by commas. `fn` gets the row (the new one, or for a
   * delete the old one or its key columns; null for a truncate) and
   * `{ command, relation, key, old }`, decoded with the client's types and
   * transforms.
   *
   * Every subscription of a client shares one replication connection (not
   * counted in `max`) and a TEMPORARY slot. If the connection is lost it is
   * reopened with a new slot (changes made meanwhile are not seen) and
   * `onsubscribe` runs again, as it does first when streaming starts. What
   * `fn` or `onsubscribe` throws, and a lost stream, go to `onerror` (else to
   * the console); nothing stops the stream.
   *
   * @example
   * ```ts
   * import postgres from "jsr:@pgpipe/pgpipe";
   * const sql = postgres({ publications: "alltables" });
   * const { unsubscribe } = await sql.subscribe(
   *   "update:users=1",
   *   (row, { command, old }) => console.log(command, old?.name, "->", row?.name),
   *   () => console.log("streaming: reload anything missed while away"),
   * );
   * await sql`update users set name = 'Ada' where id = 1`;
   * await unsubscribe();
   * ```
   */
  subscribe(
    pattern: string,
    fn: SubscribeHandler,
    onsubscribe?: () => void,
    onerror?: (err: Error) => void,
  ): Promise<SubscriptionHandle>;
  /**
   * Opens the large object `oid`, or creates one without it, in a transaction
   * on a reserved connection, as postgres.js does; `close()` on the result
   * commits and releases the connection. `mode` is `INV_WRITE | INV_READ`
   * (`0x20000 | 0x40000`, the default), or one of them.
   *
   * @example
   * ```ts
   * import postgres from "jsr:@pgpipe/pgpipe";
   * import { createReadStream } from "node:fs";
   * import { pipeline } from "node:stream/promises";
   * const sql = postgres();
   * const lo = await sql.largeObject();
   * await pipeline(createReadStream("photo.jpg"), await lo.writable());
   * await lo.close();
   * await sql`insert into photos (file) values (${lo.oid})`;
   * ```
   */
  largeObject(oid?: number, mode?: number): Promise<LargeObject>;
  /** Waits for queries in flight, then closes every connection; with `timeout` (seconds), destroys them after it. */
  end(options?: { timeout?: number }): Promise<void>;
  /** The same as `end()` (Bun.sql's name). */
  close(options?: { timeout?: number }): Promise<void>;
  /** Same as `end()`, for `await using sql = postgres()`. */
  [Symbol.asyncDispose](): Promise<void>;
}

/** Where a tag's requests go: the pool or one reserved connection. */
interface Sink {
  send(req: PipelineRequest): void;
  cancel(req: PipelineRequest, reason: Error): void;
}

function isTemplate(value: unknown): value is TemplateStringsArray {
  return Array.isArray(value) && Object.hasOwn(value, "raw");
}

/** A statement that opens a transaction block (checked only on a shared pool with max > 1). */
const OPENS_TRANSACTION = /^\s*(?:begin|start\s+transaction)\b/i;

/** Whether `text` may open a transaction: a cheap first-character test before the regex. */
function opensTransaction(text: string): boolean {
  const c = text.charCodeAt(0) | 32;
  return (c === 98 || c === 115 || c <= 32) && OPENS_TRANSACTION.test(text); // b, s, space
}

/**
 * Statements that start, end or roll back (to a savepoint) a transaction: inside sql.begin they
 * never share a batch, so an error earlier in a batch cannot make the server skip them.
 */
const CONTROLS_TRANSACTION =
  /^\s*(?:begin|start|commit|end|rollback|abort|savepoint|release|prepare\s+transaction)\b/i;

/** CONTROLS_TRANSACTION, after a first-letters test that rules out most statements cheaply. */
function controlsTransaction(text: string): boolean {
  const c = text.charCodeAt(0) | 32;
  if (c === 115) { // s: savepoint and start, but not select or set
    if ((text.charCodeAt(1) | 32) === 101) return false;
  } else if (c > 32 && c !== 97 && c !== 98 && c !== 99 && c !== 101 && c !== 112 && c !== 114) {
    return false; // not a, b, c, e, p, r, nor leading space
  }
  return CONTROLS_TRANSACTION.test(text);
}

/**
 * Turns queries into requests for one sink. `shared`: the sink is a pool of
 * several connections, where a transaction opened by a plain query would
 * catch unrelated queries pipelined on its connection, so it is refused
 * (postgres.js's UNSAFE_TRANSACTION). `transaction`: the sink is a
 * transaction's connection, where queries written together share one Sync.
 * `telemetry`: the client's, or null when it records nothing; `parent`: the span context of
 * the transaction whose queries these are.
 */
function makeRunner(
  sink: Sink,
  prepare: boolean,
  config: QueryConfig,
  telemetry: Telemetry | null,
  shared = false,
  transaction = false,
  parent?: OtelContext,
): QueryRunner {
  const undef = config.undefinedValue;
  const debug = config.debug;
  const serializers = config.serializers;
  const newResult = () => new Result<unknown>() as unknown as ResultTarget;

  /** Serialises a compiled query into a request spec; throws a QueryError on bad input. */
  function toSpec(query: Query<readonly unknown[]>, text: string, values: readonly unknown[]) {
    const n = values.length;
    if (n > MAX_PARAMETERS) {
      throw new QueryError(
        "MAX_PARAMETERS_EXCEEDED",
        `a query can have at most ${MAX_PARAMETERS} parameters; this one has ${n}`,
      );
    }
    if (text.includes("\0")) {
      throw new QueryError("NUL_IN_QUERY", "the query text contains a NUL byte");
    }
    if (shared && opensTransaction(text)) {
      throw new QueryError(
        "UNSAFE_TRANSACTION",
        "a transaction on a pool of several connections needs sql.begin() or sql.reserve() " +
          "(or max: 1): queries sent meanwhile could run inside it",
      );
    }
    const simple = query.isSimple;
    if (simple && n > 0) {
      throw new QueryError(
        "SIMPLE_QUERY_PARAMETERS",
        `the simple protocol cannot send parameters; this query has ${n}`,
      );
    }
    const params = new Array<string | null>(n);
    const types = new Array<number>(n);
    for (let i = 0; i < n; i++) {
      let value = values[i];
      // The common cases first: strings and numbers go untyped (the server infers the type).
      if (serializers === null) {
        if (typeof value === "string") {
          params[i] = value;
          types[i] = 0;
          continue;
        }
        if (typeof value === "number" && !(value === 0 && 1 / value < 0)) {
          params[i] = "" + value;
          types[i] = 0;
          continue;
        }
      }
      if (value instanceof Parameter) {
        types[i] = value.type;
        params[i] = serializeParameter(value, serializers, undef);
        continue;
      }
      if (value === undefined) value = undef; // still undefined: serialize rejects it
      const oid = inferOid(value);
      types[i] = oid;
      params[i] = serializers === null
        ? serialize(value, undef)
        : serializeCustom(value, oid, serializers, undef);
    }
    const spec: QuerySpec = {
      text,
      params,
      values,
      types,
      prepare: query.prepare ?? prepare,
      mode: query.mode,
    };
    if (simple) spec.simple = true;
    if (shared) spec.shared = true;
    // In a transaction an error aborts the block anyway: queries written together share a Sync.
    else if (transaction && !simple && !controlsTransaction(text)) spec.batch = true;
    return spec;
  }

  /**
   * The query's spec. Tagged queries are built synchronously (so everything
   * issued in one tick leaves in one write); `sql.file` reads its file first.
   * Bad input throws (or rejects, for files).
   */
  function specOf(query: Query<readonly unknown[]>): QuerySpec | Promise<QuerySpec> {
    if (query.failure !== undefined) throw query.failure;
    if (query.file !== null) {
      return readQueryFile(query.file).then((text) => toSpec(query, text, query.args));
    }
    const { text, values } = compile(query, config.columnTo);
    return toSpec(query, text, values);
  }

  /** The query's details for its error; `spec` is null when building it failed. */
  function details(query: Query<readonly unknown[]>, spec: QuerySpec | null): QueryDetails {
    return {
      origin: query.origin,
      query: spec?.text ?? query.strings.join("?"),
      // As postgres.js: the values as they were bound, before they became text.
      parameters: spec === null ? [] : spec.values ?? spec.params,
      args: query.args,
      types: spec?.types ?? [],
    };
  }

  /** The error a query rejects with: its details attached (see withQueryDetails). */
  function failure(query: Query<readonly unknown[]>, spec: QuerySpec | null, e: unknown): Error {
    return withQueryDetails(e, details(query, spec), debug);
  }

  /**
   * Runs `start` with the spec now when it is ready, later for files; failures
   * reject, with the query's details. `start` gets the `fail` to reject with.
   */
  function withSpec<T>(
    query: Query<readonly unknown[]>,
    start: (spec: QuerySpec, fail: (e: unknown) => Error) => T | Promise<T>,
  ): Promise<T> {
    let spec: QuerySpec | null = null;
    const fail = (e: unknown) => failure(query, spec, e);
    try {
      const ready = specOf(query);
      if (ready instanceof Promise) {
        return ready.then((s) => start(spec = s, fail)).catch((e) => {
          throw fail(e);
        });
      }
      spec = ready;
      return Promise.resolve(start(ready, fail));
    } catch (e) {
      return Promise.reject(fail(e));
    }
  }

  function copyText(spec: QuerySpec): string {
    if (spec.params.length > 0) {
      throw new QueryError("COPY_PARAMETERS", "COPY cannot take parameters");
    }
    return spec.text;
  }

  return {
    config,
    run(query: Query<readonly unknown[]>, control?: RunControl): Promise<Result<unknown>> {
      return withSpec(query, (spec, fail) =>
        new Promise<Result<unknown>>((resolve, reject) => {
          if (control?.cancelled) return reject(control.cancelled); // cancelled while read
          const target = newResult();
          const each = control?.each;
          if (each !== undefined) target.push = (row: unknown) => (each(row, target), 0);
          const settle = {
            resolve: resolve as (r: ResultTarget) => void,
            reject: (e: Error) => reject(fail(e)),
          };
          // Telemetry off: one null check, nothing allocated.
          const trace = telemetry === null
            ? null
            : telemetry.query(spec.text, spec.simple !== true, settle, parent);
          const req = new QueryRequest(
            spec,
            target,
            trace ?? settle,
            spec.simple ? newResult : undefined,
          );
          if (trace !== null) trace.request = req;
          sink.send(req);
          if (trace !== null) trace.sent(sink);
          if (control !== undefined) control.request = req;
        }));
    },
    cancel(control: RunControl, reason: Error): void {
      const req = control.request as PipelineRequest | null;
      if (req === null) { // not sent yet (its text is still being read): never send it
        control.cancelled = reason;
        return;
      }
      if (req instanceof QueryRequest && req.settle instanceof QueryTrace) req.settle.cancelled();
      // A COPY already on its connection ends through the protocol (CopyFail, or cancel/drain).
      if (req instanceof CopyRequest && req.sent) req.cancel(reason);
      else sink.cancel(req, reason);
    },
    cursor(query: Query<readonly unknown[]>, rows: number): CursorSource {
      let fail = (e: unknown) => failure(query, null, e);
      let trace: OperationTrace | null = null;
      const request = withSpec(query, (spec, failWith) => {
        fail = failWith;
        if (telemetry !== null) {
          trace = telemetry.operation(spec.text, "cursor", spec.simple !== true, parent);
        }
        // A cursor needs a portal with a row limit: the extended protocol, even for `unsafe` text.
        const req = new CursorRequest({ ...spec, simple: false }, rows, newResult);
        sink.send(req);
        return req;
      });
      return {
        next: async () => {
          try {
            const batch = (await (await request).next()) as unknown as unknown[] | null;
            if (trace !== null) {
              if (batch === null) trace.done(null);
              else trace.rows += batch.length;
            }
            return batch;
          } catch (e) {
            const err = fail(e);
            trace?.done(err);
            throw err;
          }
        },
        close: async () => {
          await (await request.catch(() => null))?.close();
          trace?.done(null);
        },
      };
    },
    describe(query: Query<readonly unknown[]>): Promise<DescribedStatement> {
      return withSpec(query, (spec, fail) =>
        new Promise<DescribedStatement>((resolve, reject) => {
          const describe = { ...spec, describeOnly: true, params: [] };
          const done = (r: ResultTarget) => {
            const st = r.statement;
            resolve({
              string: spec.text,
              types: st?.parameterTypes ?? [],
              columns: (st?.columns ?? []).map((c) => ({
                name: c.name,
                type: c.type,
                table: c.table,
                number: c.number,
              })),
            });
          };
          const settle = { resolve: done, reject: (e: Error) => reject(fail(e)) };
          sink.send(new QueryRequest(describe, newResult(), settle));
        }));
    },
    copy<K extends keyof CopyStreams>(
      query: Query<readonly unknown[]>,
      kind: K,
      control: RunControl,
    ): CopyStart<CopyStreams[K]> {
      let done: Promise<Result<unknown>> | null = null;
      const stream = withSpec(query, (spec, fail) => {
        if (control.cancelled) throw control.cancelled; // cancelled while its text was read
        const text = copyText(spec);
        const into = kind === "writable" || kind === "writableStream";
        const req = into ? new CopyInRequest(text, fail) : new CopyOutRequest(text, fail);
        control.request = req;
        done = req.done.then(copyResult);
        if (telemetry !== null) {
          traceCopy(telemetry.operation(text, "copy", spec.simple !== true, parent), done);
        }
        done.catch(ignore); // when the stream rejects, `result` rejects with that instead
        return startStream(sink, kind, req);
      });
      const result = stream.then(() => done!);
      result.catch(ignore); // observed by awaiting the query, if ever
      return { stream, result };
    },
  };
}

/** Ends a COPY's span when it ends (its own function: nothing here may reach the stream). */
function traceCopy(trace: OperationTrace, done: Promise<Result<unknown>>): void {
  done.then((r) => trace.done(null, r.count), (e) => trace.done(e));
}

/** The stream of each kind over a COPY request of the matching direction. */
const copyStreams: { [K in keyof CopyStreams]: (req: CopyRequest) => CopyStreams[K] } = {
  writable: (req) => new CopyWritable(req as CopyInRequest),
  readable: (req) => new CopyReadable(req as CopyOutRequest),
  writableStream: (req) => copyInWebStream(req as CopyInRequest),
  readableStream: (req) => copyOutWebStream(req as CopyOutRequest),
};

/**
 * Sends the COPY and resolves with its stream once the server started it. No
 * closure here may outlive that: the request's promises must not reach the
 * stream, or a stream the user dropped could never be collected (see
 * abandonWhenCollected).
 */
function startStream<K extends keyof CopyStreams>(
  sink: Sink,
  kind: K,
  req: CopyRequest,
): Promise<CopyStreams[K]> {
  const stream = (copyStreams[kind] as (req: CopyRequest) => CopyStreams[K])(req);
  sink.send(req);
  return req.started.then(() => stream);
}

function ignore(): void {}

/** A finished COPY as a query result: no rows, the count and command of its completion tag. */
function copyResult(r: CopyResult): Result<unknown> {
  const result = new Result<unknown>();
  result.command = r.command;
  result.count = r.count;
  return result;
}

/**
 * Builds the tagged template over a runner; `sink` is where its requests go (COPY streams, bulk
 * COPY), `telemetry` gives bulk COPY its spans.
 */
function makeTag(runner: QueryRunner, sink: Sink, telemetry: Telemetry | null): SqlTag {
  const { columnTo, typed, debug } = runner.config;
  const sql = function sql(first: unknown, ...rest: unknown[]) {
    if (isTemplate(first)) {
      const query = new Query(first, rest, runner);
      query.origin = originOf(first, sql, debug);
      return query;
    }
    if (typeof first === "string" && rest.length === 0) {
      return new Identifier(columnTo === undefined ? first : columnTo(first));
    }
    if (typeof first === "string" || (typeof first === "object" && first !== null)) {
      return new Helper(first, rest.flat());
    }
    throw new QueryError(
      "INVALID_IDENTIFIER",
      `sql(...) takes a template, an identifier, or an object or array for a helper; got ${
        first === null ? "null" : typeof first
      }`,
    );
  } as SqlTag;
  const unsafe = (
    text: string,
    args?: readonly unknown[] | UnsafeOptions,
    options?: UnsafeOptions,
  ) => {
    const query = unsafeQuery(runner, text, args, options);
    query.origin = originOf(typeof text === "string" ? text : "", unsafe, debug);
    return query;
  };
  const file = (
    path: string | URL,
    args?: readonly unknown[] | UnsafeOptions,
    options?: UnsafeOptions,
  ) => {
    const query = fileQuery(runner, path, args, options);
    query.origin = originOf(String(path), file, debug);
    return query;
  };
  const plain = bulkCopy({ sink, config: runner.config });
  const bulk = telemetry === null ? plain : tracedBulkCopy(telemetry, plain);
  return Object.defineProperties(sql, {
    unsafe: { value: unsafe },
    file: { value: file },
    json: { value: json },
    array: { value: array },
    typed: { value: typed },
    types: { value: typed },
    CLOSE: { value: CLOSE },
    PostgresError: { value: PostgresError },
    copyFrom: { value: bulk.copyFrom },
    copyTo: { value: bulk.copyTo },
  });
}

/** Runs fixed SQL (transaction control) on a tag. */
function run(tag: SqlTag, text: string): Promise<unknown> {
  const strings = Object.assign([text], { raw: [text] }) as unknown as TemplateStringsArray;
  return tag(strings);
}

/** Transaction modes are spliced into `begin`, so only their keywords are allowed. */
const TRANSACTION_MODES = /^[a-z ,]*$/i;

/** Transactions whose callback called `sql.prepare(name)`: they end with PREPARE TRANSACTION. */
const preparedAs = new WeakMap<TransactionSql, string>();

/** How a transaction ends when it succeeds: COMMIT, or PREPARE TRANSACTION for two-phase commit. */
function commitText(tx: TransactionSql): string {
  const name = preparedAs.get(tx);
  return name === undefined ? "commit" : `prepare transaction '${name.replaceAll("'", "''")}'`;
}

/**
 * Per transaction: `own` while the driver sends its own ROLLBACK, COMMIT or PREPARE TRANSACTION
 * (see runOwn); `userEnded` once the user sent a statement that can end the block (see
 * transactionFailure).
 */
const endings = new WeakMap<TransactionSql, { own: boolean; userEnded: boolean }>();

/** Sends one of the driver's own statements that end a transaction. */
function runOwn(tx: TransactionSql, text: string): Promise<unknown> {
  const query = run(tx, text) as Query<readonly unknown[]>;
  const ending = endings.get(tx)!;
  ending.own = true;
  try {
    return query.execute(); // sent now, synchronously: the sink sees the flag
  } finally {
    ending.own = false;
  }
}

/** The COPY requests each transaction sent, so its end can fail one left open (see endCopies). */
const copiesOf = new WeakMap<TransactionSql, Set<CopyInRequest>>();

/**
 * Fails every COPY FROM STDIN the transaction left open (CopyFail): its
 * ROLLBACK or COMMIT queues behind the COPY barrier and would otherwise wait
 * for data that never comes. Returns whether one was still open.
 */
function endCopies(tx: TransactionSql, reason: string): boolean {
  let open = false;
  for (const req of copiesOf.get(tx) ?? []) {
    if (req.open) {
      open = true;
      req.stop(reason);
    }
  }
  copiesOf.get(tx)?.clear();
  return open;
}

/** Why a transaction that ended with a COPY FROM STDIN still open is rejected (postgres.js's code). */
function copyInProgress(): QueryError {
  return new QueryError(
    "COPY_IN_PROGRESS",
    "the transaction ended while a COPY FROM STDIN was still open: the COPY was aborted and " +
      "the transaction rolled back (end the COPY's stream, and await it, before returning)",
  );
}

/** Failures already said in a transaction's terms (so a rethrow is not wrapped twice). */
const transactionErrors = new WeakSet<ConnectionError>();

/**
 * What a transaction's failure says when its connection died: whether it can have committed.
 * `ending` is true when the failure is the COMMIT's (or PREPARE TRANSACTION's) own. Until that
 * statement is written nothing can commit (the server rolls back a transaction whose session
 * ends), so the outcome is `"not-sent"`, the retry rule's "nothing took effect"; once it was
 * written and its answer never came, `"unknown"`. The user's own COMMIT, ROLLBACK, END, ...
 * sent inside the transaction (see mayEndTransaction) makes it `"unknown"` too: what ran before
 * it may have committed, and what ran after it ran outside any transaction. Any other failure
 * (the server refused a statement, the callback threw its own error) is returned unchanged.
 */
function transactionFailure(
  e: unknown,
  conn: Connection,
  tx: TransactionSql,
  ending: boolean,
): unknown {
  if (!(e instanceof ConnectionError) || transactionErrors.has(e)) return e;
  if (!ending && conn.closedReason === null) return e; // the connection lives: rolled back
  const written = ending && e.outcome !== "not-sent";
  const userEnded = endings.get(tx)?.userEnded === true;
  const statement = preparedAs.has(tx) ? "PREPARE TRANSACTION" : "COMMIT";
  const err = new ConnectionError(
    e.code,
    written
      ? `the transaction's connection closed after ${statement} was sent, before its answer: ` +
        `it may have committed (${e.message})`
      : userEnded
      ? "the transaction's connection closed after a statement ending the transaction " +
        "(COMMIT, ROLLBACK, END, ...) was sent inside it: some of its work may have committed " +
        `(${e.message})`
      : `the transaction's connection closed before ${statement} was sent: nothing was ` +
        `committed (${e.message})`,
    { address: e.address, port: e.port, cause: e },
  );
  err.outcome = written || userEnded ? "unknown" : "not-sent";
  transactionErrors.add(err);
  return err;
}

function transactionSql(
  prepare: boolean,
  config: QueryConfig,
  conn: Connection,
  telemetry: Telemetry | null,
  parent: OtelContext | undefined,
): TransactionSql {
  let savepoints = 0;
  const copies = new Set<CopyInRequest>();
  const ending = { own: false, userEnded: false };
  const sink: Sink = {
    send(req) {
      if (req instanceof CopyInRequest) {
        for (const c of copies) if (c.finished) copies.delete(c); // keep only the live ones
        copies.add(req);
      } else if (
        !ending.own && !ending.userEnded && req instanceof QueryRequest &&
        mayEndTransaction(req.spec.text)
      ) {
        ending.userEnded = true;
      }
      conn.send(req);
    },
    cancel: (req, reason) => conn.cancel(req, reason),
  };
  const tx = makeTag(
    makeRunner(sink, prepare, config, telemetry, false, true, parent),
    sink,
    telemetry,
  ) as TransactionSql;
  copiesOf.set(tx, copies);
  endings.set(tx, ending);
  Object.defineProperty(tx, "prepare", {
    value: (name: string): Promise<void> => {
      if (typeof name !== "string" || name === "" || name.includes("\0")) {
        return Promise.reject(
          new QueryError("INVALID_ARGUMENTS", "sql.prepare needs a transaction name (a string)"),
        );
      }
      preparedAs.set(tx, name);
      return Promise.resolve();
    },
  });
  Object.defineProperty(tx, "savepoint", {
    value: async <T>(
      nameOrFn: string | ((sql: TransactionSql) => T | Promise<T>),
      maybeFn?: (sql: TransactionSql) => T | Promise<T>,
    ): Promise<UnwrapQueries<T>> => {
      const fn = typeof nameOrFn === "function" ? nameOrFn : maybeFn!;
      const name = typeof nameOrFn === "string" ? nameOrFn : `s${++savepoints}`;
      const quoted = quoteIdentifier(name);
      await run(tx, `savepoint ${quoted}`);
      try {
        const result = await settleAll(await fn(tx));
        await run(tx, `release savepoint ${quoted}`);
        return result as UnwrapQueries<T>;
      } catch (e) {
        await run(tx, `rollback to savepoint ${quoted}`);
        throw e;
      }
    },
  });
  return tx;
}

/** A callback may return an array of queries to pipeline; they are awaited together. */
async function settleAll<T>(value: T): Promise<T> {
  return Array.isArray(value) && value.some((v) => v instanceof Query)
    ? (await Promise.all(value)) as T
    : value;
}

/** Clients created in this process: numbers each one's pool name in telemetry. */
let clients = 0;

/** Creates a client; see {@link Options} and the README for the URL and environment rules. */
export function createSql(url?: string, options?: Options): Sql {
  const resolved = resolveOptions(url, options);
  const telemetry = Telemetry.of(resolved.telemetry, {
    database: resolved.database,
    host: resolved.host,
    port: resolved.port,
  });
  const decode = clientDecode({ ...resolved, debug: resolved.debugStacks });
  const config = queryConfig(decode);
  const pool = new Pool({
    endpoint: {
      host: resolved.host,
      port: resolved.port,
      sslmode: resolved.sslmode,
      ca: resolved.ca,
      sslnegotiation: resolved.sslnegotiation,
      socket: resolved.socket,
    },
    failure: resolved.failure,
    hosts: {
      hosts: resolved.hosts,
      targetSessionAttrs: resolved.targetSessionAttrs,
      loadBalanceHosts: resolved.loadBalanceHosts,
    },
    params: resolved.params,
    password: resolved.password,
    protocolMinor: resolved.protocolMinor,
    protocolMinMinor: resolved.protocolMinMinor,
    auth: resolved.auth,
    connectTimeout: resolved.connectTimeout,
    maxPipeline: resolved.maxPipeline,
    maxPipelineBytes: resolved.maxPipelineBytes,
    maxStatements: resolved.maxStatements,
    decode,
    onnotice: resolved.onnotice,
    onparameter: resolved.onparameter,
    onnotify: resolved.onnotify,
    queryTimeout: resolved.queryTimeout,
  }, {
    maxQueue: resolved.maxQueue,
    max: resolved.max,
    idleTimeout: resolved.idleTimeout,
    maxLifetime: resolved.maxLifetime,
    debug: resolved.debug,
    telemetry,
    // Until one succeeds, each new connection sends the catalog query ahead of its first
    // queries (connections opening together each send their own: none waits for another's).
    arrayTypes: resolved.fetchTypes
      ? () => typesKnown ? null : arrayTypesRequest(decode, (ok) => typesKnown ||= ok)
      : undefined,
  });
  let typesKnown = false;
  telemetry?.observePool(
    `${resolved.user}@${resolved.host}:${resolved.port}/${resolved.database}#${++clients}`,
    () => pool.counts(),
    () => pool.connections,
  );
  const prepare = resolved.prepare;
  const sql = makeTag(
    makeRunner(pool, prepare, config, telemetry, resolved.max > 1),
    pool,
    telemetry,
  ) as Sql;
  const listener = new Listener(pool.options);
  const subscriber = new Subscriber({
    connection: pool.options,
    decode,
    publications: resolved.publications,
    publicationNames: resolved.publicationNames,
  });

  async function open(
    modes: string,
    trace: TransactionTrace | null,
  ): Promise<{ conn: Connection; tx: TransactionSql }> {
    if (!TRANSACTION_MODES.test(modes)) {
      throw new QueryError("INVALID_TRANSACTION_MODE", `invalid transaction modes: ${modes}`);
    }
    const conn = await pool.reserve();
    const tx = transactionSql(prepare, config, conn, telemetry, trace?.context);
    try {
      await run(tx, modes ? `begin ${modes}` : "begin");
    } catch (e) {
      pool.release(conn);
      throw transactionFailure(e, conn, tx, false);
    }
    return { conn, tx };
  }

  function begin<T>(
    a?: string | ((sql: TransactionSql) => T | Promise<T>),
    b?: (sql: TransactionSql) => T | Promise<T>,
  ): Promise<unknown> {
    const fn = typeof a === "function" ? a : b;
    if (telemetry === null) return transaction(a, fn, null);
    // One span for the transaction, the parent of its queries; with a callback it is active
    // while the callback runs, so what else the callback does is under it too.
    const trace = telemetry.transaction();
    if (fn === undefined) {
      const opened = transaction(a, fn, trace); // the span ends at commit() or rollback()
      opened.catch((e) => trace.end(e));
      return opened;
    }
    return trace.settle(trace.run(() => transaction(a, fn, trace)));
  }

  async function transaction<T>(
    a: string | ((sql: TransactionSql) => T | Promise<T>) | undefined,
    fn: ((sql: TransactionSql) => T | Promise<T>) | undefined,
    trace: TransactionTrace | null,
  ): Promise<unknown> {
    const { conn, tx } = await open(typeof a === "string" ? a : "", trace);
    if (fn === undefined) return handle(conn, tx, trace);
    try {
      let result;
      // If the connection goes away while the callback runs (even between its queries), the
      // transaction is over: reject at once rather than when the callback next uses it.
      let lost!: (e: ConnectionError) => void;
      const closed = new Promise<never>((_, reject) => {
        lost = (e) => reject(transactionFailure(e, conn, tx, false));
      });
      const stopWatching = conn.onClose(lost);
      try {
        result = await Promise.race([(async () => await settleAll(await fn(tx)))(), closed]);
      } catch (e) {
        endCopies(tx, "the transaction failed while this COPY was open");
        await runOwn(tx, "rollback").catch(() => {}); // the connection may be gone; the cause matters
        throw transactionFailure(e, conn, tx, false);
      } finally {
        stopWatching();
      }
      if (endCopies(tx, "the transaction ended while this COPY was open")) {
        await runOwn(tx, "rollback").catch(() => {});
        throw copyInProgress();
      }
      // A failing commit (deferred constraint) rejects with its error; no rollback follows it.
      await runOwn(tx, commitText(tx)).catch((e) => {
        throw transactionFailure(e, conn, tx, true);
      });
      return result;
    } finally {
      pool.release(conn);
    }
  }

  function handle(
    conn: Connection,
    tx: TransactionSql,
    trace: TransactionTrace | null,
  ): Transaction {
    let done = false;
    const finish = async (text: string) => {
      if (done) return;
      done = true;
      let failure: unknown = null;
      try {
        if (
          endCopies(tx, "the transaction ended while this COPY was open") && text !== "rollback"
        ) {
          await runOwn(tx, "rollback").catch(() => {});
          throw copyInProgress();
        }
        await runOwn(tx, text).catch((e) => {
          throw transactionFailure(e, conn, tx, text !== "rollback");
        });
      } catch (e) {
        failure = e;
        throw e;
      } finally {
        trace?.end(failure);
        pool.release(conn);
      }
    };
    return Object.defineProperties(tx, {
      commit: { value: () => finish(commitText(tx)) },
      rollback: { value: () => finish("rollback") },
      [Symbol.asyncDispose]: { value: () => finish("rollback").catch(() => {}) },
    }) as Transaction;
  }

  async function reserve(): Promise<ReservedSql> {
    const conn = await pool.reserve();
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      pool.release(conn);
    };
    return Object.defineProperties(
      makeTag(
        makeRunner(conn, prepare, config, telemetry),
        conn,
        telemetry,
      ),
      {
        release: { value: release },
        [Symbol.asyncDispose]: { value: () => Promise.resolve(release()) },
      },
    ) as ReservedSql;
  }

  async function end(o?: { timeout?: number }): Promise<void> {
    telemetry?.close();
    await Promise.all([pool.end(o?.timeout), listener.end(), subscriber.end()]);
  }

  const first = resolved.hosts[0];
  const publicOptions: PublicOptions = {
    host: resolved.hosts.map((h) => h.host),
    port: resolved.hosts.map((h) => h.port),
    ...(first.host.startsWith("/") ? { path: socketPath(first.host, first.port) } : {}),
    database: resolved.database,
    user: resolved.user,
    ssl: resolved.sslmode,
    sslmode: resolved.sslmode,
    sslnegotiation: resolved.sslnegotiation,
    max: resolved.max,
    idle_timeout: resolved.idleTimeout / 1000,
    // An object given is shown as it is, not read: postgres.js reads it at each attempt.
    connect_timeout: typeof resolved.connectTimeout === "number"
      ? resolved.connectTimeout / 1000
      : options?.connect_timeout as { valueOf(): number },
    max_lifetime: resolved.maxLifetime / 1000,
    max_pipeline: resolved.maxPipeline,
    prepare,
    fetch_types: resolved.fetchTypes,
    debug: resolved.debugStacks,
    target_session_attrs: resolved.targetSessionAttrs,
    publications: resolved.publications,
    connection: { ...resolved.params },
    parameters: pool.parameters,
  };
  Object.defineProperties(publicOptions, {
    pass: { value: resolved.pass, enumerable: false },
    password: { value: resolved.pass, enumerable: false },
  });
  Object.defineProperties(sql, {
    options: { value: publicOptions, enumerable: true },
    parameters: { value: pool.parameters, enumerable: true },
    begin: { value: begin },
    reserve: { value: reserve },
    listen: { value: listener.listen.bind(listener) },
    subscribe: { value: subscriber.subscribe.bind(subscriber) },
    notify: {
      value: async (channel: string, payload: string) => {
        await sql`select pg_notify(${channel}, ${payload})`;
      },
    },
    largeObject: {
      value: (oid?: number, mode?: number) =>
        openLargeObject(() => begin() as Promise<Transaction>, oid, mode),
    },
    end: { value: end },
    close: { value: end },
    [Symbol.asyncDispose]: {
      value: () => {
        telemetry?.close();
        return Promise.all([pool.end(), listener.end(), subscriber.end()]);
      },
    },
  });
  return sql;
}
