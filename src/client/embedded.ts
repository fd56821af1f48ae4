/**
 * What differs for a client over an embedded server (PGlite), which has one session:
 * `sql.listen` shares the client's connection (and a new connection listens again first), and
 * `sql.subscribe`, which needs a replication connection beside it, is refused.
 */
import type { Notification } from "../protocol/backend.ts";
import type { PipelineRequest } from "../connection/requests/request.ts";
import type { Sink } from "../connection/requests/driver_queries.ts";
import { QueryError } from "../errors.ts";
import { EMBEDDED_UNSUPPORTED, embeddedOptions } from "../config/embedded.ts";
import type { Options, ResolvedOptions } from "../config/options.ts";
import { SharedListener } from "../listen/shared_listener.ts";

/** The resolved options, checked and adjusted when they name an embedded server. */
export function withEmbedded(
  resolved: ResolvedOptions,
  options: Options | undefined,
  url: string | undefined,
): ResolvedOptions {
  return options?.embedded === undefined ? resolved : embeddedOptions(resolved, options, url);
}

/** The parts of a client over an embedded server that replace the ones for a server. */
export interface EmbeddedParts {
  /** `sql.listen`'s channels, on the client's own session. */
  listener: SharedListener;
  /** The connection's notifications: to the listener's handlers, then the `onnotify` option. */
  onnotify: (n: Notification) => void;
  /** What a new connection sends first: LISTEN again on every channel. */
  sessionStart: () => readonly PipelineRequest[];
  /** `sql.subscribe`: rejects. */
  subscribe: () => Promise<never>;
}

/**
 * The parts for `resolved.embedded`: `sink` runs the LISTENs (the pool), `session` tells the
 * connection's backend (`ListenHandle.state`).
 */
export function embeddedParts(
  resolved: ResolvedOptions,
  sink: Sink,
  session: () => { pid: number; secret: number },
): EmbeddedParts {
  const listener = new SharedListener(sink, session);
  const onnotify = resolved.onnotify;
  const name = resolved.embedded?.name ?? "an embedded server";
  return {
    listener,
    onnotify: (n) => {
      listener.dispatch(n);
      onnotify?.(n);
    },
    sessionStart: () => listener.relisten(),
    subscribe: () =>
      Promise.reject(
        new QueryError(
          EMBEDDED_UNSUPPORTED,
          `sql.subscribe cannot be used with an embedded server (${name}): it needs logical ` +
            "replication on a second connection, and the server has one session",
        ),
      ),
  };
}
