/**
 * pgpipe: a Deno-first PostgreSQL driver with automatic pipelining and the postgres.js API.
 *
 * Start with the default export, {@linkcode postgres}: `postgres(url?, options?)` creates a
 * client, `sql`, whose tagged template runs queries. Every value is sent as a parameter. A query
 * issued while others are in flight is written at once, without waiting for their answers, and
 * the answers are matched back in order; each query outside a transaction is its own
 * Sync-terminated segment, so a failing query never affects its neighbours. A client holds up
 * to `max` connections (default 10), and each of them pipelines.
 *
 * - Create: `postgres(url?, options?)`. With no URL it reads libpq's `PG*` variables, not
 *   `DATABASE_URL`: pass that yourself, `postgres(Deno.env.get("DATABASE_URL"))`.
 * - Query: `` sql`select ... ${value}` `` ({@linkcode Sql}, {@linkcode Query},
 *   {@linkcode Result}); transactions with `sql.begin`, one connection with `sql.reserve()`.
 * - End: `await sql.end()`, or create the client with `await using`; an open client keeps the
 *   process alive.
 * - Errors: {@linkcode PostgresError} (the server's), {@linkcode ConnectionError} (with an
 *   `outcome`), {@linkcode QueryError} (bad input, such as a {@linkcode ParameterError}).
 *
 * Other entries: `@pgpipe/pgpipe/pglite` (PostgreSQL in the process), `@pgpipe/pgpipe/drizzle`
 * and `@pgpipe/pgpipe/kysely` (the ORMs), `@pgpipe/pgpipe/interfaces` (the shapes of sockets,
 * telemetry providers and embedded servers, for those who implement them). The README and the
 * guides in `docs/` cover each topic with examples that the test suite runs.
 *
 * @example Connect, query, end
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 *
 * await using sql = postgres(Deno.env.get("DATABASE_URL")); // ended when the scope exits
 * const users = await sql`select id, name from users where id = ${1}`;
 * console.log(users[0]?.name, users.count);
 *
 * // Issued together: each is written at once, without waiting for the others' answers.
 * const [[a], [b]] = await Promise.all([sql`select 1 as x`, sql`select 2 as x`]);
 * console.log(a.x + b.x); // 3
 * ```
 *
 * @module
 */
import { createSql, type Sql } from "./src/client/client.ts";
import type { Options } from "./src/config/options.ts";
import { BigIntType, type PostgresType } from "./src/query/custom_types.ts";
import { PostgresError } from "./src/errors.ts";
// The same types under other names, for the `postgres` namespace (whose members take
// postgres.js's names, so they cannot refer to these by theirs).
import type {
  ConnectionError as AnyConnectionError,
  Notice as ServerNotice,
  PostgresError as ServerError,
  QueryError as AnyQueryError,
} from "./src/errors.ts";
import type { Sql as SqlClient } from "./src/client/client.ts";
import type { Options as ClientOptions } from "./src/config/options.ts";
import type { PostgresType as CustomType } from "./src/query/custom_types.ts";
import type { Helper as QueryHelper } from "./src/query/helpers.ts";
import type { Query as PendingQueryOf } from "./src/query/query.ts";
import type {
  Result as ResultOf,
  ResultColumn as ResultColumnOf,
  Row as ResultRow,
} from "./src/query/result.ts";
import type { Parameter as TypedParameter } from "./src/types/encode.ts";
import type { ReservedSql as ReservedSqlTag } from "./src/client/reserve.ts";
import type { TransactionSql as TransactionSqlTag } from "./src/client/transaction.ts";
import {
  camel,
  type CaseBoth,
  type CaseFrom,
  type CaseTo,
  fromCamel,
  fromKebab,
  fromPascal,
  kebab,
  pascal,
  toCamel,
  toKebab,
  toPascal,
} from "./src/query/transform.ts";

