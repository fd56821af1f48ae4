// The package's one npm import (this subpath only), pinned where it is used rather than in an
// import map, so the package's configuration names no npm package.
// deno-lint-ignore-file no-import-prefix
/**
 * Kysely's `Driver` over a pgpipe client. Kysely acquires a "connection" for every query, every
 * transaction and every `db.connection()` callback, and cannot say which it is: so what it gets
 * here is a lease ({@link PgpipeConnection}) that holds nothing until it must.
 *
 * - A lease's first statement, when it needs no session of its own (`needsSession`), goes to the
 *   shared pool like any `sql` query: concurrent Kysely queries pipeline on pgpipe's connections.
 * - `beginTransaction`, a statement that needs a session, or a lease's second statement (only
 *   `db.connection()` runs several) reserve one connection, and every later statement of the
 *   lease runs there until Kysely releases it. After a first statement on the pool, that is the
 *   connection it ran on whenever the pool can hand it out (`reserveWhereRan`): what the
 *   detector cannot see it leave in the session (an insert's `serial` value for `lastval()`, a
 *   setting made by a function) is still there for the next statement.
 *
 * Transactions are Kysely's own statements (`begin`, `start transaction isolation level ...`,
 * `commit`, `rollback`, savepoints) run through the lease, as Kysely's pg driver runs them, so
 * Kysely's query log shows them; a COMMIT the server answers with ROLLBACK (the block had failed)
 * throws Kysely's `AbortedTransactionError`, as the pg driver does.
 */
import {
  AbortedTransactionError,
  CompiledQuery,
  createQueryId,
  type DatabaseConnection,
  type Driver,
  type QueryCompiler,
  type QueryResult,
  sql as kyselySql,
  type TransactionSettings,
} from "npm:kysely@^0.28.19";
import type { Query } from "../query/query.ts";
import type { Result } from "../query/result.ts";
import { reserveWhereRan, type Sql } from "../client/client.ts";
import type { ReservedSql } from "../client/reserve.ts";
import type { SqlTag } from "../client/sql.ts";
import { needsSession } from "./session_statement.ts";

/**
 * The pgpipe client a dialect runs on: the client itself, or a function returning it (called
 * once, when Kysely first needs the driver).
 */
export type PgpipeClientSource = Sql | (() => Sql | Promise<Sql>);

/** What the driver needs from the dialect's configuration. */
export interface PgpipeDriverConfig {
  /** The client, or a function returning it. */
  readonly postgres: PgpipeClientSource;
  /** Called with each lease Kysely acquires, before Kysely uses it. */
  readonly onReserveConnection?: (connection: DatabaseConnection) => Promise<void>;
}

/** Commands whose count Kysely reports as `numAffectedRows` (as its pg driver does). */
const AFFECTING = new Set(["INSERT", "UPDATE", "DELETE", "MERGE"]);

/** Where a lease is: nothing run yet, its statements on the pool, or a connection of its own. */
type LeaseState = "fresh" | "pooled" | "held" | "released";

/**
 * One Kysely "connection": a lease on the client that holds a reserved connection only from the
 * moment its statements need one session (see the module comment).
 */
export class PgpipeConnection implements DatabaseConnection {
  readonly #sql: Sql;
  readonly #prepare: boolean;
  #state: LeaseState = "fresh";
  #reserved: ReservedSql | null = null;
  #reserving: Promise<ReservedSql> | null = null;
  /** The lease's first statement, when it ran on the pool: its connection is the one to hold. */
  #first: Query<Record<string, unknown>[]> | null = null;
  /** The command tag of the last statement (commitTransaction reads COMMIT or ROLLBACK). */
  lastCommand: string | null = null;

  constructor(sql: Sql) {
    this.#sql = sql;
    this.#prepare = sql.options.prepare;
  }

  /** Whether this lease holds a connection of its own (for tests and the driver). */
  get held(): boolean {
    return this.#state === "held";
  }

