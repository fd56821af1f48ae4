/**
 * `node:tls`: verifies exactly what the sslmode asks, with only the CA given as roots (libpq's
 * `sslrootcert`). It takes the servers where Deno's native check (`native_tls.ts`) fails: a
 * self-signed or private-CA server under `require`, `verify-ca` to a name the certificate does not
 * carry, a certificate rustls refuses. It also takes a process's first connection to a server
 * (except direct TLS with a check), taught a secp256r1 key share first (`tls_group.ts`), which
 * spares PostgreSQL 17 and older a HelloRetryRequest on the cold start; that handshake tells
 * whether the certificate would pass the native check (a chain to the default roots plus the CA,
 * the host name), and later connections go native when it would (`connect.ts`, `tls_paths.ts`).
 * And it runs over a socket the user's `socket` function returned (`Deno.startTls` needs a Deno
 * TCP socket), through {@link connDuplex} when that is a Deno-style connection.
 */
import type * as tls from "node:tls";
import type { Duplex } from "node:stream";
import { netModule, streamModule, tlsModule } from "../../builtins.ts";
import {
  askNode,
  checkAlpn,
  closedDuringNegotiation,
  handshakeFailed,
  mayStayPlain,
  type Negotiation,
  refused,
  type TlsTarget,
  tlsTarget,
  verification,
  WILL_ENCRYPT,
  WONT_ENCRYPT,
} from "./negotiate.ts";
import { NodeSocketTransport, type ReadSwitch } from "./node_socket.ts";
import { nodeConnect } from "./socket.ts";
import { preferP256 } from "./tls_group.ts";
import type { DenoLikeConn, Endpoint, Transport, Where } from "./transport.ts";

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
    return tlsModule().checkServerIdentity(host, cert) === undefined;
  } catch {
    return false;
  }
}

/** The server's certificate (DER) from a node:tls socket, for channel binding; null if none. */
function certificateOf(socket: tls.TLSSocket): Uint8Array | null {
  try {
    const raw = socket.getPeerCertificate().raw as Uint8Array | undefined;
    return raw instanceof Uint8Array && raw.length > 0 ? new Uint8Array(raw) : null;
  } catch {
    return null;
  }
}

/**
 * The `host` node:tls is told when no SNI may go out (`sslsni=0`): an IP address, for which
 * neither node nor rustls sends a server name. The name is still checked (checkServerIdentity).
 */
const NO_SNI = "0.0.0.0";

/**
 * node:tls's options for a handshake with `t`, verifying what the mode asks (no socket yet):
 * the name the certificate must carry (and SNI sends, unless it is an IP or sslsni=0), the client
 * certificate, the TLS version bounds.
 */
function nodeOptions(t: TlsTarget): tls.ConnectionOptions {
  const verify = verification(t.sslmode, t.ca);
  const isIp = netModule().isIP(t.name) !== 0;
  const sendsName = t.sni && !isIp;
  return {
    host: t.sni ? t.name : NO_SNI,
    ...(sendsName ? { servername: t.name } : {}),
    rejectUnauthorized: verify !== "none",
    ...(t.ca ? { ca: t.ca } : {}),
    ...(t.alpn ? { ALPNProtocols: t.alpn } : {}),
    ...(t.clientCertificate ? t.clientCertificate : {}),
    minVersion: t.minVersion,
    maxVersion: t.maxVersion,
    // verify-ca checks the chain but, unlike verify-full, not the host name; verify-full checks
    // the name asked for, whatever node:tls was told as `host`.
    checkServerIdentity: verify === "full"
      ? (_host, cert) => tlsModule().checkServerIdentity(t.name, cert)
      : () => undefined,
  };
}

/**
 * The node:tls handshake over `socket`, verifying what the mode asks. A socket closed under it
 * without an error (a user's, destroyed by its owner) ends the handshake at once: Deno's node:tls
 * then closes the TLS socket and says nothing else.
 */
function nodeHandshake(socket: Duplex, t: TlsTarget): Promise<tls.TLSSocket> {
  return new Promise((resolve, reject) => {
    const secure = tlsModule().connect({ ...nodeOptions(t), socket });
    const closed = () => reject(closedDuringNegotiation());
    secure.once("secureConnect", () => {
      secure.off("error", reject);
      secure.off("close", closed);
      socket.off("close", closed);
      resolve(secure);
    });
    secure.once("error", reject);
    secure.once("close", closed);
    socket.once("close", closed);
  });
}

/**
 * A Deno-style connection as a node duplex, so node:tls can run over it. It
 * reads the connection only when node asks for more, and not at all between
 * `readStop` and `readStart` (node:tls asks all the time, even while paused).
 */
export function connDuplex(conn: DenoLikeConn): Duplex & ReadSwitch {
  return new (connDuplexClass ??= makeConnDuplex())(conn);
}

/** The class, made on first use: node:stream loads only when a connection needs node:tls. */
let connDuplexClass: ReturnType<typeof makeConnDuplex> | undefined;

function makeConnDuplex() {
  return class ConnDuplex extends streamModule().Duplex implements ReadSwitch {
    #conn: DenoLikeConn;
    #stopped = false;
    #asked = 0; // what node asked for while stopped, pulled on readStart

    constructor(conn: DenoLikeConn) {
      super();
      this.#conn = conn;
    }

    override _read(size: number): void {
      if (this.#stopped) this.#asked = size;
      else this.#pull(size);
    }

    #pull(size: number): void {
      const buf = new Uint8Array(Math.max(size, 16384));
      this.#conn.read(buf).then(
        (n) => this.push(n === null ? null : buf.subarray(0, n)),
        (e) => this.destroy(e),
      );
    }

    readStop(): void {
      this.#stopped = true;
    }

    readStart(): void {
      this.#stopped = false;
      const asked = this.#asked;
      this.#asked = 0;
      if (asked > 0) this.#pull(asked);
    }

    override _write(chunk: Uint8Array, _encoding: string, done: (e?: Error | null) => void): void {
      (async () => {
        for (let off = 0; off < chunk.length;) off += await this.#conn.write(chunk.subarray(off));
      })().then(() => done(), done);
    }

    override _destroy(err: Error | null, done: (e?: Error | null) => void): void {
      try {
        this.#conn.close();
      } catch {
        // already closed
      }
      done(err);
    }
  };
}

