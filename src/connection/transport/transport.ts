/**
 * The byte stream a connection runs on, as the rest of the connection layer sees it: one
 * interface, whatever carries the bytes (TCP or a unix socket through Deno, Deno's native TLS,
 * `node:tls`, a socket the user's `socket` function returned). What differs between them and
 * matters to the pipeline is told by the stream itself (`gatherWrites`, `idleReadCosts`,
 * `verified`), so nothing outside this folder asks which implementation it has; `connect.ts`
 * (`openTransport`) is the one place that chooses.
 */
import type { EmbeddedServer } from "./embedded.ts";

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
  /**
   * The numeric address to connect to instead of looking `host` up (libpq's `hostaddr`); TLS
   * still verifies `host` (or `servername`).
   */
  address?: string;
  /** The name TLS verifies and sends as SNI instead of `host` (the `ssl` object's `servername`). */
  servername?: string;
  /** Whether the TLS name goes out as SNI (libpq's `sslsni`); default true. */
  sni?: boolean;
  /** The client certificate chain and its unencrypted key (PEM), sent when the server asks. */
  clientCertificate?: { cert: string; key: string };
  /** The TLS versions allowed; default TLS 1.2 to 1.3. */
  minVersion?: "TLSv1.2" | "TLSv1.3";
  maxVersion?: "TLSv1.2" | "TLSv1.3";
  /** The TLS stream must show the server's certificate (`channel_binding=require` binds to it). */
  needsServerCertificate?: boolean;
  /** TCP keep-alive probes (default on), and the idle time before the first (ms; default the system's). */
  keepalive?: { enabled: boolean; idleMs?: number };
}

/** What a stream tells the connection about itself, beside reading and writing. */
export interface StreamTraits {
  /** The TLS implementation the stream runs on, or null when it is not encrypted. */
  readonly tls: TlsPath | null;
  /**
   * Whether the TLS handshake authenticated the server (a chain to trusted roots, and the host
   * name unless sslmode is verify-ca): its queries may then ride with SCRAM's final message.
   */
  readonly verified: boolean;
  /**
   * Whether a flush while other requests are in flight is worth one turn of the event loop, so
   * the requests that the answers already arrived free leave in the same write: true where each
   * write is a TLS record the server decrypts and each read yields one record (native TLS).
   */
  readonly gatherWrites: boolean;
  /**
   * Whether a read with nothing to read yet still costs a syscall and a pass through the TLS
   * layer (native TLS: rustls reads the socket before it waits). An idle connection's read loop
   * then holds its next read until a write is under way.
   */
  readonly idleReadCosts: boolean;
  /**
   * The server's TLS certificate (DER), for channel binding; null when the stream is not
   * encrypted or cannot show it (Deno's native TLS does not).
   */
  readonly serverCertificate: Uint8Array | null;
}

/** The byte stream the connection reads and writes. */
export interface Transport extends StreamTraits {
  /** Reads into `p`; resolves to the byte count, or null at end of stream. */
  read(p: Uint8Array): Promise<number | null>;
  /** Writes some of `p`; resolves to how many bytes were taken. */
  write(p: Uint8Array): Promise<number>;
  /** Closes the socket; pending reads end. */
  close(): void;
}

/** The traits of an unencrypted stream. */
export const PLAIN: StreamTraits = {
  tls: null,
  verified: false,
  gatherWrites: false,
  idleReadCosts: false,
  serverCertificate: null,
};

/** The unix socket file for a socket directory and port, as libpq names it. */
export function socketPath(dir: string, port: number): string {
  return `${dir.replace(/\/$/, "")}/.s.PGSQL.${port}`;
}

/** Where a connection goes, as errors report it. */
export type Where = { address: string; port: number };

/** The address and port of `endpoint`, as errors report them. */
export function whereOf(endpoint: Endpoint): Where {
  return { address: endpoint.host, port: endpoint.port };
}