  /** The connection held for this lease, reserved now if it holds none yet. */
  async hold(): Promise<SqlTag> {
    if (this.#reserved !== null) return this.#reserved;
    if (this.#state === "released") throw released();
    this.#reserving ??= this.#reserve();
    let reserved: ReservedSql;
    try {
      reserved = await this.#reserving;
    } catch (e) {
      this.#reserving = null; // a later statement may try again (connect_timeout, pool ended)
      throw e;
    }
    if (this.#released()) { // released while it waited: give it straight back
      reserved.release();
      throw released();
    }
    this.#reserved = reserved;
    this.#state = "held";
    return reserved;
  }

  /**
   * Reserves the connection the first statement ran on when it ran on the pool (once it has
   * completed: a statement sent meanwhile waits for it, as on one connection), else any.
   */
  async #reserve(): Promise<ReservedSql> {
    const first = this.#first;
    this.#first = null; // its rows are the caller's: the lease keeps no hold on them
    if (first === null) return this.#sql.reserve();
    const ran = await Promise.resolve(first).then(lastResult, () => null);
    return ran === null ? this.#sql.reserve() : reserveWhereRan(this.#sql, ran);
  }

  /** Read through a method: the state may change while `hold` awaits. */
  #released(): boolean {
    return this.#state === "released";
  }

  /** Where the next statement runs: the held connection, or the pool for a lone first one. */
  #target(text: string): SqlTag | Promise<SqlTag> {
    if (this.#reserved !== null) return this.#reserved;
    if (this.#state === "released") throw released();
    if (this.#state === "fresh" && this.#reserving === null && !needsSession(text)) {
      this.#state = "pooled";
      return this.#sql;
    }
    return this.hold();
  }

  #query(target: SqlTag, compiled: CompiledQuery): Query<Record<string, unknown>[]> {
    const params = compiled.parameters;
    // No parameters: the simple protocol, as Kysely's pg driver and kysely-postgres-js send it
    // (a migration's text may hold several statements). Otherwise prepared as the client's
    // `prepare` option says: Kysely sends the same text for the same query shape.
    return params.length === 0
      ? target.unsafe(compiled.sql)
      : target.unsafe(compiled.sql, [...params], { prepare: this.#prepare });
  }

  async executeQuery<R>(compiled: CompiledQuery): Promise<QueryResult<R>> {
    try {
      const target = this.#target(compiled.sql);
      const query = this.#query(target instanceof Promise ? await target : target, compiled);
      if (target === this.#sql) this.#first = query; // only a first statement goes to the pool
      return this.#toResult<R>(await query);
    } catch (e) {
      throw withCallerStack(e);
    }
  }

  #toResult<R>(result: Result<unknown> | Result<unknown>[]): QueryResult<R> {
    // Several statements in one simple-protocol text: one Result each; Kysely's pg driver then
    // reports neither rows nor a count.
    if (isResultList(result)) {
      this.lastCommand = result.at(-1)?.command ?? null;
      return { numAffectedRows: undefined, rows: [] };
    }
    const command = result.command;
    this.lastCommand = command;
    // The key is always there, undefined but for a count Kysely reports (as both other drivers).
    return {
      numAffectedRows: AFFECTING.has(command) ? BigInt(result.count) : undefined,
      rows: Array.from(result) as R[],
    };
  }

  async *streamQuery<R>(
    compiled: CompiledQuery,
    chunkSize?: number,
  ): AsyncIterableIterator<QueryResult<R>> {
    const size = chunkSize ?? 100;
    if (!Number.isInteger(size) || size <= 0) {
      throw new RangeError(`chunkSize must be a positive integer, got ${chunkSize}`);
    }
    const target = this.#target(compiled.sql);
    const query = this.#query(target instanceof Promise ? await target : target, compiled);
    try {
      // A cursor always uses the extended protocol; on the pool it keeps its connection to
      // itself until it ends (pgpipe sends nothing else there meanwhile).
      for await (const rows of query.cursor(size)) yield { rows: rows as R[] };
    } catch (e) {
      throw withCallerStack(e);
    }
  }

  /** Returns the held connection, if any; the lease runs nothing after this. */
  release(): void {
    const reserved = this.#reserved;
    this.#state = "released";
    this.#reserved = null;
    // pgpipe rolls back a connection released inside a transaction block before reuse.
    reserved?.release();
  }
}

/** The error a lease used after Kysely released it rejects with. */
function released(): Error {
  return new Error("this Kysely connection was already released");
}

function isResultList(r: Result<unknown> | Result<unknown>[]): r is Result<unknown>[] {
  return r.length > 0 && Array.isArray(r[0]) && "command" in (r[0] as object);
}

/** A statement's result (the last one, for several statements in one text), or null: none. */
function lastResult(r: Result<unknown> | Result<unknown>[]): Result<unknown> | null {
  return isResultList(r) ? r.at(-1) ?? null : r;
}

/**
 * The error with the caller's frames appended (as Kysely's pg driver does): pgpipe's errors are
 * raised in the read loop, whose stack says nothing of the code that ran the query.
 */
function withCallerStack(e: unknown): unknown {
  if (e instanceof Error && typeof e.stack === "string") {
    const here = new Error().stack?.split("\n").slice(1).join("\n");
    if (here) e.stack += "\n" + here;
  }
  return e;
}

/** Kysely's `Driver` over a pgpipe client; see the module comment for what a lease holds. */
export class PgpipeDriver implements Driver {
  readonly #config: PgpipeDriverConfig;
  #sql: Sql | null = null;

  constructor(config: PgpipeDriverConfig) {
    this.#config = config;
  }

  async init(): Promise<void> {
    const source = this.#config.postgres;
    const sql = isClient(source) ? source : typeof source === "function" ? await source() : source;
    if (!isClient(sql)) {
      throw new TypeError(
        "PgpipeDialect: `postgres` must be a pgpipe client (postgres(...)) or a function " +
          `returning one; got ${sql === null ? "null" : typeof sql}`,
      );
    }
    this.#sql = sql;
  }

  async acquireConnection(): Promise<DatabaseConnection> {
    if (this.#sql === null) throw new Error("the Kysely driver was destroyed");
    const lease = new PgpipeConnection(this.#sql);
    if (this.#config.onReserveConnection !== undefined) {
      try {
        await this.#config.onReserveConnection(lease);
      } catch (e) {
        lease.release();
        throw e;
      }
    }
    return lease;
  }

  async beginTransaction(
    connection: DatabaseConnection,
    settings: TransactionSettings,
  ): Promise<void> {
    await lease(connection).hold(); // the whole transaction on one connection, from BEGIN on
    let text = "begin";
    if (settings.isolationLevel !== undefined || settings.accessMode !== undefined) {
      text = "start transaction";
      if (settings.isolationLevel) text += ` isolation level ${settings.isolationLevel}`;
      if (settings.accessMode) text += ` ${settings.accessMode}`;
    }
    await connection.executeQuery(CompiledQuery.raw(text));
  }

  async commitTransaction(connection: DatabaseConnection): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw("commit"));
    // The server completes COMMIT with ROLLBACK when an earlier error aborted the block.
    if (lease(connection).lastCommand === "ROLLBACK") throw new AbortedTransactionError();
  }

  async rollbackTransaction(connection: DatabaseConnection): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw("rollback"));
  }

