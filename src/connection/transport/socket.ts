/**
 * Plain sockets: TCP and unix sockets opened through Deno, TCP through `node:net` (what `node:tls`
 * runs over), and a Deno-style connection (Deno's TCP, unix or native TLS connection, or one the
 * user's `socket` function returned) as a {@link Transport}.
 */
import type * as net from "node:net";
import { dnsModule, netModule } from "../../builtins.ts";
import {
  type DenoLikeConn,
  type Endpoint,
  socketPath,
  type StreamTraits,
  type Transport,
} from "./transport.ts";

/** A Deno-style connection, which already has the right shape, with what it tells about itself. */
export class DenoConnTransport implements Transport {
  #conn: DenoLikeConn;
  readonly tls: StreamTraits["tls"];
  readonly verified: boolean;
  readonly gatherWrites: boolean;
  readonly idleReadCosts: boolean;
  readonly serverCertificate: Uint8Array | null;
  constructor(conn: DenoLikeConn, traits: StreamTraits) {
    this.#conn = conn;
    this.tls = traits.tls;
    this.verified = traits.verified;
    this.gatherWrites = traits.gatherWrites;
    this.idleReadCosts = traits.idleReadCosts;
    this.serverCertificate = traits.serverCertificate;
  }
  read(p: Uint8Array): Promise<number | null> {
    return this.#conn.read(p);
  }
  write(p: Uint8Array): Promise<number> {
    return this.#conn.write(p);
  }
  close(): void {
    try {
      this.#conn.close();
    } catch {
      // already closed
    }
  }
}

/** Where TCP connects: libpq's `hostaddr` when given, else the host name. */
function tcpHost(endpoint: Endpoint): string {
  return endpoint.address ?? endpoint.host;
}

/** Whether the endpoint is a unix socket: a host starting with `/`, and no `hostaddr`. */
export function isUnix(endpoint: Endpoint): boolean {
  return endpoint.host.startsWith("/") && endpoint.address === undefined;
}

/**
 * Whether keep-alive needs node:net: only its socket takes the idle time before the first
 * probe (`Deno.TcpConn.setKeepAlive` turns probes on or off, with the system's timing).
 */
export function needsNodeSocket(endpoint: Endpoint): boolean {
  return endpoint.keepalive?.idleMs !== undefined;
}

/** A TCP connection through Deno, with Nagle off and keep-alive as the endpoint says (on). */
export async function tcpConnect(endpoint: Endpoint): Promise<Deno.TcpConn> {
  const conn = await Deno.connect({ hostname: tcpHost(endpoint), port: endpoint.port });
  // Pipelined requests are coalesced by us; Nagle would only add latency.
  conn.setNoDelay(true);
  conn.setKeepAlive(endpoint.keepalive?.enabled ?? true);
  return conn;
}

/** A unix socket (a host starting with `/` names its directory) or TCP connection through Deno. */
export function denoConnect(endpoint: Endpoint): Promise<Deno.Conn> {
  if (isUnix(endpoint)) {
    return Deno.connect({ transport: "unix", path: socketPath(endpoint.host, endpoint.port) });
  }
  return tcpConnect(endpoint);
}

/**
 * Where node:net connects. Deno's node:tls sends the name its socket connected to as SNI, whatever
 * it is told, so with `sslsni=0` the socket connects to the name's address, looked up first.
 */
async function nodeHost(endpoint: Endpoint): Promise<string> {
  const host = tcpHost(endpoint);
  if (endpoint.sni !== false || netModule().isIP(host) !== 0) return host;
  return (await dnsModule().lookup(host)).address;
}

/** A TCP connection through node:net (what node:tls runs over, and keep-alive with a delay). */
export async function nodeConnect(endpoint: Endpoint): Promise<net.Socket> {
  const host = await nodeHost(endpoint);
  return await new Promise((resolve, reject) => {
    const socket = netModule().connect({ host, port: endpoint.port });
    socket.setNoDelay(true);
    const keepalive = endpoint.keepalive ?? { enabled: true };
    socket.setKeepAlive(keepalive.enabled, keepalive.idleMs ?? 0);
    const closed = () => reject(new Error("the socket closed before it connected"));
    socket.once("connect", () => {
      socket.off("error", reject);
      socket.off("close", closed);
      resolve(socket);
    });
    socket.once("error", reject);
    socket.once("close", closed);
  });
}
