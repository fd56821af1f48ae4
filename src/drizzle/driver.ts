// The Drizzle entries' npm import (those subpaths only), pinned where it is used rather than in
// an import map, so the package's configuration names no npm package.
// deno-lint-ignore-file no-import-prefix
/**
 * Drizzle's postgres-js driver rebuilt from Drizzle's public pieces over a pgpipe client:
 * Drizzle's `PgDialect`, `PgDatabase` and its postgres-js session classes (which call only the
 * client's postgres.js API: `unsafe`, `.values()`, `begin`, `savepoint`). Drizzle's own
 * `drizzle-orm/postgres-js` entry imports postgres.js when it loads (for `drizzle(url)`); nothing
 * here does, so a program needs no postgres.js at all.
 */
import {
  createTableRelationsHelpers,
  DefaultLogger,
  entityKind,
  extractTablesRelationalConfig,
  type Logger,
  type RelationalSchemaConfig,
  type TablesRelationalConfig,
} from "npm:drizzle-orm@^0.45";
import { PgDatabase, PgDialect } from "npm:drizzle-orm@^0.45/pg-core";
import type { PostgresJsSession } from "npm:drizzle-orm@^0.45/postgres-js/session";
import { createSql, type Sql } from "../client/client.ts";
import { SendingSession } from "./session.ts";
import type { Options } from "../config/options.ts";
import type {
  DrizzleConfig,
  PostgresJsDatabase,
  PostgresJsQueryResultHKT,
} from "./drizzle_types.ts";

/**
 * `drizzle()` over pgpipe, with `drizzle.mock()`: the call forms and the database of
 * `drizzle-orm/postgres-js`, with pgpipe's client and options where that driver names
 * postgres.js's.
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 * import { drizzle } from "jsr:@pgpipe/pgpipe/drizzle";
 * const a = drizzle(postgres());
 * const b = drizzle("postgres://app@localhost/app", { casing: "snake_case" });
 * const c = drizzle({ connection: { url: "postgres://app@localhost/app", max: 20 } });
 * const d = drizzle({ client: postgres(), logger: true });
 * ```
 */
export interface Drizzle {
  /**
   * Drizzle's database over a pgpipe client: the one given (`client`), or one made from a URL
   * or options (`connection`), with Drizzle's configuration.
   *
   * @example
   * ```ts
   * import { pgTable, serial, text } from "npm:drizzle-orm@^0.45/pg-core";
   * import postgres from "jsr:@pgpipe/pgpipe";
   * import { drizzle } from "jsr:@pgpipe/pgpipe/drizzle";
   *
   * const users = pgTable("users", { id: serial("id").primaryKey(), name: text("name") });
   * const db = drizzle(postgres(), { schema: { users } });
   * const rows = await db.select().from(users);
   * await db.$client.end();
   * ```
   */
  <
    TSchema extends Record<string, unknown> = Record<string, never>,
    TClient extends Sql = Sql,
  >(
    ...params:
      | [TClient | string]
      | [TClient | string, DrizzleConfig<TSchema>]
      | [
        & DrizzleConfig<TSchema>
        & ({ connection: string | ({ url?: string } & Options) } | { client: TClient }),
      ]
  ): PostgresJsDatabase<TSchema> & { $client: TClient };
  /**
   * A database with no client, for building queries without running them (`toSQL()`): what
   * `drizzle.mock()` of `drizzle-orm/postgres-js` gives.
   *
   * @example
   * ```ts
   * import { pgTable, serial } from "npm:drizzle-orm@^0.45/pg-core";
   * import { drizzle } from "jsr:@pgpipe/pgpipe/drizzle";
   * const users = pgTable("users", { id: serial("id").primaryKey() });
   * const { sql } = drizzle.mock().select().from(users).toSQL();
   * ```
   */
  mock<TSchema extends Record<string, unknown> = Record<string, never>>(
    config?: DrizzleConfig<TSchema>,
  ): PostgresJsDatabase<TSchema> & { $client: "$client is not available on drizzle.mock()" };
}

/**
 * Drizzle's database class for postgres-js, rebuilt: Drizzle's `PostgresJsDatabase` lives in the
 * module that imports postgres.js. It carries that class's entity kind, so Drizzle's
 * `is(db, PostgresJsDatabase)` holds as it does for a database from Drizzle's driver.
 */
class PostgresJsDatabaseOverPgpipe<TSchema extends Record<string, unknown>>
  extends PgDatabase<PostgresJsQueryResultHKT, TSchema> {
  static override readonly [entityKind]: string = "PostgresJsDatabase";
}

/** What the setup touches of a client: its `options` tables (a mock client has only those). */
interface DrizzleClient {
  options: { parsers: Record<string, unknown>; serializers: Record<string, unknown> };
}

/**
 * Types Drizzle reads from the server's text itself (its columns parse dates, times and
 * timestamps in every mode, and numeric arrays): their values reach it as the server sent them.
 * timestamptz, date, time, timestamp, and the arrays date[], timestamptz[], timestamp[], numeric[].
 */
