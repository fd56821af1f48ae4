/**
 * A `socket` option that connects to the test server as usual but holds each CancelRequest the
 * driver sends, so a test decides when the server gets it, how often, and when the driver sees
 * the server close the cancel socket. This is how a test reproduces the timings a loaded machine
 * produces by chance: PostgreSQL up to 17 signals a cancelled backend twice (`signal_child`: its
 * pid, then its process group), and the process doing so can be descheduled in between, so the
 * second SIGINT may land after the target failed and the next query started. The server closes
 * the cancel socket only after both.
 */
import type { DenoLikeConn, SocketFunction } from "../../mod.ts";

const CANCEL_REQUEST_CODE = 80877102;

/** A CancelRequest the driver sent, held back. */
export interface HeldCancel {
  /** Hands the request to the server once (one more SIGINT) and waits until it has acted on it. */
  deliver(): Promise<void>;
  /** Closes the driver's cancel socket from the server's side, as the server does once done. */
  close(): void;
  /** Resolves when the driver has closed its side (it saw the end of the socket). */
  readonly finished: Promise<void>;
}

/** The `socket` function for `postgres()`, and the cancels it holds. */
export interface CancelRelay {
  socket: SocketFunction;
  /** The next CancelRequest the driver sends (or one it already sent and nobody took). */
  next(): Promise<HeldCancel>;
}

function isCancelRequest(p: Uint8Array): boolean {
  if (p.length !== 16) return false;
  const view = new DataView(p.buffer, p.byteOffset, p.byteLength);
  return view.getInt32(0) === 16 && view.getInt32(4) === CANCEL_REQUEST_CODE;
}

/** A relay to the server each connection of the driver targets. */
export function cancelRelay(): CancelRelay {
  const held: HeldCancel[] = [];
  const takers: ((c: HeldCancel) => void)[] = [];
  const hold = (bytes: Uint8Array, target: { host: string; port: number }) => {
    let close!: () => void;
    let finish!: () => void;
    const closed = new Promise<void>((resolve) => close = resolve);
    const finished = new Promise<void>((resolve) => finish = resolve);
    const cancel: HeldCancel = {
      async deliver() {
        const conn = await Deno.connect({ hostname: target.host, port: target.port });
        try {
          await conn.write(bytes);
          // The server closes the socket once it has signalled the backend.
          await conn.read(new Uint8Array(1)).catch(() => null);
        } finally {
          conn.close();
        }
      },
      close,
      finished,
    };
    const conn: DenoLikeConn = {
      read: async () => (await closed, null),
      write: (p) => Promise.resolve(p.length),
      close: finish,
    };
    const taker = takers.shift();
    if (taker !== undefined) taker(cancel);
    else held.push(cancel);
    return conn;
  };
  return {
    socket: ({ target }) => {
      // Connect on the first write: it says whether this is a session or a CancelRequest.
      let opened!: (c: DenoLikeConn | Promise<Deno.TcpConn>) => void;
      const peer = new Promise<DenoLikeConn>((resolve) => opened = resolve);
      let first = true;
      const conn: DenoLikeConn = {
        read: async (p) => (await peer).read(p),
        write(p) {
          if (first) {
            first = false;
            opened(
              isCancelRequest(p)
                ? hold(p.slice(), target)
                : Deno.connect({ hostname: target.host, port: target.port }),
            );
          }
          return peer.then((c) => c.write(p));
        },
        close() {
          if (first) {
            opened({
              read: () => Promise.resolve(null),
              write: (p) => Promise.resolve(p.length),
              close() {},
            });
          }
          peer.then((c) => {
            try {
              c.close();
            } catch {
              // already closed
            }
          }, () => {});
        },
      };
      return Promise.resolve(conn);
    },
    next: () => {
      const ready = held.shift();
      return ready !== undefined
        ? Promise.resolve(ready)
        : new Promise<HeldCancel>((resolve) => takers.push(resolve));
    },
  };
}
