/**
 * Opens the byte stream to the server: TCP or a unix socket, with TLS per
 * libpq's sslmode rules (`tls.ts`: Deno's native TLS where its verification
 * fits, node:tls where it cannot), or a socket the user's `socket` function
 * returns (TLS over it is node:tls: `Deno.startTls` needs a Deno TCP socket).
 */
import * as net from "node:net";
import { Duplex } from "node:stream";
import { ConnectionError, isSocketErrorCode, type SocketErrorCode } from "../../errors.ts";
import { sslRequest } from "../../protocol/frontend.ts";
import { Writer } from "../../protocol/writer.ts";
import {
  knownPath,
  nativeHandshake,
  nodeHandshake,
  nodeOptions,
  parkNative,
  rememberPath,
  type SslMode,
  type TlsPath,
  type TlsTarget,
  verification,
  wouldPassNatively,
} from "./tls.ts";
import { preferP256 } from "./tls_group.ts";
import { type EmbeddedServer, openEmbedded } from "./embedded.ts";

export type { SslMode };

/**
 * libpq's `sslnegotiation`: `postgres` (the default) sends an SSLRequest and
 * starts TLS once the server agrees; `direct` starts the TLS handshake at
 * once, with ALPN `postgresql`, one round trip sooner. `direct` needs
 * PostgreSQL 17 or later and `sslmode` `require`, `verify-ca` or
 * `verify-full` (it never falls back to a plain connection).
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 * const sql = postgres("postgres://app@db.example.com/app?sslmode=verify-full&sslnegotiation=direct");
 * ```
 */
export type SslNegotiation = "postgres" | "direct";

/**
 * A node-style socket (a `node:net` Socket, or any duplex with the same
 * events), already connected, as the `socket` option may return it.
 *
 * @example
 * ```ts
 * import * as net from "node:net";
 * import type { NodeLikeSocket } from "jsr:@pgpipe/pgpipe";
 * const socket: NodeLikeSocket = net.connect(5432, "localhost");
 * ```
 */
export interface NodeLikeSocket {
  /** Writes bytes; the callback reports when they were taken (or failed). */
  write(data: Uint8Array, callback?: (err?: Error | null) => void): boolean;
  /** Listens for `data`, `end`, `close` and `error`. */
  on(event: string, listener: (...args: any[]) => void): unknown;
  /** Closes the socket at once. */
  destroy(): unknown;
  /** Stops a listener (for the TLS negotiation's temporary ones). */
  off?(event: string, listener: (...args: any[]) => void): unknown;
  /** Stops a listener (the older name of `off`). */
  removeListener?(event: string, listener: (...args: any[]) => void): unknown;
  /** Stops `data` events while we fall behind. */
  pause?(): unknown;
  /** Resumes `data` events. */
  resume?(): unknown;
  /** Whether the socket is already destroyed. */
  readonly destroyed?: boolean;
}

/**
 * A Deno-style connection (`Deno.Conn`, or any object with the same three
 * methods), already connected, as the `socket` option may return it.
 *
 * @example
 * ```ts
 * import type { DenoLikeConn } from "jsr:@pgpipe/pgpipe";
 * const conn: DenoLikeConn = await Deno.connect({ hostname: "localhost", port: 5432 });
 * ```
 */
export interface DenoLikeConn {
  /** Reads into `p`; resolves to the byte count, or null at end of stream. */
  read(p: Uint8Array): Promise<number | null>;
  /** Writes some of `p`; resolves to how many bytes were taken. */
  write(p: Uint8Array): Promise<number>;
  /** Closes the connection. */
  close(): void;
}

/**
 * What the `socket` option's function returns (or resolves to): a connected
 * node-style socket or Deno-style connection.
 *
 * @example
 * ```ts
 * import postgres, { type UserSocket } from "jsr:@pgpipe/pgpipe";
 * const open = async (): Promise<UserSocket> => await Deno.connect({ hostname: "localhost", port: 5432 });
 * const sql = postgres({ socket: open });
 * ```
 */
