/**
 * The errors a request gets for a failure that was not its own: a query skipped because an
 * earlier one of its batch failed, one a cancel stopped that was meant for another, and a copy
 * of the connection's error per request when the connection goes.
 */
import { ConnectionError, PostgresError } from "../errors.ts";

/**
 * The error of a query that `cause` failed though it was not its own (an error that aborted its
 * batch, a cancel meant for another query), in the server's own terms (`code`, `message`), with
 * `detail` saying what happened and `cause` attached.
 */
function derivedError(code: string, message: string, detail: string, cause: PostgresError) {
  const err = new PostgresError({
    S: "ERROR",
    V: "ERROR",
    C: code,
    M: message,
    D: `${detail} (${cause.code}: ${cause.message})`,
  });
  (err as { cause?: unknown }).cause = cause;
  return err;
}

/**
 * An earlier query of the batch failed: 25P02, what the query would have got with a Sync of its
 * own (a statement in an aborted transaction).
 */
export const skippedInBatch = (cause: PostgresError): PostgresError =>
  derivedError(
    "25P02",
    "current transaction is aborted, commands ignored until end of transaction block",
    "not run: an earlier query written in the same batch of this transaction failed",
    cause,
  );

/**
 * The query was cancelled, but the cancel stopped an earlier query of its batch (the server
 * answers a batch only at its Sync, so the driver cannot aim a cancel behind the running query):
 * 57014, as a cancel gives.
 */
export const cancelledInBatch = (cause: PostgresError): PostgresError =>
  derivedError(
    "57014",
    "canceling statement due to user request",
    "cancelled: the server stopped its batch while an earlier query of it ran",
    cause,
  );

/**
 * A CancelRequest sent for another query stopped this one (the server stops whatever runs when
 * the signal lands), and it cannot simply run again (inside a transaction block, a cursor, a
 * COPY, a multi-statement simple query): 57014, and why.
 */
export const strayCancel = (cause: PostgresError): PostgresError =>
  derivedError(
    "57014",
    cause.message, // the server's, in its lc_messages
    "stopped: a cancel this connection sent for another query landed while it ran",
    cause,
  );

/** A fresh copy of a connection error for each request, so outcomes can differ. */
export function copyError(err: ConnectionError): ConnectionError {
  return new ConnectionError(err.code, err.message, {
    address: err.address,
    port: err.port,
    cause: err.cause,
    errno: err.errno,
    syscall: err.syscall,
  });
}
