/**
 * A `socket` option that connects to the test server as usual but holds each CancelRequest the
 * driver sends, so a test decides when the server gets it, how often, and when the driver sees
 * the server close the cancel socket. This is how a test reproduces the timings a loaded machine
 * produces by chance: PostgreSQL up to 17 signals a cancelled backend twice (`signal_child`: its
 * pid, then its process group), and the process doing so can be descheduled in between, so the
 * second SIGINT may land after the target failed and the next query started. The server closes
 * the cancel socket only after both.
 */
import type { SocketFunction } from "../../mod.ts";
import type { DenoLikeConn } from "../../interfaces.ts";

const CANCEL_REQUEST_CODE = 80877102;

/** A CancelRequest the driver sent, held back. */
export interface HeldCancel {
  /**
   * Hands the request to the server once and waits until it has signalled the backend (up to
   * PostgreSQL 17 that is itself two SIGINTs, which a loaded machine may space out).
   */
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
  /**
   * Holds the server's answers back after the next `57014` ErrorResponse the driver reads, so a
   * test acts between a cancelled statement and its ReadyForQuery.
   */
  pauseAfterCancelError(): Pause;
  /**
   * Holds what the driver writes to its sessions from now on until released, so the backend
   * waits for its next message, between statements, while a test delivers a cancel: the timing
   * a backend descheduled right after a ReadyForQuery produces, when the next query's messages,
   * already sent, are not read yet. `reached` resolves once a write is held.
   */
  holdWrites(): Pause;
}

/** Answers held after an ErrorResponse. */
export interface Pause {
  /** Resolves once the driver has read the ErrorResponse and nothing after it. */
  readonly reached: Promise<void>;
  /** Lets the rest through. */
  release(): void;
}

/** The end of the first whole 57014 ErrorResponse in `buf`, or -1. */
function cancelErrorEnd(buf: Uint8Array): number {
  const view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  for (let at = 0; at + 5 <= buf.length;) {
    const end = at + 1 + view.getInt32(at + 1);
    if (end > buf.length) return -1;
    if (
      buf[at] === 0x45 && new TextDecoder().decode(buf.subarray(at + 5, end)).includes("C57014\0")
    ) {
      return end;
    }
    at = end;
  }
  return -1;
}

function isCancelRequest(p: Uint8Array): boolean {
  if (p.length !== 16) return false;
  const view = new DataView(p.buffer, p.byteOffset, p.byteLength);
  return view.getInt32(0) === 16 && view.getInt32(4) === CANCEL_REQUEST_CODE;
}

/** A relay to the server each connection of the driver targets. */
export function cancelRelay(): CancelRelay {
  const held: HeldCancel[] = [];
  let pause: (Pause & { hit: boolean; reach(): void; released: Promise<void> }) | null = null;
  let writes: (Pause & { reach(): void; released: Promise<void> }) | null = null;
  /** A session's reads from the server, cut after a 57014 ErrorResponse while a pause is set. */
  const answers = (server: Deno.TcpConn): DenoLikeConn => {
    let buffered = new Uint8Array(0);
    return {
      async read(p) {
        if (pause?.hit) await pause.released;
        if (buffered.length === 0) {
          const n = await server.read(p);
          if (n === null) return null;
          buffered = p.slice(0, n);
        }
        const current = pause; // set while this read waited, possibly
        let take = Math.min(buffered.length, p.length);
        if (current !== null && !current.hit) {
          const end = cancelErrorEnd(buffered);
          if (end !== -1 && end <= take) {
            take = end;
            current.hit = true;
            current.reach();
          }
        }
        p.set(buffered.subarray(0, take));
        buffered = buffered.slice(take);
        return take;
      },
      async write(p) {
        const hold = writes;
        if (hold !== null) {
          hold.reach();
          await hold.released;
        }
        return await server.write(p);
      },
      close: () => server.close(),
    };
  };
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
      let opened!: (c: DenoLikeConn | Promise<DenoLikeConn>) => void;
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
                : Deno.connect({ hostname: target.host, port: target.port }).then(answers),
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
    pauseAfterCancelError() {
      let reach!: () => void;
      let release!: () => void;
      const reached = new Promise<void>((resolve) => reach = resolve);
      const released = new Promise<void>((resolve) => release = resolve);
      pause = { hit: false, reach, reached, released, release };
      return pause;
    },
    holdWrites() {
      let reach!: () => void;
      let release!: () => void;
      const reached = new Promise<void>((resolve) => reach = resolve);
      const released = new Promise<void>((resolve) => release = resolve);
      const hold = {
        reach,
        reached,
        released,
        release() {
          if (writes === hold) writes = null;
          release();
        },
      };
      writes = hold;
      return hold;
    },
    next: () => {
      const ready = held.shift();
      return ready !== undefined
        ? Promise.resolve(ready)
        : new Promise<HeldCancel>((resolve) => takers.push(resolve));
    },
  };
}