export type {
  DebugHook,
  Options,
  SocketFunction,
  SocketOptions,
  SslObjectOption,
  SslOption,
} from "./src/config/options.ts";
export type { PasswordSource } from "./src/connection/startup.ts";
export type { TelemetryOptions } from "./src/telemetry/otel.ts";
export type { ListenHandle, NotifyHandler } from "./src/listen/listen.ts";
export type {
  SubscribeHandler,
  SubscriptionConnection,
  SubscriptionHandle,
} from "./src/replication/subscribe.ts";
export type {
  ColumnInfo,
  RelationInfo,
  ReplicationEvent,
  TruncateEvent,
} from "./src/replication/rows.ts";
export type {
  LargeObject,
  LargeObjectData,
  LargeObjectReadableOptions,
  LargeObjectWritableOptions,
} from "./src/large_object/large_object.ts";
export type { Sql } from "./src/client/client.ts";
export type { SqlPiece, SqlTag, TemplateValues } from "./src/client/sql.ts";
export type { Transaction, TransactionSql, UnwrapQueries } from "./src/client/transaction.ts";
export type { ReservedSql } from "./src/client/reserve.ts";
export type { PublicOptions } from "./src/client/public_options.ts";
export {
  CLOSE,
  type ColumnValue,
  type DescribedStatement,
  Query,
  type QueryMode,
} from "./src/query/query.ts";
export { Identifier } from "./src/query/identifier.ts";
export { Helper } from "./src/query/helpers.ts";
export { Parameter, ParameterError, type ParameterErrorCode } from "./src/types/encode.ts";
export type { UnsafeOptions } from "./src/query/raw.ts";
export type { PostgresType, Typed } from "./src/query/custom_types.ts";
export type { ParserTable, SerializerTable } from "./src/query/type_handlers.ts";
export type { Transform, TransformColumn } from "./src/query/transform.ts";
export {
  Result,
  type ResultColumn,
  type ResultState,
  type ResultStatement,
  type Row,
} from "./src/query/result.ts";
export {
  ConnectionError,
  type ConnectionErrorCode,
  type ConnectionErrorOptions,
  CopyRowError,
  type Notice,
  PostgresError,
  QueryError,
  type SocketErrorCode,
} from "./src/errors.ts";
export type { SslMode, SslNegotiation, TlsPath } from "./src/connection/transport/transport.ts";
export type { CopyFromOptions, CopyFromSource } from "./src/copy/copy_from.ts";
export type { CopyToOptions } from "./src/copy/copy_to.ts";
export type { CopyType } from "./src/copy/copy_columns.ts";
export type { Notification } from "./src/protocol/backend.ts";

/**
 * The `postgres` function: creates clients, and carries postgres.js's statics
 * (case transforms for the `transform` option, `BigInt`, `PostgresError`).
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 * const sql = postgres("postgres://app@localhost/app", { transform: postgres.camel });
 * const [{ userId }] = await sql`select 1 as user_id`;
 * await sql.end();
 * ```
 */
export interface Postgres {
  /**
   * Creates a client. With no URL, libpq's `PG*` environment variables and
   * defaults apply; options override the URL, which overrides the environment.
   *
   * @example
   * ```ts
   * import postgres from "jsr:@pgpipe/pgpipe";
   * const sql = postgres("postgres://user:pass@localhost/db?sslmode=require");
   * const rows = await sql`select now() as now`;
   * await sql.end();
   * ```
   */
  (url?: string, options?: Options): Sql;
  /**
   * Creates a client from options alone.
   *
   * @example
   * ```ts
   * import postgres from "jsr:@pgpipe/pgpipe";
   * const sql = postgres({ host: "localhost", database: "app", user: "app" });
   * ```
   */
  (options?: Options): Sql;
  /** Two-way camelCase transform: result columns and json keys to camelCase, helper names to snake_case. */
  readonly camel: CaseBoth;
  /** Two-way PascalCase transform. */
  readonly pascal: CaseBoth;
  /** Two-way kebab-case transform. */
  readonly kebab: CaseBoth;
  /** snake_case to camelCase (a function, and a result-only transform). */
  readonly toCamel: CaseFrom;
  /** camelCase to snake_case (a function, and a helper-names-only transform). */
  readonly fromCamel: CaseTo;
  /** snake_case to PascalCase (a function, and a result-only transform). */
  readonly toPascal: CaseFrom;
  /** PascalCase to snake_case (a function, and a helper-names-only transform). */
  readonly fromPascal: CaseTo;
  /** snake_case to kebab-case (a function, and a result-only transform). */
  readonly toKebab: CaseFrom;
  /** kebab-case to snake_case (a function, and a helper-names-only transform). */
  readonly fromKebab: CaseTo;
  /** The custom type for `types: { bigint: postgres.BigInt }`: int8 as `bigint`. */
  readonly BigInt: PostgresType<bigint>;
  /** The class of errors reported by the server. */
  readonly PostgresError: typeof PostgresError;
}

function create(urlOrOptions?: string | Options, options?: Options): Sql {
  if (typeof urlOrOptions === "string") return createSql(urlOrOptions, options);
  return createSql(undefined, urlOrOptions ?? options);
}