const DRIZZLE_PARSES = ["1184", "1082", "1083", "1114", "1182", "1185", "1115", "1231"];
/** json and jsonb: Drizzle sends their JSON text already, to be passed on as it is. */
const DRIZZLE_SERIALIZES_JSON = ["114", "3802"];

/** Hands a value on unchanged. */
const asIs = (value: unknown): unknown => value;

/** Drizzle's driver setup on `client`, then the database over it. */
function construct<TSchema extends Record<string, unknown>>(
  client: DrizzleClient,
  config: DrizzleConfig<TSchema> = {},
): PostgresJsDatabase<TSchema> & { $client: unknown } {
  const { parsers, serializers } = client.options;
  for (const oid of DRIZZLE_PARSES) {
    parsers[oid] = asIs;
    serializers[oid] = asIs;
  }
  for (const oid of DRIZZLE_SERIALIZES_JSON) serializers[oid] = asIs;

  const dialect = new PgDialect({ casing: config.casing });
  const logger: Logger | undefined = config.logger === true
    ? new DefaultLogger()
    : config.logger === false
    ? undefined
    : config.logger;
  let schema: RelationalSchemaConfig<TablesRelationalConfig> | undefined;
  if (config.schema) {
    const tables = extractTablesRelationalConfig(config.schema, createTableRelationsHelpers);
    schema = {
      fullSchema: config.schema,
      schema: tables.tables,
      tableNamesMap: tables.tableNamesMap,
    };
  }
  // The session's parameter is postgres.js's client type; pgpipe's client has its API.
  type SessionClient = ConstructorParameters<typeof PostgresJsSession>[0];
  const session = new SendingSession(client as unknown as SessionClient, dialect, schema, {
    logger,
    cache: config.cache,
  });
  const db = new PostgresJsDatabaseOverPgpipe<TSchema>(
    dialect,
    session,
    schema as RelationalSchemaConfig<any> | undefined,
  ) as unknown as PostgresJsDatabase<TSchema> & { $client: unknown };
  db.$client = client;
  // As Drizzle's driver: `$cache` is the configured cache (undefined without one), whose
  // `invalidate` is its `onMutate`.
  const cache = config.cache as (DrizzleConfig["cache"] & { invalidate?: unknown }) | undefined;
  (db as { $cache: unknown }).$cache = cache;
  if (cache) cache.invalidate = cache.onMutate;
  return db;
}

/** A client made from a URL and options, or from options alone (which may hold the URL). */
function clientFrom(connection: string | ({ url?: string } & Options) | undefined): Sql {
  if (typeof connection === "string" || connection === undefined) return createSql(connection);
  const { url, ...options } = connection;
  return createSql(url, options);
}

/** The forms `drizzle()` takes (see {@link Drizzle}), without their types' precision. */
type Params =
  | [Sql | string, DrizzleConfig<any>?]
  | [DrizzleConfig<any> & { client?: Sql; connection?: string | ({ url?: string } & Options) }];

function drizzleOverPgpipe(...params: Params): PostgresJsDatabase<any> & { $client: unknown } {
  const [first, second] = params;
  if (typeof first === "string") return construct(createSql(first), second);
  // A client is a function (the `sql` tag); Drizzle's configuration is a plain object.
  if (typeof first === "function") return construct(first, second);
  const { client, connection, ...config } = first;
  return construct(client ?? clientFrom(connection), config);
}

/** A database over a client of nothing: Drizzle's `mock`. */
function mock<TSchema extends Record<string, unknown> = Record<string, never>>(
  config?: DrizzleConfig<TSchema>,
): PostgresJsDatabase<TSchema> & { $client: "$client is not available on drizzle.mock()" } {
  return construct({ options: { parsers: {}, serializers: {} } }, config) as
    & PostgresJsDatabase<TSchema>
    & { $client: "$client is not available on drizzle.mock()" };
}

/**
 * Drizzle ORM over pgpipe: what `drizzle` of `drizzle-orm/postgres-js` does, with no postgres.js.
 * A URL or options make a pgpipe client; Drizzle's date, time and timestamp parsing is set up on
 * the client as Drizzle's driver sets it up on a postgres.js client.
 *
 * @example
 * ```ts
 * import { eq } from "npm:drizzle-orm@^0.45";
 * import { pgTable, serial, text } from "npm:drizzle-orm@^0.45/pg-core";
 * import postgres from "jsr:@pgpipe/pgpipe";
 * import { drizzle } from "jsr:@pgpipe/pgpipe/drizzle";
 *
 * const users = pgTable("users", { id: serial("id").primaryKey(), name: text("name") });
 * const db = drizzle(postgres(), { schema: { users } });
 * const [ada] = await db.select().from(users).where(eq(users.id, 1));
 * ```
 */
export const drizzle: Drizzle = Object.assign(drizzleOverPgpipe, { mock }) as Drizzle;
