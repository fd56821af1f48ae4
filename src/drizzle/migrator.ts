// The Drizzle entries' npm import (those subpaths only), pinned where it is used rather than in
// an import map, so the package's configuration names no npm package.
// deno-lint-ignore-file no-import-prefix
/**
 * Drizzle's postgres-js migrator over a pgpipe client. Drizzle's `drizzle-orm/postgres-js/migrator`
 * loads no postgres.js (it reads the migration files and runs them through the database's
 * session), so this is that function under pgpipe's entry, documented here.
 */
import { migrate as drizzleMigrate } from "npm:drizzle-orm@^0.45/postgres-js/migrator";
import type { MigrationConfig, PostgresJsDatabase } from "./drizzle_types.ts";

/**
 * Applies the migrations of `config.migrationsFolder` the database has not recorded yet, in one
 * transaction, each chunk between `--> statement-breakpoint` markers sent on the simple protocol,
 * and records each in `drizzle.__drizzle_migrations` (or `migrationsSchema`.`migrationsTable`):
 * Drizzle's postgres-js migrator, run over the database's pgpipe client. Reading the folder needs
 * `--allow-read`.
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 * import { drizzle } from "jsr:@pgpipe/pgpipe/drizzle";
 * import { migrate } from "jsr:@pgpipe/pgpipe/drizzle/migrator";
 *
 * const db = drizzle(postgres());
 * await migrate(db, { migrationsFolder: "./drizzle", migrationsSchema: "app" });
 * await db.$client.end();
 * ```
 */
export function migrate<TSchema extends Record<string, unknown>>(
  db: PostgresJsDatabase<TSchema>,
  config: MigrationConfig,
): Promise<void> {
  return drizzleMigrate(db, config);
}