  async savepoint(
    connection: DatabaseConnection,
    name: string,
    compileQuery: QueryCompiler["compileQuery"],
  ): Promise<void> {
    await connection.executeQuery(compileQuery(savepointNode("savepoint", name), createQueryId()));
  }

  async rollbackToSavepoint(
    connection: DatabaseConnection,
    name: string,
    compileQuery: QueryCompiler["compileQuery"],
  ): Promise<void> {
    await connection.executeQuery(
      compileQuery(savepointNode("rollback to", name), createQueryId()),
    );
  }

  async releaseSavepoint(
    connection: DatabaseConnection,
    name: string,
    compileQuery: QueryCompiler["compileQuery"],
  ): Promise<void> {
    await connection.executeQuery(
      compileQuery(savepointNode("release", name), createQueryId()),
    );
  }

  releaseConnection(connection: DatabaseConnection): Promise<void> {
    lease(connection).release();
    return Promise.resolve();
  }

  async destroy(): Promise<void> {
    const sql = this.#sql;
    this.#sql = null;
    await sql?.end();
  }
}

/** Whether `value` is a client (the `sql` function with `reserve`), not a factory of one. */
function isClient(value: unknown): value is Sql {
  return typeof value === "function" && "reserve" in value && "options" in value;
}

/** The savepoint command with the name as an escaped identifier (the pg driver's text). */
function savepointNode(command: string, name: string) {
  return kyselySql`${kyselySql.raw(command)} ${kyselySql.id(name)}`.toOperationNode();
}

/** The lease behind a Kysely connection this driver handed out. */
function lease(connection: DatabaseConnection): PgpipeConnection {
  if (connection instanceof PgpipeConnection) return connection;
  throw new TypeError("not a connection of pgpipe's Kysely driver");
}
