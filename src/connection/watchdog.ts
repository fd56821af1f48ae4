/**
 * The `query_timeout` option's watchdog: a server that owes an answer and has sent nothing for
 * the limit gets a CancelRequest for the statement running; silent as long again, the connection
 * is destroyed (a server that went away without closing the socket).
 */

/** What the watchdog asks of its connection at each check. */
export interface Watched {
  /**
   * Whether the server owes an answer now: a request is in flight that waits on the server, not
   * on its consumer (a cursor or a COPY may legitimately wait on its consumer).
   */
  owesAnswer(): boolean;
  /** Cancels the statement running. */
  cancel(): void;
  /** Gives the connection up: the server sent nothing for `quietMs`. */
  destroy(quietMs: number): void;
}

/** When the connection last heard from the server and last wrote to it, and the check on them. */
export class QueryWatchdog {
  #lastRead = 0; // ms timestamps
  #lastWrite = 0;
  #cancelled = false; // a cancel went for this silence
  #timer: ReturnType<typeof setInterval> | undefined;

  /** Bytes arrived: the server is not silent, and a later silence earns a cancel again. */
  heard(): void {
    this.#lastRead = Date.now();
    this.#cancelled = false;
  }

  /** A write is under way. */
  wrote(): void {
    this.#lastWrite = Date.now();
  }

  /** Checks `watched` every so often for silences of `limitMs` (none when 0). */
  start(limitMs: number, watched: Watched): void {
    if (limitMs <= 0) return;
    this.#timer = setInterval(() => {
      if (!watched.owesAnswer()) return;
      const quiet = Date.now() - Math.max(this.#lastRead, this.#lastWrite);
      if (quiet < limitMs) return;
      if (!this.#cancelled) {
        this.#cancelled = true;
        watched.cancel();
      } else if (quiet >= 2 * limitMs) {
        watched.destroy(quiet);
      }
    }, Math.max(10, Math.min(1000, limitMs / 4)));
    Deno.unrefTimer(this.#timer as unknown as number);
  }

  /** The connection closed. */
  stop(): void {
    // Only one that exists: Deno's first clearInterval loads its Node timers (about 5 ms).
    if (this.#timer !== undefined) clearInterval(this.#timer);
  }
}
