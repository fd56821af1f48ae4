/**
 * pgpipe: a Deno-first PostgreSQL driver with automatic pipelining and the
 * postgres.js API.
 *
 * A query issued while others are in flight is written at once, without
 * waiting for their answers; the answers are matched back in order. Each query
 * is its own Sync-terminated segment, so a failing query never affects its
 * neighbours. A client holds up to `max` connections (default 10), and each of
 * them pipelines.
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 *
 * const sql = postgres("postgres://app:secret@localhost:5432/app");
 * // Issued together: each is written at once, without waiting for the others' answers.
 * const [a, b, c] = await Promise.all([
 *   sql`select ${1}::int as x`,
 *   sql`select ${2}::int as x`,
 *   sql`select ${3}::int as x`,
 * ]);
 * await sql.end();
 * ```
 *
 * @module
 */
import { createSql, type Sql } from "./src/client/client.ts";
import type { Options } from "./src/config/options.ts";
import { BigIntType, type PostgresType } from "./src/query/custom_types.ts";
import { PostgresError } from "./src/errors.ts";
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
export type {
  ObservableCallback,
  OtelContext,
  OtelContextManager,
  OtelMeterProvider,
  OtelSpan,
  OtelTracerProvider,
  TelemetryOptions,
} from "./src/telemetry/otel.ts";
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
export type { SqlTag } from "./src/client/sql.ts";
export type { Transaction, TransactionSql, UnwrapQueries } from "./src/client/transaction.ts";
export type { ReservedSql } from "./src/client/reserve.ts";
export type { PublicOptions } from "./src/client/public_options.ts";
export { CLOSE, type DescribedStatement, Query, type QueryMode } from "./src/query/query.ts";
export { Identifier } from "./src/query/identifier.ts";
export { Helper } from "./src/query/helpers.ts";
export { Parameter } from "./src/types/encode.ts";
export type { UnsafeOptions } from "./src/query/raw.ts";
export type { PostgresType, Typed } from "./src/query/custom_types.ts";
export type { ParserTable, SerializerTable } from "./src/query/type_handlers.ts";
export type {
  CaseBoth,
  CaseFrom,
  CaseTo,
  Transform,
  TransformColumn,
} from "./src/query/transform.ts";
export { Result, type ResultColumn, type ResultStatement, type Row } from "./src/query/result.ts";
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
export type {
  DenoLikeConn,
  NodeLikeSocket,
  SslMode,
  SslNegotiation,
  TlsPath,
  UserSocket,
} from "./src/connection/transport/transport.ts";
export type { BulkCopy } from "./src/copy/bulk_copy.ts";
export type { CopyFromOptions, CopyFromSource } from "./src/copy/copy_from.ts";
export type { CopyToOptions } from "./src/copy/copy_to.ts";
export type { CopyType } from "./src/copy/copy_columns.ts";
export type { FieldMap, Notification } from "./src/protocol/backend.ts";

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
 * Creates a client; see {@linkcode Postgres} for the forms and the statics.
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 * const sql = postgres("postgres://user:pass@localhost/db");
 * const rows = await sql`select now() as now`;
 * await sql.end();
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

export default postgres;
export { postgres };
