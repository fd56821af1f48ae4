/**
 * Which TLS implementation each server needs, remembered for the process: Deno's native TLS
 * (`native_tls.ts`) wherever its check passes, `node:tls` (`node_tls.ts`) where it does not. A
 * process's first connection to a server tells (see `connect.ts`); until then no path is known.
 */
import type { TlsTarget } from "./negotiate.ts";
import type { TlsPath } from "./transport.ts";

/** Per server (and CA): the path that works, once a connection found out. */
const paths = new Map<string, TlsPath>();

/**
 * How long node:tls takes a server after a native handshake with it was cut short:
 * PostgreSQL's default authentication_timeout, after which the server gives up its side.
 */
const PARK_MS = 60_000;

/** Servers whose native handshake was cut short, and until when node:tls takes them. */
const parked = new Map<string, number>();

function key(t: TlsTarget): string {
  return `${t.name}:${t.port}@${t.address ?? ""}\n${t.ca?.join("\n") ?? ""}`;
}

/**
 * The path known to work for a server (`node` too while a native handshake with it that was
 * cut short may still hold a socket), or undefined when no connection found out yet.
 */
export function knownPath(t: TlsTarget): TlsPath | undefined {
  const k = key(t);
  const until = parked.get(k);
  if (until !== undefined) {
    if (until > Date.now()) return "node";
    parked.delete(k);
  }
  return paths.get(k);
}

/**
 * A native handshake was cut short (the connect timeout). Deno keeps its socket until that
 * handshake ends, i.e. until the server gives up (authentication_timeout); so for that long,
 * node:tls, whose sockets close at once, takes the server, and one that keeps stalling cannot
 * pile sockets up.
 */
export function parkNative(t: TlsTarget): void {
  parked.set(key(t), Date.now() + PARK_MS);
}

/** Remembers the path that works for a server. */
export function rememberPath(t: TlsTarget, path: TlsPath): void {
  paths.set(key(t), path);
}
