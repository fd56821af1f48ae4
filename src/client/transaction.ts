/**
 * A transaction's `sql`: queries go to the transaction's connection, in
 * order, pipelined; savepoints; `prepare` for two-phase commit. An
 * OpenTransaction also knows how the transaction ends (COMMIT or PREPARE
 * TRANSACTION, the COPYs it must fail first) and what its failure says when
 * its connection dies. `sql.begin` (begin.ts) opens and ends it.
 */
import type { Connection } from "../connection/connection.ts";
import { QueryRequest } from "../connection/requests/query_request.ts";
import type { PipelineRequest } from "../connection/requests/request.ts";
import { quoteIdentifier } from "../connection/requests/driver_queries.ts";
import { CopyInRequest } from "../copy/copy_request.ts";
import { TransactionCopies } from "../copy/transaction_copies.ts";
import { ConnectionError, QueryError } from "../errors.ts";
import { Query } from "../query/query.ts";
import { mayEndTransaction } from "../query/transaction_end.ts";
import type { OtelContext } from "../telemetry/otel.ts";
import type { ClientSettings, Sink } from "./runner.ts";
import { makeTag, type SqlTag } from "./sql.ts";

/**
 * What a transaction callback's result resolves to: an array of queries
 * (pipelined together) becomes the array of their results.
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 * const sql = postgres();
 * const [a, b] = await sql.begin((tx) => [tx`select 1 as x`, tx`select 2 as y`]); // two Results
 * ```
 */
export type UnwrapQueries<T> = T extends readonly unknown[]
  ? { -readonly [K in keyof T]: Awaited<T[K]> }
  : Awaited<T>;

/**
 * A transaction's `sql`: queries go to the transaction's connection, in
 * order, pipelined.
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 * const sql = postgres();
 * await sql.begin(async (tx) => {
 *   await tx`insert into log (msg) values (${"a"})`;
 *   await tx.savepoint(async (sp) => {
 *     await sp`insert into log (msg) values (${"b"})`;
 *   });
 * });
 * ```
 */
export interface TransactionSql extends SqlTag {
  /**
   * Two-phase commit: when the transaction succeeds it ends with
   * `PREPARE TRANSACTION 'name'` instead of COMMIT, to be finished later with
   * `COMMIT PREPARED 'name'` (or `ROLLBACK PREPARED`), from any connection. The
   * server needs `max_prepared_transactions` above 0.
   *
   * @example
   * ```ts
   * import postgres from "jsr:@pgpipe/pgpipe";
   * const sql = postgres();
   * await sql.begin(async (tx) => {
   *   await tx`insert into ledger (amount) values (${10})`;
   *   await tx.prepare("ledger-42");
   * });
   * await sql`commit prepared 'ledger-42'`;
   * ```
   */
  prepare(name: string): Promise<void>;
  /** Runs `fn` inside a savepoint: released on success, rolled back to on a throw (which is rethrown). */
  savepoint<T>(fn: (sql: TransactionSql) => T | Promise<T>): Promise<UnwrapQueries<T>>;
  /** Same, with a savepoint name. */
  savepoint<T>(
    name: string,
    fn: (sql: TransactionSql) => T | Promise<T>,
  ): Promise<UnwrapQueries<T>>;
}

/**
 * A transaction opened without a callback, for `await using`: it rolls back
 * when the scope exits unless `commit()` was called.
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 * const sql = postgres();
 * {
 *   await using tx = await sql.begin();
 *   await tx`update accounts set balance = balance - 10 where id = ${1}`;
 *   await tx.commit();
 * }
 * ```
 */
export interface Transaction extends TransactionSql {
  /** Commits and returns the connection to the pool. */
  commit(): Promise<void>;
  /** Rolls back and returns the connection to the pool. */
  rollback(): Promise<void>;
  /** Rolls back unless committed. */
  [Symbol.asyncDispose](): Promise<void>;
}

/** A transaction's callback: what it returns (queries, or a value) is what `begin` resolves to. */
export type TransactionCallback<T> = (sql: TransactionSql) => T | Promise<T>;

/** Runs fixed SQL (transaction control) on a tag. */
export function runStatement(tag: SqlTag, text: string): Promise<unknown> {
  const strings = Object.assign([text], { raw: [text] }) as unknown as TemplateStringsArray;
  return tag(strings);
}

/** A callback may return an array of queries to pipeline; they are awaited together. */
export async function settleAll<T>(value: T): Promise<T> {
  return Array.isArray(value) && value.some((v) => v instanceof Query)
    ? (await Promise.all(value)) as T
    : value;
}

/** Failures already said in a transaction's terms (so a rethrow is not wrapped twice). */
const transactionErrors = new WeakSet<ConnectionError>();

/**
 * One transaction on a reserved connection, and the sink of its `sql`: every request goes to
 * the connection, noting on the way the COPYs FROM STDIN it starts and whether the user sent a
 * statement that can end the block.
 */
