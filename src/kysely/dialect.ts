// The package's one npm import (this subpath only), pinned where it is used rather than in an
// import map, so the package's configuration names no npm package.
// deno-lint-ignore-file no-import-prefix
/**
 * The Kysely dialect: PostgreSQL's adapter, introspector and query compiler from Kysely itself,
 * with pgpipe's driver (`driver.ts`).
 */
import {
  type DatabaseIntrospector,
  type DialectAdapter,
  type Driver,
  type Kysely,
  PostgresAdapter,
  PostgresIntrospector,
  PostgresQueryCompiler,
  type QueryCompiler,
} from "npm:kysely@^0.28.19";
import { PgpipeDriver, type PgpipeDriverConfig } from "./driver.ts";

/**
 * The dialect's configuration: kysely-postgres-js's shape, so a program written for it changes
 * only its import.
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 * import { PgpipeDialect } from "jsr:@pgpipe/pgpipe/kysely";
 * const dialect = new PgpipeDialect({ postgres: postgres({ max: 10 }) });
 * ```
 */
export type PgpipeDialectConfig = PgpipeDriverConfig;

/**
 * Kysely over pgpipe: queries outside a transaction pipeline on the client's pool, while
 * `db.transaction()`, `db.startTransaction()` and `db.connection()` keep their statements in
 * one session of their own. `db.destroy()` ends the client.
 *
 * @example
 * ```ts
 * import { Kysely } from "npm:kysely@^0.28.19";
 * import postgres from "jsr:@pgpipe/pgpipe";
 * import { PgpipeDialect } from "jsr:@pgpipe/pgpipe/kysely";
 *
 * interface Database {
 *   person: { id: number; name: string };
 * }
 * const db = new Kysely<Database>({ dialect: new PgpipeDialect({ postgres: postgres() }) });
 * // Issued together: pipelined on the pool's connections.
 * const [a, b] = await Promise.all([
 *   db.selectFrom("person").selectAll().where("id", "=", 1).execute(),
 *   db.selectFrom("person").selectAll().where("id", "=", 2).execute(),
 * ]);
 * await db.destroy();
 * ```
 */
// No `implements Dialect`: the documentation would name a Kysely type; `new Kysely({ dialect })`
// checks the shape wherever it is used (the tests do).
export class PgpipeDialect {
  readonly #config: PgpipeDialectConfig;

  /** A dialect over the client (or the function returning it) in `config.postgres`. */
  constructor(config: PgpipeDialectConfig) {
    this.#config = Object.freeze({ ...config });
  }

  /**
   * Kysely's PostgreSQL adapter (returning, transactional DDL, the migration lock). Kysely calls
   * it; its types are Kysely's.
   *
   * @ignore
   */
  createAdapter(): DialectAdapter {
    return new PostgresAdapter();
  }

  /**
   * pgpipe's driver. Kysely calls it; its types are Kysely's.
   *
   * @ignore
   */
  createDriver(): Driver {
    return new PgpipeDriver(this.#config);
  }

  /**
   * Kysely's PostgreSQL introspector (`db.introspection`). Kysely calls it; its types are Kysely's.
   *
   * @ignore
   */
  createIntrospector(db: Kysely<any>): DatabaseIntrospector {
    return new PostgresIntrospector(db);
  }

  /**
   * Kysely's PostgreSQL query compiler. Kysely calls it; its types are Kysely's.
   *
   * @ignore
   */
  createQueryCompiler(): QueryCompiler {
    return new PostgresQueryCompiler();
  }
}
