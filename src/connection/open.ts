/**
 * Around a connection's start (the transport, then the startup conversation the pipeline
 * carries): libpq's sslmode fallbacks (`allow`: plain first, TLS if the server refuses; `prefer`:
 * TLS first, plain if TLS fails), a second attempt on a TLS path that can bind for a server that
 * offers only SCRAM-SHA-256-PLUS, the connect timeout over the transport and the startup
 * together, and what a failed start rejects with.
 */
import { unrefTimeout } from "../builtins.ts";
import { ProtocolViolation } from "../protocol/backend.ts";
import { ConnectionError, PostgresError } from "../errors.ts";
import { bindsElsewhere } from "./authentication.ts";
import { socketErrorInfo } from "./transport/socket_errors.ts";
import { type Endpoint, socketPath, type Where, whereOf } from "./transport/transport.ts";

/** The connect timeout: milliseconds (0 for none), or a function read at each attempt. */
export interface ConnectTimeout {
  connectTimeout: number | (() => number);
}

/** The connect timeout in ms for an attempt starting now; throws a TypeError for a bad value. */
export function connectTimeoutMs(options: ConnectTimeout): number {
  const value = options.connectTimeout;
  const ms = typeof value === "function" ? value() : value;
  if (typeof ms !== "number" || !(ms >= 0)) {
    throw new TypeError(`invalid connect_timeout: ${ms} ms (use a number of seconds, 0 for none)`);
  }
  return ms;
}

/** postgres.js's CONNECT_TIMEOUT error: `write CONNECT_TIMEOUT host:port` (or the socket path). */
export function connectTimeoutError(e: Endpoint, cause?: unknown): ConnectionError {
  const target = e.host.startsWith("/") && e.socket === undefined
    ? socketPath(e.host, e.port)
    : `${e.host}:${e.port}`;
  return new ConnectionError("CONNECT_TIMEOUT", `write CONNECT_TIMEOUT ${target}`, {
    ...whereOf(e),
    cause,
  });
}

/**
 * Runs `attempt` (`tryTls`: whether to ask for TLS) as the sslmode says: `allow` plain first,
 * then TLS if the server refused the session; `prefer` TLS first, then plain if TLS failed. And
 * once more on the same terms when a server offering only SCRAM-SHA-256-PLUS met a TLS path that
 * cannot show its certificate: the path memory sends the new attempt to one that can.
 */
export async function withFallbacks<T>(
  endpoint: Endpoint,
  attempt: (tryTls: boolean) => Promise<T>,
): Promise<T> {
  const mode = endpoint.sslmode;
  let tryTls = mode !== "allow";
  let fellBack = false;
  let rebound = false;
  for (;;) {
    try {
      return await attempt(tryTls);
    } catch (e) {
      if (!rebound && bindsElsewhere(e)) {
        rebound = true;
        continue;
      }
      const retryPlain = mode === "prefer" && tryTls && e instanceof ConnectionError &&
        e.code === "SSL_FAILED";
      // allow: the server refused the plain attempt, or the client did (channel_binding=require
      // cannot bind without TLS; nothing was sent): TLS may do.
      const retryTls = mode === "allow" && !tryTls &&
        (e instanceof PostgresError ||
          (e instanceof ConnectionError && e.code === "AUTH_REFUSED"));
      // A user's socket is plain under prefer and allow (see openTransport): nothing to retry.
      if (fellBack || (!retryPlain && !retryTls) || endpoint.socket !== undefined) throw e;
      fellBack = true;
      tryTls = retryTls;
    }
  }
}

/** A connection's start, as {@link startWithin} drives it; `T` is the connection. */
export interface Start<T> {
  /** Opens the transport and runs the startup; aborting `signal` closes a socket being negotiated. */
  run(signal: AbortSignal): Promise<void>;
  /** Whether the transport was opened (what fails after that is the startup's doing). */
  opened(): boolean;
  /** Closes the transport, if there is one yet. */
  close(): void;
  /** The start failed with `err`: what was claimed meanwhile goes back, or fails. */
  abandon(err: Error): void;
  /** The start succeeded: the connection goes live. */
  ready(): T;
}

/**
 * Runs `start` within the connect timeout (read now: it may change between attempts), and
 * resolves to the live connection. On a timeout the socket being negotiated is closed and the
 * start rejects with CONNECT_TIMEOUT; on any failure, with {@link startupError}'s error.
 */
export async function startWithin<T>(
  options: ConnectTimeout & { endpoint: Endpoint },
  start: Start<T>,
): Promise<T> {
  const timeoutMs = connectTimeoutMs(options);
  let cancelTimer: (() => void) | undefined;
  const abort = new AbortController();
  const work = start.run(abort.signal);
  try {
    if (timeoutMs > 0) {
      const timeout = new Promise<never>((_, reject) => {
        // Unreferenced: the socket being opened keeps the process alive meanwhile.
        cancelTimer = unrefTimeout(timeoutMs, () => {
          abort.abort();
          start.close();
          reject(connectTimeoutError(options.endpoint));
        });
      });
      work.catch(() => {}); // its failure after a timeout is already reported
      await Promise.race([work, timeout]);
    } else {
      await work;
    }
  } catch (e) {
    start.close();
    const err = startupError(e, start.opened(), whereOf(options.endpoint));
    start.abandon(err);
    throw err;
  } finally {
    cancelTimer?.();
  }
  return start.ready();
}

/** What a failed startup rejects with: typed errors as they are, anything else as a ConnectionError. */
function startupError(e: unknown, opened: boolean, where: Where): Error {
  // openTransport's errors are already what the caller should see (a user's socket
  // function may have thrown its own).
  if (!opened || e instanceof ConnectionError || e instanceof PostgresError) return e as Error;
  if (e instanceof ProtocolViolation) {
    return new ConnectionError("PROTOCOL_VIOLATION", e.message, { ...where, cause: e });
  }
  // A socket from the `socket` option may still be connecting: its connect error
  // (ECONNREFUSED, ...) surfaces on the first write, and keeps its code.
  const failed = connectErrorOf(e);
  if (failed !== null) {
    return new ConnectionError(failed.code, (e as Error).message, {
      ...where,
      cause: e,
      errno: failed.errno,
      syscall: failed.syscall,
    });
  }
  return new ConnectionError(
    "CONNECTION_CLOSED",
    `connection lost during startup: ${(e as Error)?.message ?? e}`,
    { ...where, cause: e },
  );
}

/** Node's code, errno and syscall when `e` is a node socket's failure to connect, else null. */
function connectErrorOf(e: unknown): ReturnType<typeof socketErrorInfo> {
  const syscall = (e as { syscall?: unknown } | null)?.syscall;
  if (syscall !== "connect" && syscall !== "getaddrinfo") return null;
  return socketErrorInfo(e);
}
