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
