/**
 * Drizzle's migrator over pgpipe: `@pgpipe/pgpipe/drizzle/migrator`, the counterpart of
 * `drizzle-orm/postgres-js/migrator` (which runs over pgpipe as well: it loads no postgres.js), so
 * a program written for Drizzle's postgres-js driver changes each `drizzle-orm/postgres-js` in its
 * imports to `jsr:@pgpipe/pgpipe/drizzle`.
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 * import { drizzle } from "jsr:@pgpipe/pgpipe/drizzle";
 * import { migrate } from "jsr:@pgpipe/pgpipe/drizzle/migrator";
 *
 * const db = drizzle(postgres());
 * await migrate(db, { migrationsFolder: "./drizzle" }); // needs --allow-read for the folder
 * await db.$client.end();
 * ```
 *
 * @module
 */
export { migrate } from "./src/drizzle/migrator.ts";
export type { MigrationConfig } from "./src/drizzle/drizzle_types.ts";
