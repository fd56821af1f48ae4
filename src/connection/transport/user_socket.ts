/**
 * The `socket` option: a connection over the socket the user's function returned (a node-style
 * socket or a Deno-style connection), instead of one we open. TLS over it is node:tls
 * (`Deno.startTls` needs a Deno TCP socket), and only when the sslmode requires it.
 */
import { ConnectionError, thrownText } from "../../errors.ts";
import { askDeno, askNode, type Negotiation } from "./negotiate.ts";
import type { Duplex } from "node:stream";
import { NodeSocketTransport } from "./node_socket.ts";
import { DenoConnTransport } from "./socket.ts";
import {
  type DenoLikeConn,
  type Endpoint,
  type NodeLikeSocket,
  PLAIN,
  type Transport,
  type Where,
} from "./transport.ts";

/** node:tls's transport, imported when a user's socket first needs TLS. */
const nodeTlsModule = () => import("./node_tls.ts");

function isNodeLike(x: unknown): x is NodeLikeSocket {
  const s = x as NodeLikeSocket | null;
  return typeof s === "object" && s !== null && typeof s.on === "function" &&
    typeof s.write === "function" && typeof s.destroy === "function";
}

function isDenoLike(x: unknown): x is DenoLikeConn {
  const c = x as DenoLikeConn | null;
  return typeof c === "object" && c !== null && typeof c.read === "function" &&
    typeof c.write === "function" && typeof c.close === "function";
}

/** The ConnectionErrors that wrap a value the user's `socket` function threw. */
const userFailures = new WeakSet<object>();

/**
 * The user's `socket` function failed: an Error is passed on as it is (it is
 * theirs); anything else thrown (a string, null) becomes a ConnectionError
 * whose message is that value.
 */
export function userFailure(value: unknown, where: Where): unknown {
  if (value instanceof Error) return value;
  const e = new ConnectionError("CONNECT_FAILED", thrownText(value), { ...where, cause: value });
  userFailures.add(e);
  return e;
}

/**
 * Whether `e` is what the user's `socket` function threw (wrapped when it was not an Error):
 * the pool does not retry it as an outage, so every caller gets it at once, the same way.
 * An Error carrying a socket code (`ECONNREFUSED` from their `net.connect`) is an outage.
 */
export function isUserFailure(e: unknown): boolean {
  return typeof e === "object" && e !== null && userFailures.has(e);
}

/**
 * A connection over `raw`, the socket the user's `socket` function returned.
 * TLS only when sslmode requires it (`require`, `verify-ca`, `verify-full`):
 * SSLRequest on that socket, then node:tls over it. `prefer` and `allow` stay
 * plain, so the socket carries the startup message first, as postgres.js does.
 */
export async function userTransport(
  raw: unknown,
  endpoint: Endpoint,
  n: Negotiation,
  where: Where,
): Promise<Transport> {
  const mode = endpoint.sslmode;
  const tlsRequired = mode === "require" || mode === "verify-ca" || mode === "verify-full";
  if (isNodeLike(raw)) {
    const socket = n.track(raw, (s) => s.destroy());
    if (socket.destroyed === true) {
      throw new ConnectionError(
        "CONNECTION_CLOSED",
        "the socket option's function returned a socket that is already closed",
        where,
      );
    }
    if (!tlsRequired) return new NodeSocketTransport(socket);
    const close = () => socket.destroy();
    const tls = await nodeTlsModule();
    if (endpoint.sslnegotiation === "direct") {
      return await tls.nodeTlsOver(socket as Duplex, endpoint, where, close);
    }
    const answer = await askNode(socket).catch((e) => {
      close();
      throw e;
    });
    return await tls.nodeTlsAnswered(socket as Duplex, answer, endpoint, where, close);
  }
  if (isDenoLike(raw)) {
    const conn = n.track(raw, (c) => c.close());
    if (!tlsRequired) return new DenoConnTransport(conn, PLAIN);
    const close = () => {
      try {
        conn.close();
      } catch {
        // already closed
      }
    };
    const tls = await nodeTlsModule();
    if (endpoint.sslnegotiation === "direct") {
      return await tls.nodeTlsOver(tls.connDuplex(conn), endpoint, where, close);
    }
    const answer = await askDeno(conn).catch((e) => {
      close();
      throw e;
    });
    return await tls.nodeTlsAnswered(tls.connDuplex(conn), answer, endpoint, where, close);
  }
  throw new ConnectionError(
    "CONNECT_FAILED",
    `the socket option's function must return a connected node:net Socket or Deno.Conn, got ${
      raw === null ? "null" : typeof raw
    }`,
    where,
  );
}
