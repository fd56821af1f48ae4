/**
 * `sql.subscribe`: handlers for the changes of one logical replication
 * stream (see replication_stream.ts), shared by every subscription of a
 * client, as postgres.js does. The stream opens with the first subscription
 * and closes when the last one unsubscribes. If it is lost it is opened again
 * (a new slot: changes committed meanwhile are not seen) with backoff, and
 * every subscription's `onsubscribe` runs again, so it can catch up by query.
 *
 * Nothing a handler, an `onsubscribe` or an `onerror` throws reaches the
 * stream: it goes to the subscription's `onerror`, else to the console.
 */
import { ConnectionError, QueryError } from "../errors.ts";
import type { Row } from "../query/result.ts";
import type { DecodeOptions } from "../types/text_decoders.ts";
import type { HostOptions } from "../connection/hosts.ts";
import type { ReplicationEvent, TruncateEvent } from "./rows.ts";
import { type FailedChange, ReplicationStream } from "./stream.ts";
import { changeKeys, parsePattern } from "./pattern.ts";

/**
 * Called with each change a subscription's pattern matches: the row (the new
 * one for an insert or update, the old one, or its key columns, for a delete;
 * null for a truncate) and what happened.
 *
 * @example
 * ```ts
 * import postgres, { type SubscribeHandler } from "jsr:@pgpipe/pgpipe";
 * const sql = postgres({ publications: "alltables" });
 * const log: SubscribeHandler = (row, { command, relation }) =>
 *   console.log(command, relation.table, row);
 * await sql.subscribe("*", log);
 * ```
 */
export type SubscribeHandler = (row: Row | null, info: ReplicationEvent | TruncateEvent) => void;

/**
 * A handle's `sql`: the subscription's replication connection, as far as
 * postgres.js's tests and code touch it (`close()` and `end()`). Both drop
 * the current replication connection the way a lost one would be: the stream
 * is reopened at once (a new slot: changes committed meanwhile are not seen)
 * and every subscription's `onsubscribe` runs again. The connection is shared
 * by every subscription of the client, so all of them reconnect. Nothing goes
 * to `onerror` (it was closed on purpose). To stop for good, `unsubscribe()`.
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 * const sql = postgres({ publications: "alltables" });
 * const { sql: stream, unsubscribe } = await sql.subscribe(
 *   "*",
 *   (row, { command }) => console.log(command, row),
 *   () => console.log("streaming (again)"),
 * );
 * await stream.close(); // a fresh slot and connection; "streaming (again)" is logged
 * await unsubscribe();
 * ```
 */
export interface SubscriptionConnection {
  /**
   * Closes the current replication connection (CopyDone, then Terminate);
   * resolves once it is closed, while the stream reopens. Does nothing after
   * this subscription's `unsubscribe()`, or while a reconnect is pending.
   */
  close(): Promise<void>;
  /**
   * The same as `close()`. (In postgres.js `end()` also stops the
   * subscriptions; here that is `unsubscribe()`, per subscription.)
   */
  end(): Promise<void>;
}

/**
 * What `sql.subscribe` resolves to.
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 * const sql = postgres({ publications: "alltables" });
 * const { state, unsubscribe } = await sql.subscribe("insert:events", (row) => console.log(row));
 * console.log("streaming on backend", state.pid);
 * await unsubscribe();
 * ```
 */
export interface SubscriptionHandle {
  /**
   * The replication connection's backend `pid` and `secret`: those of the
   * connection streaming now (after a reconnect, the new one).
   */
  readonly state: { readonly pid: number; readonly secret: number };
  /**
   * Stops this subscription's handler at once; resolves when done, after the
   * replication connection has closed if this was the last subscription.
   */
  unsubscribe(): Promise<void>;
  /**
   * The replication connection: `close()` (or `end()`) drops it as a lost
   * connection would, and the stream reconnects, calling `onsubscribe` again.
   */
  readonly sql: SubscriptionConnection;
}

/** What the subscriber needs from the client. */
export interface SubscriberOptions {
  /** The client's connection options. */
  connection: HostOptions;
  /** The client's decoders and transforms. */
  decode: DecodeOptions;
  /** The `publications` option as given. */
  publications: string;
  /** The names it lists. */
  publicationNames: readonly string[];
}

interface Subscription {
  /** The normalised pattern (see subscribe_pattern.ts). */
  pattern: string;
  fn: SubscribeHandler;
  onsubscribe: (() => void) | undefined;
  onerror: ((err: Error) => void) | undefined;
  /** The stream generation its `onsubscribe` last ran for (0: none yet). */
  notified: number;
}

