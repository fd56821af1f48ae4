/**
 * Drizzle ORM over pgpipe: `@pgpipe/pgpipe/drizzle`, the counterpart of `drizzle-orm/postgres-js`.
 * The main entry (`@pgpipe/pgpipe`) imports nothing from npm; this subpath and its migrator alone
 * import `npm:drizzle-orm`, and nothing here loads postgres.js.
 *
 * A program written for `drizzle-orm/postgres-js` and postgres.js changes only its imports
 * (`postgres` becomes `jsr:@pgpipe/pgpipe`, `drizzle-orm/postgres-js` becomes
 * `jsr:@pgpipe/pgpipe/drizzle`, and `drizzle-orm/postgres-js/migrator` becomes
 * `jsr:@pgpipe/pgpipe/drizzle/migrator`): `drizzle()` takes the same forms, sets up the client as
 * Drizzle's driver does, and returns the same database type, so it type-checks without a cast and
 * runs without postgres.js installed.
 *
 * @example
 * ```ts
 * import { eq } from "npm:drizzle-orm@^0.45";
 * import { integer, pgTable, serial, text } from "npm:drizzle-orm@^0.45/pg-core";
 * import postgres from "jsr:@pgpipe/pgpipe";
 * import { drizzle } from "jsr:@pgpipe/pgpipe/drizzle";
 * import { migrate } from "jsr:@pgpipe/pgpipe/drizzle/migrator";
 *
 * const users = pgTable("users", {
 *   id: serial("id").primaryKey(),
 *   name: text("name").notNull(),
 *   age: integer("age"),
 * });
 * const db = drizzle(postgres(Deno.env.get("DATABASE_URL")), { schema: { users } });
 * await migrate(db, { migrationsFolder: "./drizzle" });
 *
 * // Issued together: pipelined on one connection.
 * const [ada, grace] = await Promise.all([
 *   db.select().from(users).where(eq(users.id, 1)),
 *   db.query.users.findFirst({ where: eq(users.name, "Grace") }),
 * ]);
 * await db.$client.end();
 * ```
 *
 * @module
 */
export { type Drizzle, drizzle } from "./src/drizzle/driver.ts";
export type {
  DrizzleConfig,
  PostgresJsDatabase,
  PostgresJsQueryResultHKT,
  PostgresJsTransaction,
} from "./src/drizzle/drizzle_types.ts";
