/**
 * Around a TLS handshake, whichever implementation runs it: libpq's sslmode rules (what the
 * server's certificate must prove), the SSLRequest and the server's one-byte answer (or, for
 * direct TLS, the ALPN the handshake must end with), the errors for each way that fails, and
 * the socket an abort (the connect timeout) closes meanwhile.
 */
import { ConnectionError, thrownText } from "../../errors.ts";
import { sslRequest } from "../../protocol/frontend.ts";
import { Writer } from "../../protocol/writer.ts";
import type { DenoLikeConn, Endpoint, NodeLikeSocket, SslMode, Where } from "./transport.ts";

/** The server's answers to an SSLRequest: it will speak TLS, or it will not. */
export const WILL_ENCRYPT = 0x53; // "S"
export const WONT_ENCRYPT = 0x4e; // "N"

/** What a TLS check verifies: nothing, the chain only (verify-ca), or the chain and the host name. */
type Verification = "none" | "chain" | "full";

/**
 * The check an sslmode asks for. As in libpq, a root certificate loaded (`sslrootcert`, or
 * `~/.postgresql/root.crt` found, or the `ssl` object's `ca`) means the chain is verified under
 * every mode that encrypts: `require`, `prefer` and `allow` then check what `verify-ca` checks
 * (libpq turns on OpenSSL's peer verification whenever it loaded a root file). A `prefer` whose
 * check fails goes on plain, as libpq's does after any failed handshake.
 */
export function verification(mode: SslMode, ca: string[] | undefined): Verification {
  if (mode === "verify-full") return "full";
  if (mode === "verify-ca" || (mode !== "disable" && ca !== undefined)) return "chain";
  return "none";
}

/** Whether the sslmode lets a server that will not encrypt be used in plain text. */
export function mayStayPlain(mode: SslMode): boolean {
  return mode === "prefer" || mode === "allow";
}

/** What a handshake needs to know about the server and the policy. */
export interface TlsTarget {
  /** The name the certificate must carry and SNI sends: the `servername` given, else the host. */
  name: string;
  port: number;
  /** The numeric address connected to, when not the name looked up (libpq's `hostaddr`). */
  address?: string;
  sslmode: SslMode;
  ca?: string[];
  /** ALPN protocols to offer (direct TLS offers `postgresql`). */
  alpn?: string[];
  /** Whether SNI is sent (libpq's `sslsni`). */
  sni: boolean;
  /** The client certificate and key to present (PEM). */
  clientCertificate?: { cert: string; key: string };
  /** The TLS versions allowed. */
  minVersion: "TLSv1.2" | "TLSv1.3";
  maxVersion: "TLSv1.2" | "TLSv1.3";
}

/** The handshake's view of an endpoint. */
export function tlsTarget(endpoint: Endpoint): TlsTarget {
  return {
    name: endpoint.servername ?? endpoint.host,
    port: endpoint.port,
    ...(endpoint.address !== undefined ? { address: endpoint.address } : {}),
    sslmode: endpoint.sslmode,
    ca: endpoint.ca,
    ...(endpoint.sslnegotiation === "direct" ? { alpn: ["postgresql"] } : {}),
    sni: endpoint.sni ?? true,
    ...(endpoint.clientCertificate ? { clientCertificate: endpoint.clientCertificate } : {}),
    minVersion: endpoint.minVersion ?? "TLSv1.2",
    maxVersion: endpoint.maxVersion ?? "TLSv1.3",
  };
}

/** Closes whatever socket is being negotiated when the signal fires. */
export class Negotiation {
  #close: (() => void) | null = null;
  #signal?: AbortSignal;
  constructor(signal?: AbortSignal) {
    this.#signal = signal;
    signal?.addEventListener("abort", () => this.#close?.(), { once: true });
  }
  /** Whether the signal fired (the connect timeout). */
  get aborted(): boolean {
    return this.#signal?.aborted === true;
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

/** The SSLRequest's bytes. */
function sslRequestBytes(): Uint8Array {
  const w = new Writer(8);
  sslRequest(w);
  return w.buf.slice(0, w.length);
}

/** Bytes after the answer would be unencrypted injection (CVE-2021-23222). */
function injected(): ConnectionError {
  return new ConnectionError(
    "PROTOCOL_VIOLATION",
    "server sent unexpected data after its SSL answer",
  );
}

/** Sends SSLRequest on a Deno socket and returns the server's one-byte answer. */
export async function askDeno(conn: DenoLikeConn): Promise<number> {
  await conn.write(sslRequestBytes());
  const answer = new Uint8Array(64);
  const n = await conn.read(answer);
  if (n === null) throw closedDuringNegotiation();
  if (n > 1) throw injected();
  return answer[0];
}

/**
 * Sends SSLRequest on a node socket; resolves to the server's one-byte answer. `sent` is called
 * once the request has left, while the answer is on its way. A socket that ends, or closes
 * without an error (destroyed by its owner: only `close` says so), rejects at once.
 */
export function askNode(socket: NodeLikeSocket, sent?: () => void): Promise<number> {
  return new Promise((resolve, reject) => {
    const onData = (chunk: Uint8Array) => {
      cleanup();
      if (chunk.length > 1) reject(injected());
      else resolve(chunk[0]);
    };
    const onError = (e: Error) => {
      cleanup();
      reject(e);
    };
    const onClosed = () => {
      cleanup();
      reject(closedDuringNegotiation());
    };
    const off = (event: string, listener: (...args: any[]) => void) =>
      socket.off ? socket.off(event, listener) : socket.removeListener?.(event, listener);
    const cleanup = () => {
      off("data", onData);
      off("error", onError);
      off("end", onClosed);
      off("close", onClosed);
    };
    socket.on("data", onData);
    socket.on("error", onError);
    socket.on("end", onClosed);
    socket.on("close", onClosed);
    // Destroyed before we listened: no event will come.
    if (socket.destroyed === true) return onClosed();
    socket.write(sslRequestBytes(), (e) => e ? undefined : sent?.());
  });
}

/** What a socket that ends or closes before TLS is established rejects with. */
export function closedDuringNegotiation(): Error {
  return new Error("the connection closed during TLS negotiation");
}

/** The error for an SSLRequest answered with anything but "S". */
export function refused(answer: number, mode: SslMode, where: Where): ConnectionError {
  return answer === WONT_ENCRYPT
    ? new ConnectionError(
      "SSL_NOT_SUPPORTED",
      `the server does not support TLS, but sslmode=${mode} requires it`,
      where,
    )
    : new ConnectionError("PROTOCOL_VIOLATION", `invalid answer to SSLRequest: ${answer}`, where);
}

/** A failed handshake, naming the server; an older server's reaction to direct TLS says so. */
export function handshakeFailed(e: unknown, endpoint: Endpoint, where: Where): ConnectionError {
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
export function checkAlpn(
  endpoint: Endpoint,
  alpn: string | null | false | undefined,
  where: Where,
): void {
  if (endpoint.sslnegotiation !== "direct" || alpn === "postgresql") return;
  throw new ConnectionError(
    "SSL_FAILED",
    `${endpoint.host}:${endpoint.port} did not select ALPN protocol "postgresql" in a direct ` +
      "TLS handshake",
    where,
  );
}
