/**
 * Plain sockets: TCP and unix sockets opened through Deno, TCP through `node:net` (what `node:tls`
 * runs over), and a Deno-style connection (Deno's TCP, unix or native TLS connection, or one the
 * user's `socket` function returned) as a {@link Transport}.
 */
import * as net from "node:net";
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
  constructor(conn: DenoLikeConn, traits: StreamTraits) {
    this.#conn = conn;
    this.tls = traits.tls;
    this.verified = traits.verified;
    this.gatherWrites = traits.gatherWrites;
    this.idleReadCosts = traits.idleReadCosts;
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

/** A TCP connection through Deno, with Nagle off and keepalive on. */
export async function tcpConnect(endpoint: Endpoint): Promise<Deno.TcpConn> {
  const conn = await Deno.connect({ hostname: endpoint.host, port: endpoint.port });
  // Pipelined requests are coalesced by us; Nagle would only add latency.
  conn.setNoDelay(true);
  conn.setKeepAlive(true);
  return conn;
}

/** A unix socket (a host starting with `/` names its directory) or TCP connection through Deno. */
export function denoConnect(endpoint: Endpoint): Promise<Deno.Conn> {
  if (endpoint.host.startsWith("/")) {
    return Deno.connect({ transport: "unix", path: socketPath(endpoint.host, endpoint.port) });
  }
  return tcpConnect(endpoint);
}

/** A TCP connection through node:net, for node:tls to run over. */
export function nodeConnect(endpoint: Endpoint): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: endpoint.host, port: endpoint.port });
    socket.setNoDelay(true);
    socket.setKeepAlive(true);
    socket.once("connect", () => {
      socket.off("error", reject);
      resolve(socket);
    });
    socket.once("error", reject);
  });
}
