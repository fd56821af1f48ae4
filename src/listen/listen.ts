/**
 * LISTEN/NOTIFY on a dedicated connection (not counted in `max`, as in
 * postgres.js). Listeners survive reconnects: when the connection is lost it
 * is reopened with backoff and every channel is listened to again.
 */
import type { Connection } from "../connection/connection.ts";
import type { Notification } from "../protocol/backend.ts";
import { exec, quoteIdentifier } from "../connection/requests/driver_queries.ts";
import { connect, type HostOptions } from "../connection/hosts.ts";

/**
 * Called with each notification's payload on a channel.
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 * const sql = postgres();
 * await sql.listen("jobs", (payload, n) => console.log(n.channel, n.pid, payload));
 * ```
 */
export type NotifyHandler = (payload: string, notification: Notification) => void;

/**
 * What `sql.listen` resolves to.
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 * const sql = postgres();
 * const { unlisten } = await sql.listen("jobs", (payload) => console.log(payload));
 * await sql.notify("jobs", "hello");
 * await unlisten();
 * ```
 */
export interface ListenHandle {
  /**
   * The listening connection's state: its backend `pid` and `secret`, those of
   * the connection now listening (after a reconnect, the new one).
   */
  readonly state: { readonly pid: number; readonly secret: number };
  /** Stops this handler; the channel is unlistened when its last handler goes. */
  unlisten(): Promise<void>;
}

/** A channel's handlers and `onlisten` callbacks, as both listeners keep them. */
export interface Channel {
  handlers: Set<NotifyHandler>;
  onlisten: Set<() => void>;
}

const MAX_BACKOFF_MS = 5000;
/** A listening connection up this long resets the reconnect backoff. */
const STABLE_MS = 10_000;

/** Calls a user's onlisten; what it throws is reported, never let into the reconnect. */
export function callOnlisten(f: () => void, channel: string): void {
  try {
    f();
  } catch (e) {
    console.error(`pgpipe: the onlisten callback for "${channel}" threw`, e);
  }
}

/** The listening connection and its channels. */
export class Listener {
  #options: HostOptions;
  #channels = new Map<string, Channel>();
  #conn: Promise<Connection> | null = null;
  #current: Connection | null = null; // the connection listening now, for ListenHandle.state
  #ended = false;
  #backoff = 0;
  #retry: ReturnType<typeof setTimeout> | undefined;

  constructor(options: HostOptions) {
    this.#options = options;
  }

  #connect(): Promise<Connection> {
    return this.#conn ??= (async () => {
      let opened: Connection | null = null; // set once connect() returns it
      const conn = await connect({
        ...this.#options,
        onnotify: (n) => this.#dispatch(n),
        onclose: () => this.#lost(opened),
      });
      opened = conn;
      // A reconnect listens to every channel again, in one pipelined batch.
      const channels = [...this.#channels.keys()];
      await Promise.all(channels.map((c) => exec(conn, `listen ${quoteIdentifier(c)}`)));
      this.#current = conn;
      for (const c of channels) {
        for (const f of this.#channels.get(c)?.onlisten ?? []) callOnlisten(f, c);
      }
      return conn;
    })().catch((e) => {
      this.#conn = null;
      throw e;
    });
  }

  #dispatch(n: Notification): void {
    dispatchTo(this.#channels, n);
  }

  /** The connection closed (`dead`), or an attempt to reopen it failed (null). */
  #lost(dead: Connection | null): void {
    this.#conn = null;
    if (this.#ended || this.#channels.size === 0) return;
    // The first reconnect is at once (a terminated backend or a restart is usually back at
    // once), later ones with growing pauses, until a connection has stayed up a while.
    if (dead !== null && Date.now() - dead.openedAt > STABLE_MS) this.#backoff = 0;
    const delay = this.#backoff;
    this.#backoff = Math.min(MAX_BACKOFF_MS, Math.max(50, this.#backoff * 2));
    this.#retry = setTimeout(() => {
      this.#retry = undefined;
      if (!this.#ended && this.#channels.size > 0) this.#connect().catch(() => this.#lost(null));
    }, delay);
  }

  /** Adds a handler; resolves once the server listens on the channel. */
  async listen(channel: string, fn: NotifyHandler, onlisten?: () => void): Promise<ListenHandle> {
    const conn = await this.#connect();
    // Registered after connecting: the connect step re-listens only channels from before.
    let entry = this.#channels.get(channel);
    const first = entry === undefined;
    if (entry === undefined) {
      entry = { handlers: new Set(), onlisten: new Set() };
      this.#channels.set(channel, entry);
    }
    entry.handlers.add(fn);
    if (onlisten) entry.onlisten.add(onlisten);
    if (first) {
      try {
        await exec(conn, `listen ${quoteIdentifier(channel)}`);
      } catch (e) {
        this.#channels.delete(channel);
        throw e;
      }
    }
    if (onlisten) callOnlisten(onlisten, channel);
    const current = () => this.#current ?? conn;
    return {
      get state() {
        const now = current();
        return { pid: now.pid, secret: now.secret };
      },
      unlisten: () => this.#unlisten(channel, fn, onlisten),
    };
  }

  async #unlisten(channel: string, fn: NotifyHandler, onlisten?: () => void): Promise<void> {
    if (!removeHandler(this.#channels, channel, fn, onlisten)) return;
    const conn = await this.#conn?.catch(() => null);
    if (conn && !conn.closed) await exec(conn, `unlisten ${quoteIdentifier(channel)}`);
  }

  /** Closes the listening connection; no reconnects after this. */
  async end(): Promise<void> {
    this.#ended = true;
    if (this.#retry !== undefined) clearTimeout(this.#retry); // none: no Node timers to load
    const conn = await this.#conn?.catch(() => null);
    await conn?.end();
  }
}

/** Runs the handlers of the channel `n` came on; one that throws is reported, never rethrown. */
export function dispatchTo(channels: ReadonlyMap<string, Channel>, n: Notification): void {
  for (const handler of channels.get(n.channel)?.handlers ?? []) {
    try {
      handler(n.payload, n);
    } catch (e) {
      // A throwing handler must not stop the others or the connection, nor end the process.
      console.error(`pgpipe: a listen handler for "${n.channel}" threw`, e);
    }
  }
}

/**
 * Removes `fn` (and its `onlisten`) from `channel`: true when that was the channel's last handler,
 * so the channel is gone and the server should stop listening on it.
 */
export function removeHandler(
  channels: Map<string, Channel>,
  channel: string,
  fn: NotifyHandler,
  onlisten?: () => void,
): boolean {
  const entry = channels.get(channel);
  if (entry === undefined || !entry.handlers.delete(fn)) return false;
  if (onlisten) entry.onlisten.delete(onlisten);
  if (entry.handlers.size > 0) return false;
  channels.delete(channel);
  return true;
}
