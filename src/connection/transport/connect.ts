/**
 * Opens the byte stream to the server, the one place that chooses what carries it: TCP or a unix
 * socket (`socket.ts`), with TLS per libpq's sslmode rules (`negotiate.ts`) on Deno's native TLS
 * (`native_tls.ts`) where its verification fits and `node:tls` (`node_tls.ts`) where it cannot,
 * or a socket the user's `socket` function returns (`user_socket.ts`). Whatever it chose, the
 * caller gets a {@link Transport}.
 *
 * The path choice: a process's first TLS connection to a server (no path known for it yet) goes
 * over node:tls, taught a secp256r1 key share (`tls_group.ts`), and its handshake tells whether
 * the native check would pass; later connections take the path remembered (`tls_paths.ts`).
 */
import { ConnectionError } from "../../errors.ts";
import {
  handshakeFailed,
  Negotiation,
  type TlsTarget,
  tlsTarget,
  verification,
} from "./negotiate.ts";
import { nativeTls } from "./native_tls.ts";
import { denoConnect, DenoConnTransport, isUnix, needsNodeSocket, nodeConnect } from "./socket.ts";
import { NodeSocketTransport } from "./node_socket.ts";
import { connectFailure } from "./socket_errors.ts";
import { knownPath, rememberPath } from "./tls_paths.ts";
import {
  type Endpoint,
  PLAIN,
  type StreamTraits,
  type Transport,
  type Where,
  whereOf,
} from "./transport.ts";
import { userFailure, userTransport } from "./user_socket.ts";
import { openEmbedded } from "./embedded.ts";

/**
 * node:tls's transport (and what it needs), imported on a process's first node:tls connection:
 * a plaintext or native TLS program never loads it.
 */
const nodeTlsModule = () => import("./node_tls.ts");

/**
 * Connects and negotiates TLS as `endpoint.sslmode` says. `allow` is handled
 * by the caller (a plain attempt first, TLS on a second attempt). Unix sockets
 * never use TLS, as in libpq. Aborting `signal` closes the socket being
 * negotiated, so a connect timeout never leaves one behind. A socket that
 * cannot be opened rejects with Node's code (`ECONNREFUSED`, `ENOTFOUND`, ...),
 * other failures with CONNECT_FAILED or a TLS code; with a `socket` function,
 * what it threw rejects as {@link userFailure} says.
 */
export async function openTransport(
  endpoint: Endpoint,
  tryTls: boolean,
  signal?: AbortSignal,
): Promise<Transport> {
  const where = whereOf(endpoint);
  if (endpoint.embedded !== undefined) {
    return new DenoConnTransport(await openEmbedded(endpoint.embedded, where), PLAIN);
  }
  const mode = endpoint.sslmode;
  const unix = isUnix(endpoint);
  const n = new Negotiation(signal);
  if (endpoint.socket !== undefined) {
    let raw: unknown;
    try {
      raw = await endpoint.socket({ host: endpoint.host, port: endpoint.port });
    } catch (e) {
      throw userFailure(e, where);
    }
    try {
      return await userTransport(raw, endpoint, n, where);
    } catch (e) {
      if (e instanceof ConnectionError) throw e;
      throw connectFailure(e, endpoint, where);
    } finally {
      n.done();
    }
  }
  try {
    if (unix || !tryTls || mode === "disable") return await plain(endpoint, n);
    if (nativeCannot(endpoint) !== null) {
      // Only node:tls can do what is asked; a server that says "N" to prefer/allow goes on plain
      // over the same socket.
      return (await (await nodeTlsModule()).nodeTls(endpoint, n, where, undefined, true))!;
    }
    const target = tlsTarget(endpoint);
    const known = knownPath(target);
    // Direct TLS with a check stays native: it needs PostgreSQL 17+, and 18 offers X25519, so
    // there is no HelloRetryRequest to spare, and without an SSLRequest node:tls's first teaching
    // has no server round trip to hide behind. (require without a CA took node:tls first
    // already: it checks nothing.)
    const first = known === undefined &&
      (endpoint.sslnegotiation !== "direct" || verification(mode, endpoint.ca) === "none");
    if (first) return await firstTls(endpoint, target, n, where);
    let nativeFailed = false;
    if (known !== "node") {
      const native = await nativeTls(endpoint, n, where);
      if (native !== null) return native;
      // The connect timeout fired during the native handshake: no second attempt.
      if (n.aborted) throw handshakeFailed(new Error("aborted"), endpoint, where);
      nativeFailed = true;
    }
    const secured = await (await nodeTlsModule()).nodeTls(endpoint, n, where);
    if (secured !== null) {
      if (nativeFailed) rememberPath(target, "node");
      return secured;
    }
    // prefer/allow, and the server said "N" although it offered TLS before
    // (ssl turned off since): connect plain.
    return await plain(endpoint, n);
  } catch (e) {
    if (e instanceof ConnectionError) throw e;
    throw connectFailure(e, endpoint, where);
  } finally {
    n.done();
  }
}

