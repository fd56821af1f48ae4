/**
 * The TLS handshake, with libpq's sslmode rules, on one of two implementations:
 *
 * - Deno's own TLS (`Deno.startTls`, rustls): the faster one per round trip.
 *   It always verifies the chain and the host name, against the default roots
 *   plus the CA given, so it is kept, for every mode, wherever that
 *   verification passes: a check stronger than `require`, `prefer` or
 *   `verify-ca` ask is never wrong.
 * - `node:tls`, where the native check fails (a self-signed or private-CA
 *   server under `require`, `verify-ca` to a name the certificate does not
 *   carry, a certificate rustls refuses): it verifies exactly what the mode
 *   asks, with only the CA given as roots (libpq's `sslrootcert`). A server
 *   that needed it is remembered, so later connections go to it at once.
 *
 * A process's first connection to a server (except direct TLS with a check)
 * is taken on node:tls, taught a secp256r1 key share (tls_group.ts), which
 * spares PostgreSQL 17 and older a HelloRetryRequest on the cold start; that
 * handshake tells whether the certificate would pass the native check (a chain
 * to the default roots plus the CA, the host name), and later connections go
 * native when it would.
 *
 * `Deno.startTls` is never given `unsafelyDisableHostnameVerification`: with
 * the default roots still trusted beside the CA given, that would accept any
 * publicly trusted certificate, which `verify-ca` must refuse.
 */
import * as net from "node:net";
import * as tls from "node:tls";
import type { Duplex } from "node:stream";

/**
 * libpq's sslmode values.
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 * const sql = postgres("postgres://app@db.example.com/app?sslmode=verify-full");
 * ```
 */
export type SslMode = "disable" | "allow" | "prefer" | "require" | "verify-ca" | "verify-full";

/**
 * Which TLS implementation a connection runs on: `"native"` is Deno's own
 * (`Deno.startTls`, rustls), `"node"` is `node:tls`.
 *
 * @example
 * ```ts
 * import postgres, { type TlsPath } from "jsr:@pgpipe/pgpipe";
 * const sql = postgres("postgres://app@db.example.com/app?sslmode=verify-full");
 * const result = await sql`select 1 as one`;
 * const path: TlsPath | null | undefined = result.state?.tls; // null: not encrypted
 * console.log(path);
 * ```
 */
export type TlsPath = "native" | "node";

/** What node:tls checks: nothing, the chain only (verify-ca), or the chain and the host name. */
type Verification = "none" | "chain" | "full";

/** The check an sslmode asks for; `require` with a CA is `verify-ca`, as in libpq. */
export function verification(mode: SslMode, ca: string[] | undefined): Verification {
  if (mode === "verify-full") return "full";
  if (mode === "verify-ca" || (mode === "require" && ca !== undefined)) return "chain";
  return "none";
}

/** What a handshake needs to know about the server and the policy. */
export interface TlsTarget {
  host: string;
  port: number;
  sslmode: SslMode;
  ca?: string[];
  /** ALPN protocols to offer (direct TLS offers `postgresql`). */
  alpn?: string[];
}

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
  return `${t.host}:${t.port}\n${t.ca?.join("\n") ?? ""}`;
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

/**
 * Whether the certificate of a node:tls connection made without a check would pass the
 * native one: its chain verified against the default roots (node computes that anyway) and it
 * names the host in a subjectAltName (node's check falls back to the subject's CN where there
 * is none; rustls does not, so a CN-only certificate stays on node:tls).
 */
export function wouldPassNatively(
  socket: Pick<tls.TLSSocket, "authorized" | "getPeerCertificate">,
  host: string,
): boolean {
  if (!socket.authorized) return false;
  try {
    const cert = socket.getPeerCertificate();
    if (!/(?:^|, )(?:DNS|IP Address):/.test(cert.subjectaltname ?? "")) return false;
    return tls.checkServerIdentity(host, cert) === undefined;
  } catch {
    return false;
  }
}

/**
 * The native handshake on a connected TCP socket (after the server said "S",
 * or at once for direct TLS). `track` receives the TLS connection as soon as
 * it exists, so an abort (the connect timeout) closes it mid-handshake.
 * Resolves to the connection and the ALPN protocol the server chose.
 */
export async function nativeHandshake(
  conn: Deno.TcpConn,
  t: TlsTarget,
  track: (c: Deno.TlsConn) => void,
): Promise<{ conn: Deno.TlsConn; alpn: string | null }> {
  // The socket must have setNoDelay(true) already: else every handshake stalls ~40 ms
  // (Nagle against the server's delayed ACK).
  const secured = await Deno.startTls(conn, {
    hostname: t.host,
    ...(t.ca ? { caCerts: t.ca } : {}),
    ...(t.alpn ? { alpnProtocols: t.alpn } : {}),
  });
  track(secured);
  const info = await secured.handshake();
  return { conn: secured, alpn: info.alpnProtocol };
}

/** node:tls's options for a handshake with `t`, verifying what the mode asks (no socket yet). */
export function nodeOptions(t: TlsTarget): tls.ConnectionOptions {
  const verify = verification(t.sslmode, t.ca);
  const isIp = net.isIP(t.host) !== 0;
  return {
    host: t.host,
    ...(isIp ? {} : { servername: t.host }),
    rejectUnauthorized: verify !== "none",
    ...(t.ca ? { ca: t.ca } : {}),
    ...(t.alpn ? { ALPNProtocols: t.alpn } : {}),
    // verify-ca checks the chain but, unlike verify-full, not the host name.
    ...(verify === "full" ? {} : { checkServerIdentity: () => undefined }),
  };
}

/** The node:tls handshake over `socket`, verifying what the mode asks. */
export function nodeHandshake(socket: Duplex, t: TlsTarget): Promise<tls.TLSSocket> {
  return new Promise((resolve, reject) => {
    const secure = tls.connect({ ...nodeOptions(t), socket });
    secure.once("secureConnect", () => {
      secure.off("error", reject);
      resolve(secure);
    });
    secure.once("error", reject);
  });
}