export type UserSocket = NodeLikeSocket | DenoLikeConn;

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
  /**
   * libpq's `sslnegotiation`: `postgres` asks with an SSLRequest first; `direct` starts the TLS
   * handshake at once (PostgreSQL 17+, ALPN `postgresql`), sparing a round trip.
   */
  sslnegotiation?: SslNegotiation;
  /**
   * The user's `socket` function, bound to its options: called for each
   * connection (and each cancel) instead of opening a socket ourselves.
   */
  socket?: (target: { host: string; port: number }) => unknown;
  /** A server inside this process: its stream replaces the socket (no TLS, no cancel). */
  embedded?: EmbeddedServer;
}

/** The minimal socket interface the connection needs. */
export interface Transport {
  /** Reads into `p`; resolves to the byte count, or null at end of stream. */
  read(p: Uint8Array): Promise<number | null>;
  /** Writes some of `p`; resolves to how many bytes were taken. */
  write(p: Uint8Array): Promise<number>;
  /** Closes the socket; pending reads end. */
  close(): void;
  /** The TLS implementation the stream runs on, or null when it is not encrypted. */
  readonly tls: TlsPath | null;
  /**
   * Whether the TLS handshake authenticated the server (a chain to trusted roots, and the host
   * name unless sslmode is verify-ca): its queries may then ride with SCRAM's final message.
   */
  readonly verified: boolean;
}

/** The unix socket file for a socket directory and port, as libpq names it. */
export function socketPath(dir: string, port: number): string {
  return `${dir.replace(/\/$/, "")}/.s.PGSQL.${port}`;
}

/** Where a connection goes, as errors report it. */
type Where = { address: string; port: number };

function describe(endpoint: Endpoint): Where {
  return { address: endpoint.host, port: endpoint.port };
}