const MAX_BACKOFF_MS = 5000;
/** A stream up this long resets the reconnect backoff. */
const STABLE_MS = 10_000;

function asError(e: unknown): Error {
  return e instanceof Error ? e : new Error(String(e), { cause: e });
}

/** The subscriptions of one client and the stream they share. */
export class Subscriber {
  #options: SubscriberOptions;
  #patterns = new Map<string, Set<Subscription>>();
  #count = 0;
  /** The stream being opened or open; null when there is none (or it was lost). */
  #opening: Promise<ReplicationStream> | null = null;
  #generation = 0;
  /** The last stream that opened, for `state`. */
  #last: ReplicationStream | null = null;
  #ended = false;
  #backoff = 0;
  #retry: ReturnType<typeof setTimeout> | undefined;

  constructor(options: SubscriberOptions) {
    this.#options = options;
  }

  /** Adds a subscription; resolves once the stream runs and its `onsubscribe` has been called. */
  async subscribe(
    pattern: string,
    fn: SubscribeHandler,
    onsubscribe?: () => void,
    onerror?: (err: Error) => void,
  ): Promise<SubscriptionHandle> {
    const normalised = parsePattern(pattern);
    if (typeof fn !== "function") {
      throw new QueryError("INVALID_ARGUMENTS", "sql.subscribe needs a handler function");
    }
    for (const [name, f] of [["onsubscribe", onsubscribe], ["onerror", onerror]] as const) {
      if (f !== undefined && typeof f !== "function") {
        throw new QueryError("INVALID_ARGUMENTS", `sql.subscribe: ${name} must be a function`);
      }
    }
    if (this.#ended) {
      throw new ConnectionError("CONNECTION_ENDED", "sql.subscribe after sql.end()");
    }
    const sub: Subscription = { pattern: normalised, fn, onsubscribe, onerror, notified: 0 };
    this.#add(sub);
    let stream: ReplicationStream;
    try {
      stream = await this.#open();
    } catch (e) {
      this.#remove(sub);
      throw e;
    }
    // Joined a stream that was already running: its onsubscribe has not run yet.
    this.#notify(sub, this.#generation);
    const current = () => this.#last ?? stream;
    return {
      get state() {
        const s = current();
        return { pid: s.pid, secret: s.secret };
      },
      unsubscribe: () => this.#unsubscribe(sub),
      sql: {
        close: () => this.#drop(sub),
        end: () => this.#drop(sub),
      },
    };
  }

