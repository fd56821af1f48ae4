/**
 * Deno's own TLS (`Deno.startTls`, rustls): the faster of the two implementations per round trip.
 * It always verifies the chain and the host name, against the default roots plus the CA given,
 * so it is kept, for every sslmode, wherever that verification passes: a check stronger than
 * `require`, `prefer` or `verify-ca` ask is never wrong. Where it fails, `node_tls.ts` takes over.
 *
 * `Deno.startTls` is never given `unsafelyDisableHostnameVerification`: with the default roots
 * still trusted beside the CA given, that would accept any publicly trusted certificate, which
 * `verify-ca` must refuse.
 */
import {
  askDeno,
  checkAlpn,
  handshakeFailed,
  mayStayPlain,
  type Negotiation,
  refused,
  type TlsTarget,
  tlsTarget,
  WILL_ENCRYPT,
  WONT_ENCRYPT,
} from "./negotiate.ts";
import { DenoConnTransport, tcpConnect } from "./socket.ts";
import { parkNative } from "./tls_paths.ts";
import {
  type Endpoint,
  PLAIN,
  type StreamTraits,
  type Transport,
  type Where,
} from "./transport.ts";

/**
 * A native TLS stream: the server authenticated (chain and host name, always), and its records
 * read and written one per call (see {@link StreamTraits}).
 */
const NATIVE: StreamTraits = {
  tls: "native",
  verified: true,
  gatherWrites: true,
  idleReadCosts: true,
  serverCertificate: null,
};

/**
 * The native handshake on a connected TCP socket (after the server said "S",
 * or at once for direct TLS). `track` receives the TLS connection as soon as
 * it exists, so an abort (the connect timeout) closes it mid-handshake.
 * Resolves to the connection and the ALPN protocol the server chose.
 */
async function nativeHandshake(
  conn: Deno.TcpConn,
  t: TlsTarget,
  track: (c: Deno.TlsConn) => void,
): Promise<{ conn: Deno.TlsConn; alpn: string | null }> {
  // The socket must have setNoDelay(true) already: else every handshake stalls ~40 ms
  // (Nagle against the server's delayed ACK).
  const secured = await Deno.startTls(conn, {
    hostname: t.name,
    ...(t.ca ? { caCerts: t.ca } : {}),
    ...(t.alpn ? { alpnProtocols: t.alpn } : {}),
  });
  track(secured);
  const info = await secured.handshake();
  return { conn: secured, alpn: info.alpnProtocol };
}

/**
 * Native TLS on a fresh TCP socket: SSLRequest (unless direct), then
 * `Deno.startTls`. Resolves to a plain transport when the server answers "N"
 * and sslmode accepts that, and to null when the native check refused the
 * server's certificate (the caller then tries node:tls, which verifies only
 * what sslmode asks).
 */
export async function nativeTls(
  endpoint: Endpoint,
  n: Negotiation,
  where: Where,
): Promise<Transport | null> {
  const conn = n.track(await tcpConnect(endpoint), (c) => c.close());
  let secured: Deno.TlsConn | undefined;
  const close = () => {
    try {
      (secured ?? conn).close();
    } catch {
      // already closed, or consumed by startTls
    }
  };
  if (endpoint.sslnegotiation !== "direct") {
    const answer = await askDeno(conn).catch((e) => {
      close();
      throw e;
    });
    if (answer === WONT_ENCRYPT && mayStayPlain(endpoint.sslmode)) {
      return new DenoConnTransport(conn, PLAIN);
    }
    if (answer !== WILL_ENCRYPT) {
      close();
      throw refused(answer, endpoint.sslmode, where);
    }
  }
  let alpn: string | null;
  const target = tlsTarget(endpoint);
  try {
    ({ alpn } = await nativeHandshake(conn, target, (c) => {
      secured = n.track(c, (s) => {
        // Cut short by the timeout: Deno keeps this socket until the handshake ends.
        parkNative(target);
        s.close();
      });
    }));
  } catch (e) {
    close();
    // A certificate the native check refused (rustls: InvalidData, "invalid peer
    // certificate: ..."): node:tls may accept it under this sslmode. Anything else is final.
    if (e instanceof Error && e.name === "InvalidData" && /certificate/i.test(e.message)) {
      return null;
    }
    throw handshakeFailed(e, endpoint, where);
  }
  try {
    checkAlpn(endpoint, alpn, where);
  } catch (e) {
    close();
    throw e;
  }
  return new DenoConnTransport(secured!, NATIVE);
}
