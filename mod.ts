/**
 * pgpipe: a Deno-first PostgreSQL driver with automatic pipelining and the
 * postgres.js API.
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 *
 * const sql = postgres("postgres://app:secret@localhost:5432/app");
 * // Issued together, these three share one connection and one round trip.
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
import { createSql, type Sql } from "./src/client/sql.ts";
import type { Options } from "./src/client/options.ts";

export type { Options, SslOption } from "./src/client/options.ts";
export type { PasswordSource } from "./src/connection/startup.ts";
export type { ListenHandle, NotifyHandler } from "./src/client/listen.ts";
export type {
  PublicOptions,
  ReservedSql,
  Sql,
  SqlTag,
  Transaction,
  TransactionSql,
  UnwrapQueries,
} from "./src/client/sql.ts";
export { Query, type QueryMode } from "./src/query/query.ts";
export { Result, type ResultColumn, type ResultStatement, type Row } from "./src/query/result.ts";
export {
  ConnectionError,
  type ConnectionErrorCode,
  PostgresError,
  QueryError,
} from "./src/errors.ts";
export type { SslMode } from "./src/connection/transport.ts";
export type { FieldMap, Notification } from "./src/protocol/backend.ts";

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
function postgres(url?: string, options?: Options): Sql;
/**
 * Creates a client from options alone.
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 * const sql = postgres({ host: "localhost", database: "app", user: "app" });
 * ```
 */
function postgres(options?: Options): Sql;
function postgres(urlOrOptions?: string | Options, options?: Options): Sql {
  if (typeof urlOrOptions === "string") return createSql(urlOrOptions, options);
  return createSql(undefined, urlOrOptions ?? options);
}

export default postgres;
export { postgres };
