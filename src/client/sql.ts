/**
 * The `sql` function: a tagged template that builds lazy queries, plus the
 * client methods hanging off it. The same tag is built for the pool, for a
 * transaction and for a reserved connection; only where requests go differs.
 */
import type { Connection } from "../connection/connection.ts";
import { QueryRequest, type ResultTarget } from "../connection/query_request.ts";
import type { PipelineRequest } from "../connection/request.ts";
import { QueryError } from "../errors.ts";
import { compile } from "../query/compile.ts";
import { Query, type QueryRunner } from "../query/query.ts";
import { Result, type Row } from "../query/result.ts";
import { inferOid, serialize } from "../types/encode.ts";
import { type Options, resolveOptions } from "./options.ts";
import { Pool } from "./pool.ts";
import { quoteIdentifier } from "./exec.ts";
import { Listener, type ListenHandle, type NotifyHandler } from "./listen.ts";

/** The most parameters one statement can carry (a 16-bit count in Bind). */
const MAX_PARAMETERS = 65535;

/** Options shown back on `sql.options` (the password is never exposed). */
export interface PublicOptions {
  /** Host or socket directory. */
  host: string;
  /** Port. */
  port: number;
  /** Database. */
  database: string;
  /** User. */
  user: string;
  /** TLS mode. */
  sslmode: string;
  /** Most connections. */
  max: number;
  /** Whether named prepared statements are used. */
  prepare: boolean;
  /** Most requests in flight per connection. */
  max_pipeline: number;
}

/**
 * The tagged template shared by a client, a transaction and a reserved
 * connection: call it to build a query, await the query to run it.
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 * const sql = postgres();
 * const rows = await sql`select * from users where id = ${1}`;
 * ```
 */
export interface SqlTag {
  /** Builds a query from a template; values become parameters. */
  <T extends readonly unknown[] = Row[]>(
    strings: TemplateStringsArray,
    ...values: unknown[]
  ): Query<T>;
}

/**
 * What a transaction callback's result resolves to: an array of queries
 * (pipelined together) becomes the array of their results.
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
 * await reserved`set local work_mem = '64MB'`;
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
  /** The resolved options (without the password). */
  readonly options: PublicOptions;
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
  /** Waits for queries in flight, then closes every connection; with `timeout` (seconds), destroys them after it. */
  end(options?: { timeout?: number }): Promise<void>;
  /** Same as `end()`, for `await using sql = postgres()`. */
  [Symbol.asyncDispose](): Promise<void>;
}

/** Where a tag's requests go: the pool or one reserved connection. */
interface Sink {
  send(req: PipelineRequest): void;
}

function isTemplate(value: unknown): value is TemplateStringsArray {
  return Array.isArray(value) && Object.hasOwn(value, "raw");
}

/** Turns queries into requests for one sink. */
function makeRunner(sink: Sink, prepare: boolean): QueryRunner {
  return {
    run(query: Query<readonly unknown[]>): Promise<Result<unknown>> {
      return new Promise((resolve, reject) => {
        const { text, values } = compile(query);
        const n = values.length;
        if (n > MAX_PARAMETERS) {
          return reject(
            new QueryError(
              "MAX_PARAMETERS_EXCEEDED",
              `a query can have at most ${MAX_PARAMETERS} parameters; this one has ${n}`,
            ),
          );
        }
        if (text.includes("\0")) {
          return reject(new QueryError("NUL_IN_QUERY", "the query text contains a NUL byte"));
        }
        const params = new Array<string | null>(n);
        const types = new Array<number>(n);
        try {
          for (let i = 0; i < n; i++) {
            const value = values[i];
            params[i] = serialize(value);
            types[i] = inferOid(value);
          }
        } catch (e) {
          return reject(e);
        }
        const result = new Result<unknown>();
        sink.send(
          new QueryRequest(
            { text, params, types, prepare, mode: query.mode },
            result as unknown as ResultTarget,
            { resolve: resolve as (r: ResultTarget) => void, reject },
          ),
        );
      });
    },
  };
}

/** Builds the tagged template over a runner. */
function makeTag(runner: QueryRunner): SqlTag {
  return function sql(strings: TemplateStringsArray, ...values: unknown[]) {
    if (!isTemplate(strings)) {
      throw new QueryError(
        "NOT_TAGGED_TEMPLATE",
        "sql must be used as a tagged template: sql`select ...`, not sql(...)",
      );
    }
    return new Query(strings, values, runner);
  } as SqlTag;
}

