/**
 * Kysely over pgpipe: `@pgpipe/pgpipe/kysely`. The main entry (`@pgpipe/pgpipe`) imports
 * nothing from npm; this subpath alone imports `npm:kysely`.
 *
 * Kysely 0.28 also runs over pgpipe through `kysely-postgres-js` (pgpipe has postgres.js's API),
 * but that dialect reserves a connection for every query, so nothing pipelines. This dialect sends
 * each query outside a transaction to the client's pool, where concurrent queries pipeline, and
 * gives `db.transaction()`, `db.startTransaction()` and `db.connection()` a connection of their
 * own. Its configuration has kysely-postgres-js's shape, and `PostgresJSDialect` is exported as
 * another name for it, so such a program changes only its imports.
 *
 * @example
 * ```ts
 * import { Kysely, sql } from "npm:kysely@^0.28.19";
 * import postgres from "jsr:@pgpipe/pgpipe";
 * import { PgpipeDialect } from "jsr:@pgpipe/pgpipe/kysely";
 *
 * interface Database {
 *   person: { id: number; name: string };
 * }
 * const db = new Kysely<Database>({ dialect: new PgpipeDialect({ postgres: postgres() }) });
 *
 * // Outside a transaction: each query goes to the pool, and concurrent ones pipeline.
 * const people = await Promise.all(
 *   [1, 2, 3].map((id) => db.selectFrom("person").selectAll().where("id", "=", id).execute()),
 * );
 *
 * // A transaction: one connection of its own from BEGIN to COMMIT.
 * await db.transaction().setIsolationLevel("serializable").execute(async (trx) => {
 *   await trx.insertInto("person").values({ id: 4, name: "Ada" }).execute();
 * });
 *
 * // One session for the callback: a setting made here is read back here.
 * await db.connection().execute(async (conn) => {
 *   await sql`set application_name = 'report'`.execute(conn);
 *   await sql`select current_setting('application_name') as name`.execute(conn);
 * });
 * await db.destroy(); // ends the pgpipe client
 * ```
 *
 * @module
 */
export { PgpipeDialect, type PgpipeDialectConfig } from "./src/kysely/dialect.ts";
export type { PgpipeClientSource } from "./src/kysely/driver.ts";
/** The same class as {@link PgpipeDialect}, under kysely-postgres-js's name. */
export { PgpipeDialect as PostgresJSDialect } from "./src/kysely/dialect.ts";
