/**
 * `sql.begin`: a transaction on a reserved connection, in two forms. With a
 * callback it is committed when the callback resolves and rolled back (the
 * error rethrown) when it throws; without one it is a Transaction for
 * `await using`, rolled back unless committed. With telemetry on, one span
 * covers the transaction and is the parent of its queries.
 */
import { type ConnectionError, QueryError } from "../errors.ts";
import type { TransactionTrace } from "../telemetry/traces.ts";
import { copyInProgress } from "../copy/transaction_copies.ts";
import type { Pool } from "./pool.ts";
import type { ClientSettings } from "./runner.ts";
import {
  OpenTransaction,
  runStatement,
  settleAll,
  type Transaction,
  type TransactionCallback,
} from "./transaction.ts";

/** Transaction modes are spliced into `begin`, so only their keywords are allowed. */
const TRANSACTION_MODES = /^[a-z ,]*$/i;

/**
 * `sql.begin(fn)`, `sql.begin(modes, fn)` or `sql.begin(modes?)`: resolves with what `fn`
 * returned (its queries' results), or with the open Transaction when there is no `fn`.
 */
export function beginTransaction<T>(
  pool: Pool,
  settings: ClientSettings,
  a?: string | TransactionCallback<T>,
  b?: TransactionCallback<T>,
): Promise<unknown> {
  const fn = typeof a === "function" ? a : b;
  const modes = typeof a === "string" ? a : "";
  const telemetry = settings.telemetry;
  if (telemetry === null) return transaction(pool, settings, modes, fn, null);
  // One span for the transaction, the parent of its queries; with a callback it is active
  // while the callback runs, so what else the callback does is under it too.
  const trace = telemetry.transaction();
  if (fn === undefined) {
    const opened = transaction(pool, settings, modes, fn, trace); // ends at commit() or rollback()
    opened.catch((e) => trace.end(e));
    return opened;
  }
  return trace.settle(trace.run(() => transaction(pool, settings, modes, fn, trace)));
}

/** Opens the transaction, then runs `fn` in it, or hands it back as a Transaction without one. */
async function transaction<T>(
  pool: Pool,
  settings: ClientSettings,
  modes: string,
  fn: TransactionCallback<T> | undefined,
  trace: TransactionTrace | null,
): Promise<unknown> {
  const tx = await open(pool, settings, modes, trace);
  if (fn === undefined) return handle(pool, tx, trace);
  try {
    return await runCallback(tx, fn);
  } finally {
    pool.release(tx.conn);
  }
}

/** Reserves a connection and sends BEGIN on it (with the modes); released if that fails. */
async function open(
  pool: Pool,
  settings: ClientSettings,
  modes: string,
  trace: TransactionTrace | null,
): Promise<OpenTransaction> {
  if (!TRANSACTION_MODES.test(modes)) {
    throw new QueryError("INVALID_TRANSACTION_MODE", `invalid transaction modes: ${modes}`);
  }
  const conn = await pool.reserve();
  const tx = new OpenTransaction(conn, settings, trace?.context);
  try {
    await runStatement(tx.sql, modes ? `begin ${modes}` : "begin");
  } catch (e) {
    pool.release(conn);
    throw tx.failure(e, false);
  }
  return tx;
}

/**
 * Runs the callback, then commits (or prepares); on a throw, rolls back and rethrows. The caller
 * releases the connection.
 */
async function runCallback<T>(tx: OpenTransaction, fn: TransactionCallback<T>): Promise<T> {
  let result;
  // If the connection goes away while the callback runs (even between its queries), the
  // transaction is over: reject at once rather than when the callback next uses it.
  let lost!: (e: ConnectionError) => void;
  const closed = new Promise<never>((_, reject) => {
    lost = (e) => reject(tx.failure(e, false));
  });
  const stopWatching = tx.conn.onClose(lost);
  try {
    result = await Promise.race([(async () => await settleAll(await fn(tx.sql)))(), closed]);
  } catch (e) {
    tx.copies.stopOpen("the transaction failed while this COPY was open");
    await tx.end("rollback").catch(() => {}); // the connection may be gone; the cause matters
    throw tx.failure(e, false);
  } finally {
    stopWatching();
  }
  if (tx.copies.stopOpen("the transaction ended while this COPY was open")) {
    await tx.end("rollback").catch(() => {});
    throw copyInProgress();
  }
  // A failing commit (deferred constraint) rejects with its error; no rollback follows it.
  await tx.end(tx.commitText()).catch((e) => {
    throw tx.failure(e, true);
  });
  return result;
}

/** The transaction as a Transaction: `commit()`, `rollback()`, and rollback on dispose. */
function handle(pool: Pool, tx: OpenTransaction, trace: TransactionTrace | null): Transaction {
  let done = false;
  const finish = async (text: string) => {
    if (done) return;
    done = true;
    let failure: unknown = null;
    try {
      if (
        tx.copies.stopOpen("the transaction ended while this COPY was open") &&
        text !== "rollback"
      ) {
        await tx.end("rollback").catch(() => {});
        throw copyInProgress();
      }
      await tx.end(text).catch((e) => {
        throw tx.failure(e, text !== "rollback");
      });
    } catch (e) {
      failure = e;
      throw e;
    } finally {
      trace?.end(failure);
      pool.release(tx.conn);
    }
  };
  return Object.defineProperties(tx.sql, {
    commit: { value: () => finish(tx.commitText()) },
    rollback: { value: () => finish("rollback") },
    [Symbol.asyncDispose]: { value: () => finish("rollback").catch(() => {}) },
  }) as Transaction;
}
