/**
 * CancelRequest: sent on a new socket (with the connection's TLS policy),
 * naming the backend by its process ID and secret key. The server answers
 * nothing and closes; cancellation is best effort by design.
 */
import { cancelRequest } from "../protocol/frontend.ts";
import { Writer } from "../protocol/writer.ts";
import { type Endpoint, openTransport } from "./transport.ts";

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
