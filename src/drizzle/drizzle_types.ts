// The Drizzle entries' npm import (those subpaths only), pinned where it is used rather than in
// an import map, so the package's configuration names no npm package.
// deno-lint-ignore-file no-import-prefix
/**
 * Drizzle's own types, under the names `drizzle-orm` gives them, for the Drizzle entries'
 * signatures. Each public one stands for Drizzle's through a private alias tagged `@internal`:
 * `deno doc --lint` counts a type of another package as private when it comes from npm (Deno
 * exempts JSR and remote packages, not npm's cache; denoland/deno#27364).
 */
import type {
  DrizzleConfig as OrmDrizzleConfig,
  TablesRelationalConfig as OrmTablesRelationalConfig,
} from "npm:drizzle-orm@^0.45";
import type { MigrationConfig as OrmMigrationConfig } from "npm:drizzle-orm@^0.45/migrator";
import type { PostgresJsDatabase as OrmPostgresJsDatabase } from "npm:drizzle-orm@^0.45/postgres-js/driver";
import type {
  PostgresJsQueryResultHKT as OrmPostgresJsQueryResultHKT,
  PostgresJsTransaction as OrmPostgresJsTransaction,
} from "npm:drizzle-orm@^0.45/postgres-js/session";

/**
 * Drizzle's `DrizzleConfig`.
 *
 * @internal
 */
type DrizzleConfigOf<TSchema extends Record<string, unknown>> = OrmDrizzleConfig<TSchema>;
/**
 * Drizzle's `PostgresJsDatabase`.
 *
 * @internal
 */
type PostgresJsDatabaseOf<TSchema extends Record<string, unknown>> = OrmPostgresJsDatabase<
  TSchema
>;
/**
 * Drizzle's `PostgresJsTransaction`.
 *
 * @internal
 */
type PostgresJsTransactionOf<
  TFullSchema extends Record<string, unknown>,
  TSchema extends OrmTablesRelationalConfig,
> = OrmPostgresJsTransaction<TFullSchema, TSchema>;
/**
 * Drizzle's `TablesRelationalConfig`.
 *
 * @internal
 */
type TablesRelationalConfigOf = OrmTablesRelationalConfig;

/**
 * Drizzle's configuration (`DrizzleConfig` of `drizzle-orm`): `schema` (for `db.query`),
 * `casing`, `logger` and `cache`.
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 * import { drizzle, type DrizzleConfig } from "jsr:@pgpipe/pgpipe/drizzle";
 * const config: DrizzleConfig = { casing: "snake_case", logger: true };
 * const db = drizzle(postgres(), config);
 * ```
 */
export type DrizzleConfig<TSchema extends Record<string, unknown> = Record<string, never>> =
  DrizzleConfigOf<TSchema>;

/**
 * Drizzle's database for postgres-js (`PostgresJsDatabase` of `drizzle-orm/postgres-js`), which
 * `drizzle()` returns over pgpipe too: annotate with it as with Drizzle's driver.
 *
 * @example
 * ```ts
 * import { pgTable, serial, text } from "npm:drizzle-orm@^0.45/pg-core";
 * import { type PostgresJsDatabase } from "jsr:@pgpipe/pgpipe/drizzle";
 *
 * export const users = pgTable("users", { id: serial("id").primaryKey(), name: text("name") });
 * export function names(db: PostgresJsDatabase<{ users: typeof users }>) {
 *   return db.select({ name: users.name }).from(users);
 * }
 * ```
 */
export type PostgresJsDatabase<TSchema extends Record<string, unknown> = Record<string, never>> =
  PostgresJsDatabaseOf<TSchema>;

/**
 * Drizzle's transaction for postgres-js (`PostgresJsTransaction` of
 * `drizzle-orm/postgres-js`): what `db.transaction(async (tx) => ...)` hands its callback.
 *
 * @example
 * ```ts
 * import type { ExtractTablesWithRelations } from "npm:drizzle-orm@^0.45";
 * import { pgTable, serial, text } from "npm:drizzle-orm@^0.45/pg-core";
 * import type { PostgresJsTransaction } from "jsr:@pgpipe/pgpipe/drizzle";
 *
 * const users = pgTable("users", { id: serial("id").primaryKey(), name: text("name") });
 * const schema = { users };
 * type Tx = PostgresJsTransaction<typeof schema, ExtractTablesWithRelations<typeof schema>>;
 * export const rename = (tx: Tx, name: string) => tx.update(users).set({ name });
 * ```
 */
export type PostgresJsTransaction<
  TFullSchema extends Record<string, unknown>,
  TSchema extends TablesRelationalConfigOf,
> = PostgresJsTransactionOf<TFullSchema, TSchema>;

/**
 * The result type of `db.execute()` for postgres-js (`PostgresJsQueryResultHKT` of
 * `drizzle-orm/postgres-js`), for annotations such as Drizzle's `PgTransaction<...>`.
 *
 * @example
 * ```ts
 * import type { PgQueryResultKind } from "npm:drizzle-orm@^0.45/pg-core";
 * import type { PostgresJsQueryResultHKT } from "jsr:@pgpipe/pgpipe/drizzle";
 * type Rows = PgQueryResultKind<PostgresJsQueryResultHKT, { id: number }>;
 * ```
 */
export type PostgresJsQueryResultHKT = OrmPostgresJsQueryResultHKT;

/**
 * Where Drizzle's migrator finds the migrations and records them (`MigrationConfig` of
 * `drizzle-orm/migrator`): `migrationsFolder`, and optionally `migrationsTable` and
 * `migrationsSchema`.
 *
 * @example
 * ```ts
 * import type { MigrationConfig } from "jsr:@pgpipe/pgpipe/drizzle/migrator";
 * const config: MigrationConfig = { migrationsFolder: "./drizzle", migrationsSchema: "app" };
 * ```
 */
export type MigrationConfig = OrmMigrationConfig;