/** Wraps a Deno connection, which already has the right shape. */
class DenoTransport implements Transport {
  #conn: DenoLikeConn;
  readonly tls: TlsPath | null;
  readonly verified: boolean;
  constructor(conn: DenoLikeConn, tls: TlsPath | null) {
    this.#conn = conn;
    this.tls = tls;
    // Deno's native TLS always checks the chain and the host name.
    this.verified = tls === "native";
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

/** What stops and restarts a socket's reading: a node socket's native handle, or our ConnDuplex. */
interface ReadSwitch {
  readStop(): unknown;
  readStart(): unknown;
}

/**
 * What stops `socket`'s reading: our own ConnDuplex, or a node:net Socket's
 * native handle (`_handle`); null for another JS stream or a closed socket.
 */
function readSwitch(socket: unknown): ReadSwitch | null {
  if (socket instanceof ConnDuplex) return socket;
  const handle = (socket as { _handle?: Partial<ReadSwitch> | null } | null)?._handle;
  return typeof handle?.readStop === "function" && typeof handle.readStart === "function"
    ? handle as ReadSwitch
    : null;
}

/** Over this many unread bytes the socket is paused; under the second, resumed. */
const PAUSE_ABOVE = 1 << 20;
const RESUME_BELOW = 1 << 18;

/**
 * Adapts a node socket's events to pull-style reads, pausing it when we fall
 * behind. Our listeners sit beside any the socket's owner attached.
 *
 * `beneath` is the TCP socket under a node:tls socket. Pausing the TLS
 * socket is not enough in Deno: its TLS layer goes on reading the TCP socket
 * and decrypting into memory while paused (a paused 100 MB COPY was read
 * whole). So its native handle's reading is stopped too, again at each chunk
 * that still arrives while paused (Deno's TLS layer restarts it when it
 * wants more), and started again on resume.
 */
class NodeTransport implements Transport {
  #socket: NodeLikeSocket;
  #beneath: unknown;
  #chunks: Uint8Array[] = [];
  #buffered = 0;
  #paused = false;
  #ended = false;
  #error: Error | null = null;
  #wake: (() => void) | null = null;
  readonly tls: TlsPath | null;
  readonly verified: boolean;

  constructor(
    socket: NodeLikeSocket,
    tls: TlsPath | null,
    options: { initial?: Uint8Array; beneath?: unknown; verified?: boolean } = {},
  ) {
    this.#socket = socket;
    this.#beneath = options.beneath;
    this.tls = tls;
    this.verified = options.verified ?? false;
    if (options.initial && options.initial.length > 0) this.#push(options.initial);
    socket.on("data", (chunk: Uint8Array) => this.#push(chunk));
    socket.on("end", () => this.#finish(null));
    socket.on("close", () => this.#finish(null));
    socket.on("error", (e: Error) => this.#finish(e));
  }

  #push(chunk: Uint8Array): void {
    this.#chunks.push(chunk);
    this.#buffered += chunk.length;
    if (this.#buffered > PAUSE_ABOVE) {
      if (!this.#paused) {
        this.#paused = true;
        this.#socket.pause?.();
      }
      if (this.#beneath !== undefined) this.#switchBeneath(false);
    }
    this.#wake?.();
  }

  /** Stops or starts the reading of the socket beneath the TLS one (never throws: it may be closing). */
  #switchBeneath(on: boolean): void {
    try {
      const handle = readSwitch(this.#beneath);
      if (on) handle?.readStart();
      else handle?.readStop();
    } catch {
      // closed under us: the close event ends the reads
    }
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
    if (this.#paused && this.#buffered < RESUME_BELOW) {
      this.#paused = false;
      if (this.#beneath !== undefined) this.#switchBeneath(true);
      this.#socket.resume?.();
    }
    return n;
  }

  write(p: Uint8Array): Promise<number> {
    // Copy: the caller reuses its buffer as soon as this resolves.
    const copy = p.slice();
    return new Promise((resolve, reject) => {
      // The socket's own error (e.g. a refused connect) says more than the write's.
      this.#socket.write(
        copy,
        (e?: Error | null) => e ? reject(this.#error ?? e) : resolve(copy.length),
      );
    });
  }

  close(): void {
    try {
      this.#socket.destroy();
    } catch {
      // already closed
    }
  }
}

/**
 * A Deno-style connection as a node duplex, so node:tls can run over it. It
 * reads the connection only when node asks for more, and not at all between
 * `readStop` and `readStart` (node:tls asks all the time, even while paused).
 */
class ConnDuplex extends Duplex implements ReadSwitch {
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
async function negotiateDeno(conn: DenoLikeConn): Promise<number> {
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

/**
 * Sends SSLRequest on a node socket; resolves to the server's one-byte answer. `sent` is called
 * once the request has left, while the answer is on its way.
 */
function negotiateNode(socket: NodeLikeSocket, sent?: () => void): Promise<number> {
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
    const off = (event: string, listener: (...args: any[]) => void) =>
      socket.off ? socket.off(event, listener) : socket.removeListener?.(event, listener);
    const cleanup = () => {
      off("data", onData);
      off("error", onError);
      off("end", onEnd);
    };
    socket.on("data", onData);
    socket.on("error", onError);
    socket.on("end", onEnd);
    const w = new Writer(8);
    sslRequest(w);
    socket.write(w.buf.slice(0, w.length), (e) => e ? undefined : sent?.());
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

/** The error for an SSLRequest answered with anything but "S". */
function refused(answer: number, mode: SslMode, where: Where): ConnectionError {
  return answer === 0x4e
    ? new ConnectionError(
      "SSL_NOT_SUPPORTED",
      `the server does not support TLS, but sslmode=${mode} requires it`,
      where,
    )
    : new ConnectionError("PROTOCOL_VIOLATION", `invalid answer to SSLRequest: ${answer}`, where);
}

/** A failed handshake, naming the server; an older server's reaction to direct TLS says so. */
function handshakeFailed(e: unknown, endpoint: Endpoint, where: Where): ConnectionError {
  const name = (e as { name?: unknown; code?: unknown } | null)?.name;
  const code = (e as { code?: unknown } | null)?.code;
  const closed = name === "UnexpectedEof" || name === "ConnectionReset" || code === "ECONNRESET";
  if (endpoint.sslnegotiation === "direct" && closed) {
    return new ConnectionError(
      "SSL_NOT_SUPPORTED",
      `${endpoint.host}:${endpoint.port} closed the connection at the start of a direct TLS ` +
        "handshake: sslnegotiation=direct needs PostgreSQL 17 or later with ssl=on " +
        "(use sslnegotiation=postgres for older servers)",
      { ...where, cause: e },
    );
  }
  return new ConnectionError(
    "SSL_FAILED",
    `TLS handshake with ${endpoint.host}:${endpoint.port} failed: ${thrownText(e)}`,
    { ...where, cause: e },
  );
}

/** Direct TLS is only valid once the server agreed to speak PostgreSQL over it (libpq checks too). */
function checkAlpn(endpoint: Endpoint, alpn: string | null | false | undefined, where: Where) {
  if (endpoint.sslnegotiation !== "direct" || alpn === "postgresql") return;
  throw new ConnectionError(
    "SSL_FAILED",
    `${endpoint.host}:${endpoint.port} did not select ALPN protocol "postgresql" in a direct ` +
      "TLS handshake",
    where,
  );
}

function tlsTarget(endpoint: Endpoint): TlsTarget {
  return {
    host: endpoint.host,
    port: endpoint.port,
    sslmode: endpoint.sslmode,
    ca: endpoint.ca,
    ...(endpoint.sslnegotiation === "direct" ? { alpn: ["postgresql"] } : {}),
  };
}

/**
 * node:tls over `socket`, which the server agreed to encrypt; `close` closes it if that fails.
 * `learn` is told whether the server's certificate would pass the native check.
 */
async function nodeSecure(
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
  const native = wouldPassNatively(secured, endpoint.host);
  learn?.(native);
  const verified = native || verification(endpoint.sslmode, endpoint.ca) !== "none";
  return new NodeTransport(secured, "node", { beneath: socket, verified });
}

/** Finishes TLS over a user's socket whose SSLRequest got `answer`. */
function secureAnswered(
  socket: Duplex,
  answer: number,
  endpoint: Endpoint,
  where: Where,
  close: () => void,
): Promise<Transport> {
  if (answer !== 0x53) {
    close();
    throw refused(answer, endpoint.sslmode, where);
  }
  return nodeSecure(socket, endpoint, where, close);
}

/**
 * TLS through node:tls on a fresh node:net socket (after an SSLRequest, or at
 * once for direct TLS). When the server answers "N" and sslmode accepts plain
 * (`prefer`, `allow`): on a first connection (`learn` given) the socket goes on
 * plain (a reconnect would cost the cold start a round trip) and later
 * connections go native, which keeps its socket on "N"; otherwise the server
 * needed node:tls before but has stopped offering TLS (ssl=off and a reload),
 * and this resolves to null, so the caller connects plain instead of failing.
 */
async function tlsViaNode(
  endpoint: Endpoint,
  n: Negotiation,
  where: Where,
  learn?: (native: boolean) => void,
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
    return await nodeSecure(socket, endpoint, where, close, learn);
  }
  // prefer and allow are also what a plain server (local development) gets by default: teach
  // only once the server has said it speaks TLS, so "N" never pays for the teaching.
  const mayStayPlain = endpoint.sslmode === "prefer" || endpoint.sslmode === "allow";
  const answer = await negotiateNode(socket, () => {
    if (!mayStayPlain) taught = teach();
  }).catch((e) => {
    close();
    throw e;
  });
  if (answer === 0x53) await (taught ?? teach());
  if (answer === 0x4e && mayStayPlain) {
    if (learn !== undefined) {
      learn(true);
      return new NodeTransport(socket, null);
    }
    close();
    return null;
  }
  if (answer !== 0x53) {
    close();
    throw refused(answer, endpoint.sslmode, where);
  }
  return await nodeSecure(socket, endpoint, where, close, learn);
}

/**
 * Native TLS on a fresh TCP socket: SSLRequest (unless direct), then
 * `Deno.startTls`. Resolves to a plain transport when the server answers "N"
 * and sslmode accepts that, and to null when the native check refused the
 * server's certificate (the caller then tries node:tls, which verifies only
 * what sslmode asks).
 */
async function tlsViaDeno(
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
    const answer = await negotiateDeno(conn).catch((e) => {
      close();
      throw e;
    });
    if (answer === 0x4e && (endpoint.sslmode === "prefer" || endpoint.sslmode === "allow")) {
      return new DenoTransport(conn, null);
    }
    if (answer !== 0x53) {
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
  return new DenoTransport(secured!, "native");
}

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

/** The text of whatever was thrown, without trusting its own toString. */
export function thrownText(value: unknown): string {
  if (value instanceof Error) return value.message;
  try {
    return String(value);
  } catch {
    return Object.prototype.toString.call(value);
  }
}

/**
 * The user's `socket` function failed: an Error is passed on as it is (it is
 * theirs); anything else thrown (a string, null) becomes a ConnectionError
 * whose message is that value.
 */
function userFailure(value: unknown, where: { address: string; port: number }): unknown {
  if (value instanceof Error) return value;
  const e = new ConnectionError("CONNECT_FAILED", thrownText(value), { ...where, cause: value });
  userFailures.add(e);
  return e;
}

/** The ConnectionErrors that wrap a value the user's `socket` function threw. */
const userFailures = new WeakSet<object>();

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
async function userTransport(
  raw: unknown,
  endpoint: Endpoint,
  n: Negotiation,
  where: { address: string; port: number },
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
    if (!tlsRequired) return new NodeTransport(socket, null);
    const close = () => socket.destroy();
    if (endpoint.sslnegotiation === "direct") {
      return await nodeSecure(socket as Duplex, endpoint, where, close);
    }
    const answer = await negotiateNode(socket).catch((e) => {
      close();
      throw e;
    });
    return await secureAnswered(socket as Duplex, answer, endpoint, where, close);
  }
  if (isDenoLike(raw)) {
    const conn = n.track(raw, (c) => c.close());
    if (!tlsRequired) return new DenoTransport(conn, null);
    const close = () => {
      try {
        conn.close();
      } catch {
        // already closed
      }
    };
    if (endpoint.sslnegotiation === "direct") {
      return await nodeSecure(new ConnDuplex(conn), endpoint, where, close);
    }
    const answer = await negotiateDeno(conn).catch((e) => {
      close();
      throw e;
    });
    return await secureAnswered(new ConnDuplex(conn), answer, endpoint, where, close);
  }
  throw new ConnectionError(
    "CONNECT_FAILED",
    `the socket option's function must return a connected node:net Socket or Deno.Conn, got ${
      raw === null ? "null" : typeof raw
    }`,
    where,
  );
}

/** Deno's error classes that carry no `code` of their own. */
const DENO_CODES: Record<string, SocketErrorCode> = {
  ConnectionRefused: "ECONNREFUSED",
  ConnectionReset: "ECONNRESET",
  ConnectionAborted: "ECONNABORTED",
  TimedOut: "ETIMEDOUT",
  NetworkUnreachable: "ENETUNREACH",
  AddrNotAvailable: "EADDRNOTAVAIL",
  NotFound: "ENOENT",
};

/**
 * Node's code, errno and syscall for a socket error from Deno or node:net;
 * null when it is not one. Deno's errors carry the code (or their class
 * names it) and "(os error N)"; a failed name lookup only says so in words.
 */
export function socketErrorInfo(
  e: unknown,
): { code: SocketErrorCode; errno?: number; syscall: string } | null {
  if (!(e instanceof Error)) return null;
  const { code, errno, syscall } = e as { code?: unknown; errno?: unknown; syscall?: unknown };
  if (/failed to lookup address information/i.test(e.message)) {
    // Node's codes for getaddrinfo: EAI_AGAIN when the resolver failed, ENOTFOUND otherwise.
    return /temporary failure/i.test(e.message)
      ? { code: "EAI_AGAIN", errno: -3001, syscall: "getaddrinfo" }
      : { code: "ENOTFOUND", errno: -3008, syscall: "getaddrinfo" };
  }
  const found = typeof code === "string" && isSocketErrorCode(code) ? code : DENO_CODES[e.name];
  if (found === undefined) return null;
  const os = /\(os error (\d+)\)/.exec(e.message);
  return {
    code: found,
    errno: typeof errno === "number" ? errno : os ? -Number(os[1]) : undefined,
    syscall: typeof syscall === "string"
      ? syscall
      : found === "ENOTFOUND"
      ? "getaddrinfo"
      : "connect",
  };
}

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
  const where = describe(endpoint);
  const mode = endpoint.sslmode;
  const unix = endpoint.host.startsWith("/");
  if (endpoint.embedded !== undefined) return await openEmbedded(endpoint.embedded, where);
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
    if (unix || !tryTls || mode === "disable") {
      const conn = n.track(await denoConnect(endpoint), (c) => c.close());
      n.done();
      return new DenoTransport(conn, null);
    }
    const target = tlsTarget(endpoint);
    const known = knownPath(target);
    // Direct TLS with a check stays native: it needs PostgreSQL 17+, and 18 offers X25519, so
    // there is no HelloRetryRequest to spare, and without an SSLRequest node:tls's first teaching
    // has no server round trip to hide behind. (require without a CA took node:tls first
    // already: it checks nothing.)
    const first = known === undefined &&
      (endpoint.sslnegotiation !== "direct" || verification(mode, endpoint.ca) === "none");
    if (first) return await firstTls(endpoint, target, n, where, signal);
    let nativeFailed = false;
    if (known !== "node") {
      const native = await tlsViaDeno(endpoint, n, where);
      if (native !== null) return native;
      // The connect timeout fired during the native handshake: no second attempt.
      if (signal?.aborted) throw handshakeFailed(new Error("aborted"), endpoint, where);
      nativeFailed = true;
    }
    const secured = await tlsViaNode(endpoint, n, where);
    if (secured !== null) {
      if (nativeFailed) rememberPath(target, "node");
      return secured;
    }
    // prefer/allow, and the server said "N" although it offered TLS before
    // (ssl turned off since): connect plain.
    return new DenoTransport(n.track(await tcpConnect(endpoint), (c) => c.close()), null);
  } catch (e) {
    if (e instanceof ConnectionError) throw e;
    throw connectFailure(e, endpoint, where);
  } finally {
    n.done();
  }
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
  signal?: AbortSignal,
): Promise<Transport> {
  try {
    const secured = await tlsViaNode(
      endpoint,
      n,
      where,
      (native) => rememberPath(target, native ? "native" : "node"),
    );
    // `learn` given: "N" leaves the socket plain rather than resolving to null.
    return secured!;
  } catch (e) {
    if (signal?.aborted || !certificateRefused(e)) throw e;
    const native = await tlsViaDeno(endpoint, n, where);
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

/** A socket that could not be opened: Node's code when it is an OS error, else CONNECT_FAILED. */
function connectFailure(
  e: unknown,
  endpoint: Endpoint,
  where: { address: string; port: number },
): ConnectionError {
  const unix = endpoint.host.startsWith("/");
  const info = socketErrorInfo(e);
  return new ConnectionError(
    info?.code ?? "CONNECT_FAILED",
    `could not connect to ${
      unix ? socketPath(endpoint.host, endpoint.port) : `${endpoint.host}:${endpoint.port}`
    }: ${thrownText(e)}`,
    { ...where, cause: e, errno: info?.errno, syscall: info?.syscall },
  );
}