  #add(sub: Subscription): void {
    let set = this.#patterns.get(sub.pattern);
    if (set === undefined) this.#patterns.set(sub.pattern, set = new Set());
    set.add(sub);
    this.#count++;
  }

  /** Whether it was still subscribed. */
  #remove(sub: Subscription): boolean {
    const set = this.#patterns.get(sub.pattern);
    if (set === undefined || !set.delete(sub)) return false;
    if (set.size === 0) this.#patterns.delete(sub.pattern);
    this.#count--;
    return true;
  }

  *#all(): Generator<Subscription> {
    for (const set of this.#patterns.values()) yield* set;
  }

  /** The stream, opening it if there is none. */
  #open(): Promise<ReplicationStream> {
    if (this.#opening !== null) return this.#opening;
    const generation = ++this.#generation;
    const opening: Promise<ReplicationStream> = ReplicationStream.open({
      ...this.#options,
      onchange: (row, event) => this.#deliver(row, event),
      onerror: (err, change) => this.#failed(err, change),
      onlost: (err) => this.#lost(opening, err),
    }).then(
      async (stream) => {
        if (this.#opening !== opening) {
          // Ended, or every subscription left, while it opened.
          await stream.close().catch(() => {});
          throw new ConnectionError("CONNECTION_ENDED", "the subscriptions ended");
        }
        this.#last = stream;
        for (const sub of this.#all()) this.#notify(sub, generation);
        return stream;
      },
      (e) => {
        if (this.#opening === opening) this.#opening = null;
        throw e;
      },
    );
    this.#opening = opening;
    return opening;
  }

  /** Calls a subscription's `onsubscribe` once per stream. */
  #notify(sub: Subscription, generation: number): void {
    if (sub.notified === generation) return;
    sub.notified = generation;
    if (sub.onsubscribe === undefined) return;
    try {
      sub.onsubscribe();
    } catch (e) {
      this.#report(sub, e, "onsubscribe");
    }
  }

  /** A change from the stream, to every subscription whose pattern matches it. */
  #deliver(row: Row | null, event: ReplicationEvent | TruncateEvent): void {
    const { relation } = event;
    // postgres.js's key: the replica identity values, joined as Array.join does.
    const key = row !== null && relation.keys.length > 0
      ? relation.keys.map((k) => row[k.name]).join(",")
      : null;
    for (const pattern of changeKeys(event.command, relation.schema, relation.table, key)) {
      const set = this.#patterns.get(pattern);
      if (set === undefined) continue;
      for (const sub of set) {
        try {
          sub.fn(row, event);
        } catch (e) {
          this.#report(sub, e, "handler");
        }
      }
    }
  }

  /**
   * A change could not be decoded: the subscriptions it may have been for
   * (any key, since the row is unknown) hear of it.
   */
  #failed(err: unknown, change: FailedChange | null): void {
    const error = asError(err);
    const reached = new Set<Subscription>();
    const tables = change === null
      ? null
      : new Set(changeKeys(change.command, change.relation.schema, change.relation.table, null));
    for (const [pattern, set] of this.#patterns) {
      const eq = pattern.indexOf("=");
      if (tables === null || tables.has(eq === -1 ? pattern : pattern.slice(0, eq))) {
        for (const sub of set) reached.add(sub);
      }
    }
    let told = false;
    for (const sub of reached) {
      if (sub.onerror === undefined) continue;
      told = true;
      this.#callOnerror(sub, error);
    }
    if (!told) console.error("pgpipe: a subscribed change could not be decoded", error);
  }

  /** What a subscription's own callback threw: to its onerror, else to the console. */
  #report(sub: Subscription, err: unknown, what: string): void {
    if (sub.onerror === undefined) {
      console.error(`pgpipe: a subscribe ${what} for "${sub.pattern}" threw`, err);
      return;
    }
    this.#callOnerror(sub, asError(err));
  }

  #callOnerror(sub: Subscription, err: Error): void {
    try {
      sub.onerror!(err);
    } catch (e) {
      console.error(`pgpipe: the subscribe onerror for "${sub.pattern}" threw`, e, err);
    }
  }

  /** The stream `opening` was lost: report it and open another. */
  #lost(opening: Promise<ReplicationStream>, err: Error): void {
    if (this.#opening !== opening) return; // closed on purpose, or already replaced
    this.#opening = null;
    if (this.#last !== null && Date.now() - this.#last.openedAt > STABLE_MS) this.#backoff = 0;
    for (const sub of this.#all()) if (sub.onerror !== undefined) this.#callOnerror(sub, err);
    this.#reconnect();
  }

  /**
   * Opens the stream again: the first time at once (a terminated backend or a
   * restarted server is usually back at once), then with growing pauses.
   */
  #reconnect(): void {
    if (this.#ended || this.#count === 0 || this.#retry !== undefined) return;
    const delay = this.#backoff;
    this.#backoff = Math.min(MAX_BACKOFF_MS, Math.max(50, this.#backoff * 2));
    this.#retry = setTimeout(() => {
      this.#retry = undefined;
      if (this.#ended || this.#count === 0 || this.#opening !== null) return;
      this.#open().catch((e) => {
        if (this.#ended || this.#count === 0) return;
        const error = asError(e);
        for (const sub of this.#all()) {
          if (sub.onerror !== undefined) this.#callOnerror(sub, error);
        }
        this.#reconnect();
      });
    }, delay);
  }

  /**
   * Closes the current stream on purpose (a handle's `sql.close()`), then
   * reconnects as after a loss, at once: not an error, so no `onerror`.
   */
  async #drop(sub: Subscription): Promise<void> {
    if (!this.#patterns.get(sub.pattern)?.has(sub)) return; // unsubscribed: not its stream
    const opening = this.#opening;
    if (opening === null) return; // lost already: a reconnect is pending
    const stream = await opening.catch(() => null);
    // It failed to open (that path reconnects), or was closed or replaced meanwhile.
    if (stream === null || this.#opening !== opening) return;
    this.#opening = null; // from here a loss of `stream` is ignored (see #lost)
    this.#backoff = 0;
    await stream.close().catch(() => {}); // the socket is destroyed if the goodbye fails
    this.#reconnect();
  }

  async #unsubscribe(sub: Subscription): Promise<void> {
    if (!this.#remove(sub) || this.#count > 0) return;
    await this.#close();
  }

  /** Closes the stream (and stops reconnecting) once nothing is subscribed, or at the end. */
  async #close(): Promise<void> {
    clearTimeout(this.#retry);
    this.#retry = undefined;
    const opening = this.#opening;
    this.#opening = null;
    this.#backoff = 0;
    const stream = await opening?.catch(() => null);
    await stream?.close();
  }

  /** Closes the stream; later subscribes reject. */
  end(): Promise<void> {
    this.#ended = true;
    return this.#close();
  }
}
