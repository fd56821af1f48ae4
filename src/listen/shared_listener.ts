/**
 * LISTEN/NOTIFY for a client over an embedded server, which has one session: there is no
 * dedicated connection to open, so the channels are listened to on the client's own connection
 * (through its pool, in turn with its queries) and that connection's notifications come here.
 * A new connection starts a fresh session, so it listens to every channel again before it runs
 * anything else.
 */
import type { Notification } from "../protocol/backend.ts";
import type { PipelineRequest } from "../connection/requests/request.ts";
import { exec, quoteIdentifier, type Sink } from "../connection/requests/driver_queries.ts";
import {
  callOnlisten,
  type Channel,
  dispatchTo,
  type ListenHandle,
  type NotifyHandler,
  removeHandler,
} from "./listen.ts";

interface SharedChannel extends Channel {
  /** The session listens on it (its LISTEN succeeded): a new session must listen again. */
  listening: boolean;
}

/** The channels a client listens to on its one shared session. */
export class SharedListener {
  #sink: Sink;
  #session: () => { pid: number; secret: number };
  #channels = new Map<string, SharedChannel>();
  #ended = false;

  /** `sink` runs LISTEN and UNLISTEN (the pool); `session` tells the listening backend. */
  constructor(sink: Sink, session: () => { pid: number; secret: number }) {
    this.#sink = sink;
    this.#session = session;
  }

  /** A notification arrived on the shared connection. */
  dispatch(n: Notification): void {
    dispatchTo(this.#channels, n);
  }

  /**
   * What a new connection sends before anything else: LISTEN on every channel the previous
   * session listened on; each channel's `onlisten` runs once the server listens again.
   */
  relisten(): PipelineRequest[] {
    const requests: PipelineRequest[] = [];
    const capture: Sink = { send: (req) => requests.push(req) };
    for (const [name, channel] of this.#channels) {
      if (!channel.listening) continue;
      exec(capture, `listen ${quoteIdentifier(name)}`).then(
        () => {
          for (const f of channel.onlisten) callOnlisten(f, name);
        },
        () => {}, // the connection failed: the next one listens again
      );
    }
    return requests;
  }

  /** Adds a handler; resolves once the session listens on the channel. */
  async listen(channel: string, fn: NotifyHandler, onlisten?: () => void): Promise<ListenHandle> {
    let entry = this.#channels.get(channel);
    if (entry === undefined) {
      entry = { handlers: new Set(), onlisten: new Set(), listening: false };
      this.#channels.set(channel, entry);
    }
    entry.handlers.add(fn);
    if (onlisten) entry.onlisten.add(onlisten);
    if (!entry.listening) {
      try {
        await exec(this.#sink, `listen ${quoteIdentifier(channel)}`);
        entry.listening = true;
      } catch (e) {
        entry.handlers.delete(fn);
        if (onlisten) entry.onlisten.delete(onlisten);
        if (entry.handlers.size === 0) this.#channels.delete(channel);
        throw e;
      }
    }
    if (onlisten) callOnlisten(onlisten, channel);
    const session = this.#session;
    return {
      get state() {
        return session();
      },
      unlisten: () => this.#unlisten(channel, fn, onlisten),
    };
  }

  async #unlisten(channel: string, fn: NotifyHandler, onlisten?: () => void): Promise<void> {
    if (!removeHandler(this.#channels, channel, fn, onlisten)) return;
    if (!this.#ended) await exec(this.#sink, `unlisten ${quoteIdentifier(channel)}`);
  }

  /** Nothing to close: the session's end drops its listens. Later notifications go nowhere. */
  end(): Promise<void> {
    this.#ended = true;
    this.#channels.clear();
    return Promise.resolve();
  }
}