/**
 * What stops the reading of `socket`, beneath a node:tls socket: our own ConnDuplex, or a
 * node:net Socket's native handle (`_handle`, looked up each time: it goes when the socket
 * closes); null for another JS stream or a closed socket.
 */
function readSwitch(socket: unknown): ReadSwitch | null {
  if (connDuplexClass !== undefined && socket instanceof connDuplexClass) return socket;
  const handle = (socket as { _handle?: Partial<ReadSwitch> | null } | null)?._handle;
  return typeof handle?.readStop === "function" && typeof handle.readStart === "function"
    ? handle as ReadSwitch
    : null;
}

/**
 * node:tls over `socket`, which the server agreed to encrypt; `close` closes it if that fails.
 * `learn` is told whether the server's certificate would pass the native check.
 */
export async function nodeTlsOver(
  socket: Duplex,
  endpoint: Endpoint,
  where: Where,
  close: () => void,
  learn?: (native: boolean) => void,
): Promise<Transport> {
  let secured;
  try {
    secured = await nodeHandshake(socket, tlsTarget(endpoint));
  } catch (e) {
    close();
    throw handshakeFailed(e, endpoint, where);
  }
  try {
    checkAlpn(endpoint, secured.alpnProtocol, where);
  } catch (e) {
    secured.destroy();
    throw e;
  }
  // A certificate the native check would accept authenticates the server as well as that check
  // does, whatever the sslmode asked.
  const target = tlsTarget(endpoint);
  const native = wouldPassNatively(secured, target.name);
  learn?.(native);
  const verified = native || verification(endpoint.sslmode, endpoint.ca) !== "none";
  // node:tls reads by events (nothing to spare on an idle read) and gained nothing measurable
  // from gathered writes.
  return new NodeSocketTransport(
    secured,
    {
      tls: "node",
      verified,
      gatherWrites: false,
      idleReadCosts: false,
      serverCertificate: certificateOf(secured),
    },
    () => readSwitch(socket),
  );
}

/** Finishes TLS over a user's socket whose SSLRequest got `answer`. */
export function nodeTlsAnswered(
  socket: Duplex,
  answer: number,
  endpoint: Endpoint,
  where: Where,
  close: () => void,
): Promise<Transport> {
  if (answer !== WILL_ENCRYPT) {
    close();
    throw refused(answer, endpoint.sslmode, where);
  }
  return nodeTlsOver(socket, endpoint, where, close);
}

/**
 * TLS through node:tls on a fresh node:net socket (after an SSLRequest, or at
 * once for direct TLS). When the server answers "N" and sslmode accepts plain
 * (`prefer`, `allow`): on a first connection (`learn` given) the socket goes on
 * plain (a reconnect would cost the cold start a round trip) and later
 * connections go native, which keeps its socket on "N"; otherwise the server
 * needed node:tls before but has stopped offering TLS (ssl=off and a reload),
 * and this resolves to null, so the caller connects plain instead of failing. `keepPlain` keeps
 * the socket plain on "N" without `learn` (an endpoint only node:tls serves: nothing to learn).
 */
export async function nodeTls(
  endpoint: Endpoint,
  n: Negotiation,
  where: Where,
  learn?: (native: boolean) => void,
  keepPlain = learn !== undefined,
): Promise<Transport | null> {
  // Taught (once per host) while a round trip is under way: the first handshake then needs no
  // HelloRetryRequest from PostgreSQL 17 and older (tls_group.ts). The first teaching in a
  // process takes ~20 ms of CPU (Deno loading node:tls and starting rustls), so it runs once a
  // packet has left: the SSLRequest (whose answer can only come from the server, while a connect
  // may be answered by a nearby proxy at once), or for direct TLS the connect.
  const teach = () => preferP256(nodeOptions(tlsTarget(endpoint)));
  let taught: Promise<void> | undefined;
  const connecting = nodeConnect(endpoint);
  if (endpoint.sslnegotiation === "direct") taught = teach();
  const socket = n.track(await connecting, (s) => s.destroy());
  const close = () => socket.destroy();
  if (endpoint.sslnegotiation === "direct") {
    await taught;
    return await nodeTlsOver(socket, endpoint, where, close, learn);
  }
  // prefer and allow are also what a plain server (local development) gets by default: teach
  // only once the server has said it speaks TLS, so "N" never pays for the teaching.
  const plainAllowed = mayStayPlain(endpoint.sslmode);
  const answer = await askNode(socket, () => {
    if (!plainAllowed) taught = teach();
  }).catch((e) => {
    close();
    throw e;
  });
  if (answer === WILL_ENCRYPT) await (taught ?? teach());
  if (answer === WONT_ENCRYPT && plainAllowed) {
    if (keepPlain) {
      learn?.(true);
      return new NodeSocketTransport(socket);
    }
    close();
    return null;
  }
  if (answer !== WILL_ENCRYPT) {
    close();
    throw refused(answer, endpoint.sslmode, where);
  }
  return await nodeTlsOver(socket, endpoint, where, close, learn);
}
