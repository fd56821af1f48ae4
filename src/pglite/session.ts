/**
 * One PGlite instance's single session, shared in turn by the streams opened on it. Its calls
 * run one at a time, in the order they were asked for (PGlite's raw protocol calls must never
 * overlap). One stream holds the session at a time; when it ends, the session is reset as a
 * server's backend would end: an open COPY or failed batch is closed, the transaction rolled
 * back, and DISCARD ALL drops prepared statements, cursors, temporary tables, listens and
 * settings, so the next stream starts clean.
 */
import { ConnectionError } from "../errors.ts";
import * as fe from "../protocol/frontend.ts";
import { Writer } from "../protocol/writer.ts";

/**
 * What pgpipe needs of a PGlite instance (`@electric-sql/pglite` 0.5): its raw protocol call
 * that streams the answer, its readiness and its close.
 */
export interface PGliteLike {
  /** Resolves once the database is up. */
  readonly waitReady: Promise<void>;
  /** Whether it was closed. */
  readonly closed: boolean;
  /** Runs wire protocol messages; hands each piece of the answer to `onRawData` as it comes. */
  execProtocolRawStream(
    message: Uint8Array,
    options: { onRawData: (data: Uint8Array) => void; syncToFs?: boolean },
  ): Promise<void>;
  /** Shuts the database down. */
  close(): Promise<void>;
}

/** The messages that end whatever a stream left running: see the module's comment. */
const RESET: Uint8Array = (() => {
  const w = new Writer(128);
  fe.copyFail(w, "the session ended");
  fe.sync(w);
  fe.query(w, "rollback");
  fe.query(w, "discard all");
  return w.buf.slice(0, w.length);
})();

/** The session of one PGlite instance. */
export class Session {
  readonly pg: PGliteLike;
  #tail: Promise<unknown> = Promise.resolve();
  #holder: object | null = null;
  #released: Promise<void> = Promise.resolve();

  constructor(pg: PGliteLike) {
    this.pg = pg;
  }

  /** Runs `fn` once every call asked for before has ended; rejects as it does. */
  run<T>(fn: () => T | Promise<T>): Promise<T> {
    const result = this.#tail.then(fn);
    this.#tail = result.catch(() => {});
    return result;
  }

  /** One raw protocol call, in turn; `onData` gets each piece of the answer (a view: copy it). */
  call(input: Uint8Array, onData: (data: Uint8Array) => void): Promise<void> {
    return this.run(() => this.pg.execProtocolRawStream(input, { onRawData: onData }));
  }

  /**
   * Takes the session for `holder`, once a stream that is ending has been reset. Rejects while
   * another stream holds it: PGlite has one session, and a second client would run inside the
   * first one's transactions.
   */
  async acquire(holder: object, name: string): Promise<void> {
    await this.#released;
    if (this.#holder !== null) {
      throw new ConnectionError(
        "CONNECT_FAILED",
        `${name} serves one session and another client holds it: end that client ` +
          "(sql.end()) first, or share it",
      );
    }
    this.#holder = holder;
  }

  /** `holder` is done with the session: it is reset before anyone else takes it. */
  release(holder: object): void {
    if (this.#holder !== holder) return;
    this.#holder = null;
    this.#released = this.run(async () => {
      if (this.pg.closed) return;
      await this.pg.execProtocolRawStream(RESET, { onRawData: () => {} });
    }).catch(() => {}); // a PGlite that failed or closed has no session left to reset
  }

  /** Waits for the session to be free and reset, then closes the instance. */
  async close(): Promise<void> {
    await this.#released;
    await this.run(() => this.pg.closed ? undefined : this.pg.close());
  }
}
