/**
 * CancelRequest: sent on a new socket (with the connection's TLS policy),
 * naming the backend by its process ID and secret key. The server answers
 * nothing and closes; cancellation is best effort by design.
 */
import type { PostgresError } from "../errors.ts";
import { cancelRequest } from "../protocol/frontend.ts";
import { Writer } from "../protocol/writer.ts";
import { openTransport } from "./transport/connect.ts";
import type { Endpoint } from "./transport/transport.ts";

/** How long to wait for the server to take a cancel before giving up on the socket. */
const CANCEL_TIMEOUT_MS = 5000;

/** Asks the server to cancel what backend `pid` is running. Never throws. */
export async function sendCancel(endpoint: Endpoint, pid: number, key: Uint8Array): Promise<void> {
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), CANCEL_TIMEOUT_MS);
  try {
    const transport = await openTransport(endpoint, endpoint.sslmode !== "allow", abort.signal);
    abort.signal.addEventListener("abort", () => transport.close(), { once: true });
    try {
      const w = new Writer(16);
      cancelRequest(w, pid, key);
      await transport.write(w.buf.subarray(0, w.length));
      // The server closes the socket once it has the request.
      await transport.read(new Uint8Array(1)).catch(() => null);
    } finally {
      transport.close();
    }
  } catch {
    // Best effort: a cancel that cannot be delivered leaves the query to finish.
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Which requests a CancelRequest of ours may still hit. Its signal lands whenever the server
 * gets to it: it stops whatever the backend then runs, and is dropped if the backend is idle
 * (PostgresMain discards a cancel that arrives while it reads a command). PostgreSQL up to 17
 * even signals twice (the backend's pid, then its process group), and the process doing so can
 * be descheduled in between, so one cancel may stop its target and then the query after it. So
 * counting cancels against errors drifts both ways; what holds is that the server closes the
 * cancel socket only after signalling. While one of ours is open any request may be hit; once the
 * last closes, only the requests already written then (`closed`) may still be. (A cancel the
 * server has not taken within CANCEL_TIMEOUT_MS counts as closed: past that, a bound is a guess.)
 */
export class StrayCancels {
  #open = 0;
  #exposed: WeakSet<object> | null = null; // written before the last cancel closed

  /** A CancelRequest is on its way: it is open until `sendCancel` resolves. */
  sent(): void {
    this.#open++;
  }

  /** A CancelRequest's socket closed; `queue[from, to)` were written (or queued) by then. */
  closed(queue: readonly object[], from: number, to: number): void {
    if (--this.#open > 0) return; // the requests still queued are marked when the last closes
    if (from === to) return;
    const exposed = this.#exposed ??= new WeakSet();
    for (let i = from; i < to; i++) if (queue[i] !== undefined) exposed.add(queue[i]);
  }

  /** Whether a "canceling statement due to user request" on `req` may be one of ours gone astray. */
  mayHit(req: object): boolean {
    return this.#open > 0 || this.#exposed?.has(req) === true;
  }

  /** `req` is sent again: from now on only a cancel still open, or sent later, can hit it. */
  resent(req: object): void {
    this.#exposed?.delete(req);
  }
}

/** How long after a CancelRequest closed, its statement still running, until the next; doubled each time. */
const RECANCEL_MS = 100;
/** The most CancelRequests sent for one statement. */
const MAX_CANCELS = 5;

/**
 * The CancelRequests of statements that have not ended yet, so that none is lost. PostgreSQL
 * drops a cancel signal that lands while the backend reads its next message (a cancel between
 * statements is a no-op: PostgresMain clears it before running what it read), and pipelined, a
 * query's messages wait in the backend's buffer behind the one before: a cancel sent when that
 * one's ReadyForQuery arrives lands, as a rule, in the cancelled statement, but a backend
 * descheduled between the two lets it land in between, and the statement (a `pg_sleep(5)`) runs
 * to its end. The server closes the cancel socket only after signalling, so once it has, a
 * statement that is still running, with no answer that ended it, RECANCEL_MS (doubling) later is
 * cancelled again, up to MAX_CANCELS CancelRequests in all. Each is one more of ours that may go
 * astray (see StrayCancels), which happens only where the statement's end was on its way all
 * along; a stray never fails a query nobody cancelled outside a transaction block.
 */
export class CancelRetries<R extends object> {
  #pending = new Map<R, { sent: number; timer?: ReturnType<typeof setTimeout> }>();

  /** A CancelRequest for `req`'s statement is on its way. */
  sent(req: R): void {
    const entry = this.#pending.get(req);
    if (entry === undefined) this.#pending.set(req, { sent: 1 });
    else {
      entry.sent++;
      clearTimeout(entry.timer);
      entry.timer = undefined;
    }
  }

  /** `req`'s statement ended (an answer ended it, or it left the pipeline): no cancel is due. */
  ended(req: R): void {
    if (this.#pending.size === 0) return;
    const entry = this.#pending.get(req);
    if (entry === undefined) return;
    clearTimeout(entry.timer);
    this.#pending.delete(req);
  }

  /**
   * A CancelRequest for `req` closed (the server signalled the backend): unless its statement
   * ends meanwhile, `again` is called after the wait (it checks the statement still runs, and
   * cancels it again), as long as fewer than MAX_CANCELS were sent.
   */
  closed(req: R, again: (req: R) => void): void {
    const entry = this.#pending.get(req);
    if (entry === undefined || entry.timer !== undefined) return;
    if (entry.sent >= MAX_CANCELS) {
      this.#pending.delete(req);
      return;
    }
    entry.timer = setTimeout(() => {
      entry.timer = undefined;
      if (this.#pending.get(req) === entry) again(req);
    }, RECANCEL_MS * 2 ** (entry.sent - 1));
  }

  /** The connection closed: nothing is due any more. */
  clear(): void {
    for (const entry of this.#pending.values()) clearTimeout(entry.timer);
    this.#pending.clear();
  }
}

/** PostgreSQL's untranslated texts of the two 57014s a client backend raises itself. */
const USER_REQUEST = "canceling statement due to user request";
const STATEMENT_TIMEOUT = "canceling statement due to statement timeout";

/**
 * Whether a 57014 may be a CancelRequest's doing (ours gone astray, or pg_cancel_backend) rather
 * than statement_timeout's. A backend raises both in ProcessInterrupts (the `routine` field, never
 * translated); a function raising 57014 itself is neither (and lock_timeout is 55P03). Apart from
 * the source line, which moves between versions and builds, only the message tells the two
 * apart, and lc_messages translates it. So an untranslated message decides, and a translated one
 * counts as a cancel. That is the safe side: a statement timeout taken for a stray cancel runs
 * once more outside a transaction (a cancelled statement took no effect) and times out again,
 * and inside one rejects with 57014 as it would have, the server's message kept; whereas a stray
 * cancel taken for a timeout rejects a query nobody cancelled. Without a `routine` (not
 * PostgreSQL itself answering) only the untranslated text counts.
 */
export function mayBeCancelRequest(err: PostgresError): boolean {
  if (err.routine === undefined) return err.message === USER_REQUEST;
  return err.routine === "ProcessInterrupts" && err.message !== STATEMENT_TIMEOUT;
}
