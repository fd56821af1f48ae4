/**
 * Opens the byte stream to the server: TCP or a unix socket, with TLS per
 * libpq's sslmode rules.
 *
 * TLS goes through `node:tls`: `Deno.startTls` cannot skip verification (which
 * `prefer`, `require` and `verify-ca` need) and its handshake cannot be cut
 * short by a connect timeout without leaving the TCP socket open.
 */
import * as net from "node:net";
import * as tls from "node:tls";
import { ConnectionError } from "../errors.ts";
import { sslRequest } from "../protocol/frontend.ts";
import { Writer } from "../protocol/writer.ts";

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

/** Where and how to connect. */
export interface Endpoint {
  /** Host name or IP; a value starting with `/` is a unix socket directory. */
  host: string;
  /** TCP port (also names the unix socket file). */
  port: number;
  /** TLS policy. */
  sslmode: SslMode;
  /** Trusted CA certificates (PEM) for verification; the system roots when absent. */
  ca?: string[];
}

/** The minimal socket interface the connection needs. */
export interface Transport {
  /** Reads into `p`; resolves to the byte count, or null at end of stream. */
  read(p: Uint8Array): Promise<number | null>;
  /** Writes some of `p`; resolves to how many bytes were taken. */
  write(p: Uint8Array): Promise<number>;
  /** Closes the socket; pending reads end. */
  close(): void;
  /** Whether the stream is TLS-encrypted. */
  readonly encrypted: boolean;
}

/** The unix socket file for a socket directory and port, as libpq names it. */
export function socketPath(dir: string, port: number): string {
  return `${dir.replace(/\/$/, "")}/.s.PGSQL.${port}`;
}

function describe(endpoint: Endpoint): { address: string; port: number } {
  return { address: endpoint.host, port: endpoint.port };
}