/**
 * The server offers only SCRAM-SHA-256-PLUS, which binds to its certificate, and only node:tls
 * shows it: from now on its connections take node:tls (a process's first one, on node:tls,
 * learns this before its handshake would send later ones native). Returns whether `stream` is a
 * TLS path that cannot show the certificate (native), so that a new connection to the server,
 * on node:tls, can bind where this one cannot. A user's socket runs node:tls already.
 */
export function onlyBindingOffered(endpoint: Endpoint, stream: StreamTraits): boolean {
  if (stream.tls === null || endpoint.socket !== undefined) return false;
  rememberPath(tlsTarget(endpoint), "node");
  return stream.tls === "native" && stream.serverCertificate === null;
}

/**
 * A plain connection: a unix socket or TCP through Deno, or TCP through node:net when keep-alive
 * needs its delay (see needsNodeSocket).
 */
async function plain(endpoint: Endpoint, n: Negotiation): Promise<Transport> {
  if (!isUnix(endpoint) && needsNodeSocket(endpoint)) {
    return new NodeSocketTransport(n.track(await nodeConnect(endpoint), (s) => s.destroy()));
  }
  return new DenoConnTransport(n.track(await denoConnect(endpoint), (c) => c.close()), PLAIN);
}

/**
 * Why Deno's native TLS cannot serve this endpoint, or null when it can. `Deno.startTls` takes a
 * host name, CAs and ALPN and nothing else, and its connection shows no certificate, so what asks
 * for more takes node:tls, for every connection:
 * - a client certificate (`Deno.connectTls` takes one, for direct TLS only, but its socket keeps
 *   Nagle's algorithm on, with no `setNoDelay`: pipelined writes would wait for ACKs);
 * - `channel_binding=require`, which binds SCRAM to the server's certificate;
 * - `sslsni=0` (rustls sends the name it verifies);
 * - TLS version bounds narrower than 1.2 to 1.3;
 * - a keep-alive idle time (only a node:net socket takes one, and startTls needs Deno's).
 */
function nativeCannot(endpoint: Endpoint): string | null {
  if (endpoint.clientCertificate !== undefined) return "a client certificate";
  if (endpoint.needsServerCertificate) return "channel_binding=require";
  if (endpoint.sni === false) return "sslsni=0";
  if (endpoint.minVersion === "TLSv1.3" || endpoint.maxVersion === "TLSv1.2") {
    return "TLS version bounds";
  }
  if (needsNodeSocket(endpoint)) return "keepalives_idle";
  return null;
}

/**
 * A process's first TLS connection to a server (no path known for it yet): node:tls, taught to
 * send the share PostgreSQL 17 and older take (tls_group.ts), so the handshake needs no
 * HelloRetryRequest, which Deno's native TLS cannot avoid and which costs a cold start a whole
 * network round trip; node:tls costs a few µs a round trip more. It verifies what the sslmode
 * asks, and its certificate tells whether the native check would pass: later connections go
 * native when it would, stay on node:tls when not. A certificate node:tls refuses (it trusts
 * only the CA given) is put to the native check (the default roots beside the CA) before the
 * connection fails, so a first connection accepts what a later native one would; if that check
 * refuses it too, node:tls's error (naming the host) is the one reported.
 */
async function firstTls(
  endpoint: Endpoint,
  target: TlsTarget,
  n: Negotiation,
  where: Where,
): Promise<Transport> {
  try {
    const secured = await (await nodeTlsModule()).nodeTls(
      endpoint,
      n,
      where,
      (native) => rememberPath(target, native ? "native" : "node"),
    );
    // `learn` given: "N" leaves the socket plain rather than resolving to null.
    return secured!;
  } catch (e) {
    if (n.aborted || !certificateRefused(e)) throw e;
    const native = await nativeTls(endpoint, n, where);
    if (native === null) throw e;
    rememberPath(target, "native");
    return native;
  }
}

/** Whether a failed node:tls handshake refused the server's certificate (its code says so). */
function certificateRefused(e: unknown): boolean {
  const code = (e as { cause?: { code?: unknown } } | null)?.cause?.code;
  return typeof code === "string" &&
    /CERT|VERIFY|SIGNATURE|ISSUER|SELF_SIGNED|CHAIN|ALTNAME/.test(code);
}