/**
 * Creates a client: `postgres(url?, options?)` or `postgres(options)`. Nothing connects until
 * the first query. Each setting comes from `options`, else the URL, else libpq's service file,
 * else libpq's `PG*` environment variables (`PGHOST`, `PGUSER`, `PGPASSWORD`, ...; read with
 * `--allow-env`), else the default. `DATABASE_URL` is not read: pass it as the URL.
 *
 * The client is the `sql` tag ({@linkcode Sql}). End it with `await sql.end()` (it waits for
 * what is in flight), or create it with `await using`: an open client's connections keep the
 * process alive. The function also carries postgres.js's statics: the case transforms
 * (`postgres.camel`, `postgres.toCamel`, ...), `postgres.BigInt` and `postgres.PostgresError`
 * (see {@linkcode Postgres}); and its namespace carries postgres.js's type names
 * (`postgres.Sql`, `postgres.RowList<T>`, ...).
 *
 * @example A script
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 *
 * await using sql = postgres(Deno.env.get("DATABASE_URL"), { max: 4 });
 * const [{ now }] = await sql`select now() as now`;
 * console.log(now instanceof Date); // true
 * ```
 *
 * @example A server: one client for the process
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 *
 * const sql = postgres(Deno.env.get("DATABASE_URL"));
 * Deno.serve(async (req) => {
 *   const id = new URL(req.url).searchParams.get("id") ?? "";
 *   if (!/^\d{1,9}$/.test(id)) return new Response("bad id", { status: 400 });
 *   const [user] = await sql`select id, name from users where id = ${Number(id)}`;
 *   return user ? Response.json(user) : new Response("not found", { status: 404 });
 * });
 * ```
 */
const postgres: Postgres = Object.assign(create, {
  camel,
  pascal,
  kebab,
  toCamel,
  fromCamel,
  toPascal,
  fromPascal,
  toKebab,
  fromKebab,
  BigInt: BigIntType,
  PostgresError,
});

/**
 * pgpipe's types under the names postgres.js gives them in its `postgres` namespace, so code
 * written against postgres.js's types (`sql: postgres.Sql`, `postgres.RowList<User[]>`, ...)
 * type-checks with only its import changed. Type parameters postgres.js has and pgpipe does not
 * need (a client's custom types) are accepted and ignored.
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 *
 * interface User {
 *   id: number;
 *   name: string;
 * }
 * async function names(sql: postgres.Sql): Promise<string[]> {
 *   const users: postgres.RowList<User[]> = await sql<User[]>`select id, name from users`;
 *   return users.map((u) => u.name);
 * }
 * ```
 */
declare namespace postgres {
  /** A client: {@link Sql}. */
  export type Sql<_Types extends Record<string, unknown> = Record<string, unknown>> = SqlClient;
  /** The `sql` of a transaction: {@link TransactionSql}. */
  export type TransactionSql<_Types extends Record<string, unknown> = Record<string, unknown>> =
    TransactionSqlTag;
  /** A reserved connection: {@link ReservedSql}. */
  export type ReservedSql<_Types extends Record<string, unknown> = Record<string, unknown>> =
    ReservedSqlTag;
  /** The options of `postgres()`: {@link Options}. */
  export type Options<_Types extends Record<string, unknown> = Record<string, unknown>> =
    ClientOptions;
  /** A row as an object keyed by column name: {@link Row}. */
  export type Row = ResultRow;
  /** A row, or none (`const [user]: postgres.MaybeRow[] = await sql...`). */
  export type MaybeRow = ResultRow | undefined;
  /** The awaited result of a query of rows `T` (an array type): a {@link Result}. */
  export type RowList<T extends readonly unknown[]> = ResultOf<T[number]>;
  /** A query not yet awaited, of rows `T` (an array type): a {@link Query}. */
  export type PendingQuery<T extends readonly unknown[]> = PendingQueryOf<T>;
  /** A query used as a fragment of another. */
  export type Fragment = PendingQueryOf<any>;
  /** A result column: {@link ResultColumn}. */
  export type Column<_Name extends string = string> = ResultColumnOf;
  /** A custom type for the `types` option: {@link PostgresType}. */
  export type PostgresType<T = any> = CustomType<T>;
  /** An error the server reported: {@link PostgresError}. */
  export type PostgresError = ServerError;
  /** Any error a query may reject with. */
  export type Error = ServerError | AnyConnectionError | AnyQueryError;
  /** A notice from the server: {@link Notice}. */
  export type Notice = ServerNotice;
  /** A typed parameter (`sql.typed`, `sql.json`, `sql.array`): {@link Parameter}. */
  export type Parameter<_T = unknown> = TypedParameter;
  /** A helper (`sql(object)`, `sql(list)`): {@link Helper}. */
  export type Helper<_T = unknown, _U = unknown> = QueryHelper;
  /** A value a query takes as a parameter (pgpipe takes any value and checks it when sent). */
  export type SerializableParameter<_T = never> = unknown;
  /** A value a query takes as a parameter or as JSON. */
  export type ParameterOrJSON<_T = never> = unknown;
}

export default postgres;
export { postgres };