/** Wraps a Deno connection, which already has the right shape. */
class DenoTransport implements Transport {
  #conn: Deno.Conn;
  readonly encrypted: boolean;
  constructor(conn: Deno.Conn, encrypted: boolean) {
    this.#conn = conn;
    this.encrypted = encrypted;
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

/** Adapts a node socket's events to pull-style reads, pausing it when we fall behind. */
class NodeTransport implements Transport {
  #socket: net.Socket;
  #chunks: Uint8Array[] = [];
  #buffered = 0;
  #ended = false;
  #error: Error | null = null;
  #wake: (() => void) | null = null;
  readonly encrypted: boolean;

  constructor(socket: net.Socket, encrypted: boolean, initial?: Uint8Array) {
    this.#socket = socket;
    this.encrypted = encrypted;
    if (initial && initial.length > 0) this.#push(initial);
    socket.on("data", (chunk: Uint8Array) => this.#push(chunk));
    socket.on("end", () => this.#finish(null));
    socket.on("close", () => this.#finish(null));
    socket.on("error", (e: Error) => this.#finish(e));
  }

  #push(chunk: Uint8Array): void {
    this.#chunks.push(chunk);
    this.#buffered += chunk.length;
    if (this.#buffered > 1 << 20) this.#socket.pause();
    this.#wake?.();
  }

  #finish(error: Error | null): void {
    if (error && !this.#error) this.#error = error;
    this.#ended = true;
    this.#wake?.();
  }

  async read(p: Uint8Array): Promise<number | null> {
    while (this.#chunks.length === 0) {
      if (this.#error) throw this.#error;
      if (this.#ended) return null;
      await new Promise<void>((resolve) => this.#wake = resolve);
      this.#wake = null;
    }
    let n = 0;
    while (n < p.length && this.#chunks.length > 0) {
      const chunk = this.#chunks[0];
      const take = Math.min(chunk.length, p.length - n);
      p.set(chunk.subarray(0, take), n);
      n += take;
      if (take === chunk.length) this.#chunks.shift();
      else this.#chunks[0] = chunk.subarray(take);
    }
    this.#buffered -= n;
    if (this.#buffered < 1 << 18) this.#socket.resume();
    return n;
  }

  write(p: Uint8Array): Promise<number> {
    // Copy: the caller reuses its buffer as soon as this resolves.
    const copy = p.slice();
    return new Promise((resolve, reject) => {
      this.#socket.write(copy, (e?: Error | null) => e ? reject(e) : resolve(copy.length));
    });
  }

  close(): void {
    this.#socket.destroy();
  }
}

async function tcpConnect(endpoint: Endpoint): Promise<Deno.TcpConn> {
  const conn = await Deno.connect({ hostname: endpoint.host, port: endpoint.port });
  // Pipelined requests are coalesced by us; Nagle would only add latency.
  conn.setNoDelay(true);
  conn.setKeepAlive(true);
  return conn;
}

function denoConnect(endpoint: Endpoint): Promise<Deno.Conn> {
  if (endpoint.host.startsWith("/")) {
    return Deno.connect({ transport: "unix", path: socketPath(endpoint.host, endpoint.port) });
  }
  return tcpConnect(endpoint);
}

/** Sends SSLRequest on a Deno socket and returns the server's one-byte answer. */
async function negotiateDeno(conn: Deno.Conn): Promise<number> {
  const w = new Writer(8);
  sslRequest(w);
  await conn.write(w.buf.subarray(0, w.length));
  const answer = new Uint8Array(64);
  const n = await conn.read(answer);
  if (n === null) throw new Error("server closed the connection during TLS negotiation");
  // Bytes after the answer would be unencrypted injection (CVE-2021-23222).
  if (n > 1) {
    throw new ConnectionError(
      "PROTOCOL_VIOLATION",
      "server sent unexpected data after its SSL answer",
    );
  }
  return answer[0];
}

/** Sends SSLRequest on a node socket; returns the answer and any bytes that followed it. */
function negotiateNode(socket: net.Socket): Promise<number> {
  return new Promise((resolve, reject) => {
    const onData = (chunk: Uint8Array) => {
      cleanup();
      // Bytes after the answer would be unencrypted injection (CVE-2021-23222).
      if (chunk.length > 1) {
        reject(
          new ConnectionError(
            "PROTOCOL_VIOLATION",
            "server sent unexpected data after its SSL answer",
          ),
        );
      } else resolve(chunk[0]);
    };
    const onError = (e: Error) => {
      cleanup();
      reject(e);
    };
    const onEnd = () => {
      cleanup();
      reject(new Error("server closed the connection during TLS negotiation"));
    };
    const cleanup = () => {
      socket.off("data", onData);
      socket.off("error", onError);
      socket.off("end", onEnd);
    };
    socket.on("data", onData);
    socket.on("error", onError);
    socket.on("end", onEnd);
    const w = new Writer(8);
    sslRequest(w);
    socket.write(w.buf.slice(0, w.length));
  });
}

function nodeConnect(endpoint: Endpoint): Promise<net.Socket> {
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

function nodeTls(
  socket: net.Socket,
  endpoint: Endpoint,
  verify: "none" | "chain" | "full",
): Promise<tls.TLSSocket> {
  return new Promise((resolve, reject) => {
    const isIp = net.isIP(endpoint.host) !== 0;
    const secure = tls.connect({
      socket,
      host: endpoint.host,
      ...(isIp ? {} : { servername: endpoint.host }),
      rejectUnauthorized: verify !== "none",
      ...(endpoint.ca ? { ca: endpoint.ca } : {}),
      // verify-ca checks the chain but, unlike verify-full, not the host name.
      ...(verify === "full" ? {} : { checkServerIdentity: () => undefined }),
    });
    secure.once("secureConnect", () => {
      secure.off("error", reject);
      resolve(secure);
    });
    secure.once("error", reject);
  });
}

/**
 * Endpoints that answered an SSLRequest with "S". `prefer` asks on a native
 * socket first (so plain servers keep the faster native transport) and, when
 * the server offers TLS, reconnects through node:tls; remembering the answer
 * spares later connections that extra connect.
 */
const offersTls = new Set<string>();

/** Closes whatever socket is being negotiated when the signal fires. */
class Negotiation {
  #close: (() => void) | null = null;
  #signal?: AbortSignal;
  constructor(signal?: AbortSignal) {
    this.#signal = signal;
    signal?.addEventListener("abort", () => this.#close?.(), { once: true });
  }
  /** Tracks `socket` as the one to close on abort (closing it at once if already aborted). */
  track<T>(socket: T, close: (s: T) => void): T {
    this.#close = () => {
      try {
        close(socket);
      } catch {
        // already closed
      }
    };
    if (this.#signal?.aborted) this.#close();
    return socket;
  }
  /** Negotiation is over: the caller owns the socket now. */
  done(): void {
    this.#close = null;
  }
}

async function tlsViaNode(
  endpoint: Endpoint,
  n: Negotiation,
  where: { address: string; port: number },
): Promise<Transport> {
  const mode = endpoint.sslmode;
  const socket = n.track(await nodeConnect(endpoint), (s) => s.destroy());
  const answer = await negotiateNode(socket).catch((e) => {
    socket.destroy();
    throw e;
  });
  if (answer === 0x4e) {
    offersTls.delete(`${endpoint.host}:${endpoint.port}`);
    socket.destroy();
    throw new ConnectionError(
      "SSL_NOT_SUPPORTED",
      `the server does not support TLS, but sslmode=${mode} requires it`,
      where,
    );
  }
  if (answer !== 0x53) {
    socket.destroy();
    throw new ConnectionError(
      "PROTOCOL_VIOLATION",
      `invalid answer to SSLRequest: ${answer}`,
      where,
    );
  }
  // require with a CA behaves like verify-ca (libpq: a root certificate turns verification on).
  const verify = mode === "verify-full"
    ? "full"
    : mode === "verify-ca" || (mode === "require" && endpoint.ca !== undefined)
    ? "chain"
    : "none";
  try {
    return new NodeTransport(await nodeTls(socket, endpoint, verify), true);
  } catch (e) {
    socket.destroy();
    throw new ConnectionError("SSL_FAILED", `TLS handshake failed: ${(e as Error).message}`, {
      ...where,
      cause: e,
    });
  }
}

/**
 * Connects and negotiates TLS as `endpoint.sslmode` says. `allow` is handled
 * by the caller (a plain attempt first, TLS on a second attempt). Unix sockets
 * never use TLS, as in libpq. Aborting `signal` closes the socket being
 * negotiated, so a connect timeout never leaves one behind.
 */
export async function openTransport(
  endpoint: Endpoint,
  tryTls: boolean,
  signal?: AbortSignal,
): Promise<Transport> {
  const where = describe(endpoint);
  const mode = endpoint.sslmode;
  const unix = endpoint.host.startsWith("/");
  const n = new Negotiation(signal);
  try {
    if (unix || !tryTls || mode === "disable") {
      const conn = n.track(await denoConnect(endpoint), (c) => c.close());
      n.done();
      return new DenoTransport(conn, false);
    }
    const key = `${endpoint.host}:${endpoint.port}`;
    if ((mode === "prefer" || mode === "allow") && !offersTls.has(key)) {
      const conn = n.track(await tcpConnect(endpoint), (c) => c.close());
      const answer = await negotiateDeno(conn).catch((e) => {
        conn.close();
        throw e;
      });
      if (answer === 0x4e) {
        n.done();
        return new DenoTransport(conn, false);
      }
      conn.close();
      if (answer !== 0x53) {
        throw new ConnectionError(
          "PROTOCOL_VIOLATION",
          `invalid answer to SSLRequest: ${answer}`,
          where,
        );
      }
      offersTls.add(key);
    }
    return await tlsViaNode(endpoint, n, where);
  } catch (e) {
    if (e instanceof ConnectionError) throw e;
    throw new ConnectionError(
      "CONNECT_FAILED",
      `could not connect to ${
        unix ? socketPath(endpoint.host, endpoint.port) : `${endpoint.host}:${endpoint.port}`
      }: ${(e as Error).message}`,
      { ...where, cause: e },
    );
  } finally {
    n.done();
  }
}