/** Runs fixed SQL (transaction control) on a tag. */
function run(tag: SqlTag, text: string): Promise<unknown> {
  const strings = Object.assign([text], { raw: [text] }) as unknown as TemplateStringsArray;
  return tag(strings);
}

/** Transaction modes are spliced into `begin`, so only their keywords are allowed. */
const TRANSACTION_MODES = /^[a-z ,]*$/i;

function transactionSql(prepare: boolean, conn: Connection): TransactionSql {
  let savepoints = 0;
  const tx = makeTag(makeRunner(conn, prepare)) as TransactionSql;
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

/** Creates a client; see {@link Options} and the README for the URL and environment rules. */
export function createSql(url?: string, options?: Options): Sql {
  const resolved = resolveOptions(url, options);
  const pool = new Pool({
    endpoint: {
      host: resolved.host,
      port: resolved.port,
      sslmode: resolved.sslmode,
      ca: resolved.ca,
    },
    params: resolved.params,
    password: resolved.password,
    connectTimeout: resolved.connectTimeout,
    maxPipeline: resolved.maxPipeline,
    maxPipelineBytes: resolved.maxPipelineBytes,
    maxStatements: resolved.maxStatements,
    decode: { bigint: resolved.bigint },
    onnotice: resolved.onnotice,
    onparameter: resolved.onparameter,
    onnotify: resolved.onnotify,
  }, resolved.max);
  const prepare = resolved.prepare;
  const sql = makeTag(makeRunner(pool, prepare)) as Sql;
  const listener = new Listener(pool.options);

  async function open(modes: string): Promise<{ conn: Connection; tx: TransactionSql }> {
    if (!TRANSACTION_MODES.test(modes)) {
      throw new QueryError("INVALID_TRANSACTION_MODE", `invalid transaction modes: ${modes}`);
    }
    const conn = await pool.reserve();
    const tx = transactionSql(prepare, conn);
    try {
      await run(tx, modes ? `begin ${modes}` : "begin");
    } catch (e) {
      pool.release(conn);
      throw e;
    }
    return { conn, tx };
  }

  async function begin<T>(
    a?: string | ((sql: TransactionSql) => T | Promise<T>),
    b?: (sql: TransactionSql) => T | Promise<T>,
  ): Promise<unknown> {
    const fn = typeof a === "function" ? a : b;
    const { conn, tx } = await open(typeof a === "string" ? a : "");
    if (fn === undefined) return handle(conn, tx);
    try {
      let result;
      try {
        result = await settleAll(await fn(tx));
      } catch (e) {
        await run(tx, "rollback").catch(() => {}); // the connection may be gone; the cause matters
        throw e;
      }
      await run(tx, "commit"); // a failing commit (deferred constraint) rejects with its error
      return result;
    } finally {
      pool.release(conn);
    }
  }

  function handle(conn: Connection, tx: TransactionSql): Transaction {
    let done = false;
    const finish = async (text: string) => {
      if (done) return;
      done = true;
      try {
        await run(tx, text);
      } finally {
        pool.release(conn);
      }
    };
    return Object.defineProperties(tx, {
      commit: { value: () => finish("commit") },
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
    return Object.defineProperties(makeTag(makeRunner(conn, prepare)), {
      release: { value: release },
      [Symbol.asyncDispose]: { value: () => Promise.resolve(release()) },
    }) as ReservedSql;
  }

  const publicOptions: PublicOptions = {
    host: resolved.host,
    port: resolved.port,
    database: resolved.database,
    user: resolved.user,
    sslmode: resolved.sslmode,
    max: resolved.max,
    prepare,
    max_pipeline: resolved.maxPipeline,
  };
  Object.defineProperties(sql, {
    options: { value: publicOptions, enumerable: true },
    begin: { value: begin },
    reserve: { value: reserve },
    listen: { value: listener.listen.bind(listener) },
    notify: {
      value: async (channel: string, payload: string) => {
        await sql`select pg_notify(${channel}, ${payload})`;
      },
    },
    end: {
      value: async (o?: { timeout?: number }) => {
        await Promise.all([pool.end(o?.timeout), listener.end()]);
      },
    },
    [Symbol.asyncDispose]: { value: () => Promise.all([pool.end(), listener.end()]) },
  });
  return sql;
}