export class OpenTransaction implements Sink {
  /** The reserved connection it runs on. */
  readonly conn: Connection;
  /** Its `sql`, handed to the callback (or returned as a Transaction). */
  readonly sql: TransactionSql;
  /** The COPYs FROM STDIN it sent: failed if still open when it ends (see TransactionCopies). */
  readonly copies: TransactionCopies = new TransactionCopies();
  /** The name `sql.prepare` gave: it ends with PREPARE TRANSACTION instead of COMMIT. */
  #preparedAs: string | undefined = undefined;
  /** True while the driver sends its own ROLLBACK, COMMIT or PREPARE TRANSACTION (see end). */
  #ownEnding = false;
  /** True once the user sent a statement that can end the block (see failure). */
  #userEnded = false;
  /** Savepoints made without a name, to name the next one. */
  #savepoints = 0;

  constructor(conn: Connection, settings: ClientSettings, parent: OtelContext | undefined) {
    this.conn = conn;
    const sql = makeTag(this, settings, { transaction: true, parent }) as TransactionSql;
    Object.defineProperties(sql, {
      prepare: { value: (name: string) => this.#prepare(name) },
      savepoint: {
        value: <T>(nameOrFn: string | TransactionCallback<T>, maybeFn?: TransactionCallback<T>) =>
          this.#savepoint(nameOrFn, maybeFn),
      },
    });
    this.sql = sql;
  }

  send(req: PipelineRequest): void {
    if (req instanceof CopyInRequest) {
      this.copies.add(req);
    } else if (
      !this.#ownEnding && !this.#userEnded && req instanceof QueryRequest &&
      mayEndTransaction(req.spec.text)
    ) {
      this.#userEnded = true;
    }
    this.conn.send(req);
  }

  cancel(req: PipelineRequest, reason: Error): void {
    this.conn.cancel(req, reason);
  }

  /** How the transaction ends when it succeeds: COMMIT, or PREPARE TRANSACTION for two-phase commit. */
  commitText(): string {
    const name = this.#preparedAs;
    return name === undefined ? "commit" : `prepare transaction '${name.replaceAll("'", "''")}'`;
  }

  /** Sends one of the driver's own statements that end the transaction. */
  end(text: string): Promise<unknown> {
    const query = runStatement(this.sql, text) as Query<readonly unknown[]>;
    this.#ownEnding = true;
    try {
      return query.execute(); // sent now, synchronously: send sees the flag
    } finally {
      this.#ownEnding = false;
    }
  }

  /**
   * What a transaction's failure says when its connection died: whether it can have committed.
   * `ending` is true when the failure is the COMMIT's (or PREPARE TRANSACTION's) own. Until that
   * statement is written nothing can commit (the server rolls back a transaction whose session
   * ends), so the outcome is `"not-sent"`, the retry rule's "nothing took effect"; once it was
   * written and its answer never came, `"unknown"`. The user's own COMMIT, ROLLBACK, END, ...
   * sent inside the transaction (see mayEndTransaction) makes it `"unknown"` too: what ran before
   * it may have committed, and what ran after it ran outside any transaction. Any other failure
   * (the server refused a statement, the callback threw its own error) is returned unchanged.
   */
  failure(e: unknown, ending: boolean): unknown {
    if (!(e instanceof ConnectionError) || transactionErrors.has(e)) return e;
    if (!ending && this.conn.closedReason === null) return e; // the connection lives: rolled back
    const written = ending && e.outcome !== "not-sent";
    const userEnded = this.#userEnded;
    const statement = this.#preparedAs !== undefined ? "PREPARE TRANSACTION" : "COMMIT";
    const err = new ConnectionError(
      e.code,
      written
        ? `the transaction's connection closed after ${statement} was sent, before its answer: ` +
          `it may have committed (${e.message})`
        : userEnded
        ? "the transaction's connection closed after a statement ending the transaction " +
          "(COMMIT, ROLLBACK, END, ...) was sent inside it: some of its work may have committed " +
          `(${e.message})`
        : `the transaction's connection closed before ${statement} was sent: nothing was ` +
          `committed (${e.message})`,
      { address: e.address, port: e.port, cause: e },
    );
    err.outcome = written || userEnded ? "unknown" : "not-sent";
    transactionErrors.add(err);
    return err;
  }

  /** `sql.prepare(name)`: the transaction will end with PREPARE TRANSACTION 'name'. */
  #prepare(name: string): Promise<void> {
    if (typeof name !== "string" || name === "" || name.includes("\0")) {
      return Promise.reject(
        new QueryError("INVALID_ARGUMENTS", "sql.prepare needs a transaction name (a string)"),
      );
    }
    this.#preparedAs = name;
    return Promise.resolve();
  }

  /** `sql.savepoint`: `fn` inside a savepoint, released on success, rolled back to on a throw. */
  async #savepoint<T>(
    nameOrFn: string | TransactionCallback<T>,
    maybeFn?: TransactionCallback<T>,
  ): Promise<UnwrapQueries<T>> {
    const fn = typeof nameOrFn === "function" ? nameOrFn : maybeFn!;
    const name = typeof nameOrFn === "string" ? nameOrFn : `s${++this.#savepoints}`;
    const quoted = quoteIdentifier(name);
    const tx = this.sql;
    await runStatement(tx, `savepoint ${quoted}`);
    try {
      const result = await settleAll(await fn(tx));
      await runStatement(tx, `release savepoint ${quoted}`);
      return result as UnwrapQueries<T>;
    } catch (e) {
      await runStatement(tx, `rollback to savepoint ${quoted}`);
      throw e;
    }
  }
}
