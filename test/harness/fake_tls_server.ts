// A fake PostgreSQL server behind TLS, for the tests that play the attacker: a server with its
// own certificate that a client under sslmode=require does not verify. It answers the
// SSLRequest with 'S' (or takes direct TLS at once), runs node:tls's server side over the socket
// and hands each connection to `handle` as a Peer, exactly like fake_server.ts's plain one.
import * as net from "node:net";
import * as tls from "node:tls";
import { Peer, type PeerConn } from "./fake_server.ts";

const SSL_REQUEST = [0, 0, 0, 8, 4, 210, 22, 47];

/** A node socket as the three methods a Peer uses. */
class SocketConn implements PeerConn {
  #socket: tls.TLSSocket;
  #chunks: Uint8Array[] = [];
  #ended = false;
  #wake: (() => void) | null = null;

  constructor(socket: tls.TLSSocket) {
    this.#socket = socket;
    socket.on("data", (chunk: Uint8Array) => {
      this.#chunks.push(new Uint8Array(chunk));
      this.#wake?.();
    });
    const end = () => {
      this.#ended = true;
      this.#wake?.();
    };
    socket.on("end", end);
    socket.on("close", end);
    socket.on("error", end);
  }

  async read(p: Uint8Array): Promise<number | null> {
    while (this.#chunks.length === 0) {
      if (this.#ended) return null;
      await new Promise<void>((resolve) => this.#wake = resolve);
      this.#wake = null;
    }
    const chunk = this.#chunks[0];
    const n = Math.min(p.length, chunk.length);
    p.set(chunk.subarray(0, n));
    if (n === chunk.length) this.#chunks.shift();
    else this.#chunks[0] = chunk.subarray(n);
    return n;
  }

  write(p: Uint8Array): Promise<number> {
    return new Promise((resolve, reject) =>
      this.#socket.write(p.slice(), (e) => e ? reject(e) : resolve(p.length))
    );
  }

  close(): void {
    this.#socket.destroy();
  }
}

/** A listening fake TLS server. */
export interface FakeTlsServer {
  port: number;
  /** What each handler returned (or threw), in accept order. */
  results: Promise<unknown>[];
  close(): Promise<void>;
}

/** Reads the 8 bytes of an SSLRequest; rejects on anything else. */
function sslRequest(socket: net.Socket): Promise<void> {
  return new Promise((resolve, reject) => {
    let got = new Uint8Array(0);
    const onData = (chunk: Uint8Array) => {
      const joined = new Uint8Array(got.length + chunk.length);
      joined.set(got);
      joined.set(chunk, got.length);
      got = joined;
      if (got.length < 8) return;
      socket.off("data", onData);
      if (got.length > 8 || !SSL_REQUEST.every((b, i) => got[i] === b)) {
        reject(new Error("expected an SSLRequest"));
      } else resolve();
    };
    socket.on("data", onData);
    socket.once("error", reject);
    socket.once("close", () => reject(new Error("the client closed before its SSLRequest")));
  });
}

/**
 * A fake server on 127.0.0.1 whose TLS runs on `cert`/`key`; `handle` runs for each client
 * (index 0 for the first accepted). `direct`: the client starts TLS at once (no SSLRequest).
 */
export async function fakeTlsServer(
  handle: (peer: Peer, index: number) => Promise<unknown>,
  o: { cert: string; key: string; direct?: boolean },
): Promise<FakeTlsServer> {
  const results: Promise<unknown>[] = [];
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    const index = results.length;
    const result = (async () => {
      if (!o.direct) {
        await sslRequest(socket);
        socket.write(new TextEncoder().encode("S"));
      }
      const secure = new tls.TLSSocket(socket, {
        isServer: true,
        cert: o.cert,
        key: o.key,
        ...(o.direct ? { ALPNProtocols: ["postgresql"] } : {}),
      });
      await new Promise<void>((resolve, reject) => {
        secure.once("secure", resolve);
        secure.once("error", reject);
        // A client that refuses the certificate just closes.
        secure.once("close", () => reject(new Error("the client closed during the handshake")));
      });
      return await handle(new Peer(new SocketConn(secure)), index);
    })();
    result.catch(() => {}); // inspected through `results` when the test cares
    results.push(result);
  });
  server.listen(0, "127.0.0.1");
  await new Promise((resolve) => server.once("listening", resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    results,
    async close() {
      const closed = new Promise((resolve) => server.close(resolve));
      for (const socket of sockets) socket.destroy();
      await closed;
      await Promise.allSettled(results);
    },
  };
}
