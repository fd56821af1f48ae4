/**
 * The COPYs FROM STDIN one transaction sent. Its ROLLBACK or COMMIT queues
 * behind the COPY barrier, so a COPY left open when the transaction ends
 * would make it wait for data that never comes: the end fails it first.
 */
import { QueryError } from "../errors.ts";
import type { CopyInRequest } from "./copy_request.ts";

/** The COPY FROM STDIN requests of one transaction that may still be open. */
export class TransactionCopies {
  readonly #live = new Set<CopyInRequest>();

  /** Notes a COPY the transaction sends (and forgets those already finished). */
  add(req: CopyInRequest): void {
    for (const c of this.#live) if (c.finished) this.#live.delete(c); // keep only the live ones
    this.#live.add(req);
  }

  /** Fails every COPY still open (CopyFail, with `reason`); returns whether one was. */
  stopOpen(reason: string): boolean {
    let open = false;
    for (const req of this.#live) {
      if (req.open) {
        open = true;
        req.stop(reason);
      }
    }
    this.#live.clear();
    return open;
  }
}

/** Why a transaction that ended with a COPY FROM STDIN still open is rejected (postgres.js's code). */
export function copyInProgress(): QueryError {
  return new QueryError(
    "COPY_IN_PROGRESS",
    "the transaction ended while a COPY FROM STDIN was still open: the COPY was aborted and " +
      "the transaction rolled back (end the COPY's stream, and await it, before returning)",
  );
}
