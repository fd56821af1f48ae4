// The physical limit of serial latency: the very bytes a driver sends for a query, written on a
// raw Deno socket, reading until ReadyForQuery, one query after another. The bytes are captured
// once through a recording proxy (so they are exactly the driver's, statement names and format
// codes included), then the whole session is replayed on a fresh connection: its startup and
// set-up requests once, its last request (the steady state, e.g. Bind/Execute/Sync of a prepared
// `select 1`) in a loop. A driver's serial latency minus this is what the driver itself costs.

/** A client→server request: the bytes up to a point where the server answers ReadyForQuery. */
export interface WireRequest {
  bytes: Uint8Array;
  /** The frontend message types it holds, e.g. "BES" (Bind, Execute, Sync). */
  types: string;
}

/** A frontend session split at the points where the server answers ReadyForQuery. */
export interface WireSession {
  /** The startup message (length-prefixed, no type byte). */
  startup: Uint8Array;
  /** Every request after startup, in order; trailing messages without a Sync (Terminate) dropped. */
  requests: WireRequest[];
}

const SSL_REQUEST = 80877103;
const GSSENC_REQUEST = 80877104;

function int32(b: Uint8Array, at: number): number {
  return ((b[at] << 24) | (b[at + 1] << 16) | (b[at + 2] << 8) | b[at + 3]) >>> 0;
}

/** `count` copies of `bytes`, back to back. */
function repeated(bytes: Uint8Array, count: number): Uint8Array {
  const out = new Uint8Array(bytes.length * count);
  for (let i = 0; i < count; i++) out.set(bytes, i * bytes.length);
  return out;
}

/**
 * Walks the complete backend messages in `buf` up to `end`: where the incomplete rest starts and
 * how many ReadyForQuery messages it held. An ErrorResponse or an authentication request (the
 * replay cannot answer one) throws.
 */
function scanAnswers(buf: Uint8Array, end: number): { at: number; ready: number } {
  let at = 0;
  let ready = 0;
  while (at + 5 <= end) {
    const length = int32(buf, at + 1);
    if (at + 1 + length > end) break;
    const type = buf[at];
    if (type === 0x5a) ready++; // 'Z' ReadyForQuery
    else if (type === 0x45) throw new Error("the server answered the replay with an ErrorResponse");
    else if (type === 0x52 && int32(buf, at + 5) !== 0) {
      throw new Error("the server asked for a password: the ping-pong needs a trust login");
    }
    at += 1 + length;
  }
  return { at, ready };
}

/**
 * Splits a frontend byte stream (as a client sends it from the start of a session) into the
 * startup message and requests: each Sync ('S') or simple Query ('Q') ends one.
 */
export function splitSession(stream: Uint8Array): WireSession {
  if (stream.length < 8) throw new Error("captured stream too short for a startup message");
  const code = int32(stream, 4);
  if (code === SSL_REQUEST || code === GSSENC_REQUEST) {
    throw new Error(
      "captured session starts with an SSL/GSS request: capture with sslmode=disable",
    );
  }
  const startupLength = int32(stream, 0);
  const startup = stream.slice(0, startupLength);
  const requests: WireRequest[] = [];
  let start = startupLength;
  let types = "";
  let at = startupLength;
  while (at < stream.length) {
    if (at + 5 > stream.length) throw new Error(`truncated message header at byte ${at}`);
    const type = String.fromCharCode(stream[at]);
    const end = at + 1 + int32(stream, at + 1);
    if (end > stream.length) throw new Error(`truncated '${type}' message at byte ${at}`);
    types += type;
    at = end;
    if (type === "S" || type === "Q") {
      requests.push({ bytes: stream.slice(start, at), types });
      start = at;
      types = "";
    }
  }
  return { startup, requests };
}

/** A Deno TCP listener that forwards to target and records what the first client sends. */
export interface RecordingProxy {
  port: number;
  /** Everything the first client sent, concatenated. */
  recorded(): Uint8Array;
  close(): Promise<void>;
}

function closeQuietly(c: Deno.Conn | Deno.Listener): void {
  try {
    c.close();
  } catch {
    // already closed
  }
}

async function writeAll(conn: Deno.Conn, bytes: Uint8Array): Promise<void> {
  let off = 0;
  while (off < bytes.length) off += await conn.write(bytes.subarray(off));
}

async function pump(from: Deno.Conn, to: Deno.Conn, record?: Uint8Array[]): Promise<void> {
  const buf = new Uint8Array(64 * 1024);
  try {
    while (true) {
      const n = await from.read(buf);
      if (n === null) break;
      record?.push(buf.slice(0, n));
      await writeAll(to, buf.subarray(0, n));
    }
  } catch {
    // either side went away: end both
  } finally {
    closeQuietly(from);
    closeQuietly(to);
  }
}

/** Starts a recording proxy in front of host:port. */
export function startRecordingProxy(host: string, port: number): RecordingProxy {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const chunks: Uint8Array[] = [];
  const pumps: Promise<void>[] = [];
  const conns: Deno.Conn[] = [];
  let first = true;
  const accepting = (async () => {
    try {
      for await (const client of listener) {
        const record = first ? chunks : undefined;
        first = false;
        const server = await Deno.connect({ hostname: host, port });
        conns.push(client, server);
        pumps.push(pump(client, server, record), pump(server, client));
      }
    } catch {
      // listener closed
    }
  })();
  return {
    port: (listener.addr as Deno.NetAddr).port,
    recorded() {
      const out = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0));
      let at = 0;
      for (const c of chunks) {
        out.set(c, at);
        at += c.length;
      }
      return out;
    },
    async close() {
      closeQuietly(listener);
      for (const c of conns) closeQuietly(c);
      await accepting;
      await Promise.all(pumps);
    },
  };
}

/**
 * Records the session a driver opens while `run` uses it through a proxy: run gets the URL to
 * connect to (the same URL with the proxy's host and port) and must close its client before
 * resolving, so the recorded stream is complete.
 */
export async function captureSession(
  url: string,
  run: (proxyUrl: string) => Promise<void>,
): Promise<WireSession> {
  const u = new URL(url);
  const proxy = startRecordingProxy(u.hostname, Number(u.port || 5432));
  try {
    const via = new URL(url);
    via.hostname = "127.0.0.1";
    via.port = String(proxy.port);
    await run(via.toString());
  } finally {
    await proxy.close();
  }
  return splitSession(proxy.recorded());
}

/** Sends an SSLRequest on a fresh socket; true when the server agreed ('S'). */
async function sslRequest(conn: Deno.Conn): Promise<boolean> {
  await writeAll(conn, new Uint8Array([0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f]));
  const answer = new Uint8Array(1);
  return (await conn.read(answer)) === 1 && answer[0] === 0x53;
}

/** A raw socket that replays requests and waits for their ReadyForQuery. */
export class PingPong {
  #conn: Deno.Conn;
  #buf = new Uint8Array(64 * 1024);
  /** Bytes of an incomplete backend message kept from the last read. */
  #have = 0;

  private constructor(conn: Deno.Conn) {
    this.#conn = conn;
  }

  /**
   * Connects to host:port, sends the session's startup and every set-up request. With `ca`,
   * over Deno's native TLS (SSLRequest, then `Deno.startTls` verifying against that CA).
   */
  static async open(
    host: string,
    port: number,
    session: WireSession,
    ca?: string,
  ): Promise<PingPong> {
    let conn: Deno.Conn = await Deno.connect({ hostname: host, port });
    (conn as Deno.TcpConn).setNoDelay(true);
    if (ca !== undefined) {
      if (!await sslRequest(conn)) throw new Error("the server refused TLS");
      conn = await Deno.startTls(conn as Deno.TcpConn, { hostname: host, caCerts: [ca] });
    }
    const p = new PingPong(conn);
    try {
      await p.roundTrip(session.startup);
      for (const r of session.requests) await p.roundTrip(r.bytes);
    } catch (e) {
      p.close();
      throw e;
    }
    return p;
  }

  /**
   * Writes one request and reads until its ReadyForQuery. A server error or an authentication
   * request (the replay cannot answer one) rejects.
   */
  async roundTrip(bytes: Uint8Array): Promise<void> {
    await writeAll(this.#conn, bytes);
    while (await this.#readAnswers() === 0);
  }

  /**
   * Pipelines `total` copies of one request keeping `window` in flight, the way a pipelining
   * driver does at best: on each read, as many new copies as answers arrived, in one write.
   */
  async pipeline(bytes: Uint8Array, total: number, window: number): Promise<void> {
    const burst = repeated(bytes, Math.min(window, total));
    let sent = Math.min(window, total);
    await writeAll(this.#conn, burst);
    for (let answered = 0; answered < total;) {
      const n = await this.#readAnswers();
      answered += n;
      const more = Math.min(n, total - sent);
      if (more > 0) {
        await writeAll(this.#conn, burst.subarray(0, more * bytes.length));
        sent += more;
      }
    }
  }

  /** Reads once and counts the ReadyForQuery messages that completed (an error rejects). */
  async #readAnswers(): Promise<number> {
    if (this.#have === this.#buf.length) {
      const bigger = new Uint8Array(this.#buf.length * 2);
      bigger.set(this.#buf);
      this.#buf = bigger;
    }
    const n = await this.#conn.read(this.#buf.subarray(this.#have));
    if (n === null) throw new Error("server closed the ping-pong connection");
    const buf = this.#buf;
    const end = this.#have + n;
    const { at, ready } = scanAnswers(buf, end);
    buf.copyWithin(0, at, end);
    this.#have = end - at;
    return ready;
  }

  close(): void {
    closeQuietly(this.#conn);
  }
}

/**
 * The same replay over `node:tls` with no certificate check (`sslmode=require`), driven by its
 * own events: the floor for a driver on node:tls.
 */
export class NodeTlsPingPong {
  #socket: import("node:tls").TLSSocket;
  #pending: Uint8Array = new Uint8Array(0);
  /** Told how many answers (ReadyForQuery) a chunk completed, or the error that ended it. */
  #answered: ((n: number, e?: Error) => void) | null = null;

  private constructor(socket: import("node:tls").TLSSocket) {
    this.#socket = socket;
    socket.on("data", (chunk: Uint8Array) => this.#data(chunk));
    socket.on("error", (e: Error) => this.#answered?.(0, e));
    socket.on(
      "close",
      () => this.#answered?.(0, new Error("server closed the ping-pong connection")),
    );
  }

  /** Connects, asks for TLS on a node:net socket, then replays startup and set-up. */
  static async open(host: string, port: number, session: WireSession): Promise<NodeTlsPingPong> {
    const net = await import("node:net");
    const tls = await import("node:tls");
    const raw = net.connect({ host, port });
    raw.setNoDelay(true);
    await new Promise<void>((resolve, reject) => {
      raw.once("connect", () => resolve());
      raw.once("error", reject);
    });
    raw.write(new Uint8Array([0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f]));
    const answer = await new Promise<Uint8Array>((resolve) => raw.once("data", resolve));
    if (answer[0] !== 0x53) throw new Error("the server refused TLS");
    const socket = tls.connect({ socket: raw, rejectUnauthorized: false });
    await new Promise<void>((resolve, reject) => {
      socket.once("secureConnect", () => resolve());
      socket.once("error", reject);
    });
    const p = new NodeTlsPingPong(socket);
    await p.roundTrip(session.startup);
    for (const r of session.requests) await p.roundTrip(r.bytes);
    return p;
  }

  #data(chunk: Uint8Array): void {
    let buf = chunk;
    if (this.#pending.length > 0) {
      buf = new Uint8Array(this.#pending.length + chunk.length);
      buf.set(this.#pending);
      buf.set(chunk, this.#pending.length);
    }
    let scanned;
    try {
      scanned = scanAnswers(buf, buf.length);
    } catch (e) {
      return this.#answered?.(0, e as Error);
    }
    this.#pending = buf.subarray(scanned.at);
    if (scanned.ready > 0) this.#answered?.(scanned.ready);
  }

  /** Writes one request and resolves at its ReadyForQuery. */
  roundTrip(bytes: Uint8Array): Promise<void> {
    return new Promise((resolve, reject) => {
      this.#answered = (_n, e) => {
        this.#answered = null;
        if (e) reject(e);
        else resolve();
      };
      this.#socket.write(bytes);
    });
  }

  /** As {@link PingPong.pipeline}: `window` in flight, one write per batch of answers. */
  pipeline(bytes: Uint8Array, total: number, window: number): Promise<void> {
    const burst = repeated(bytes, Math.min(window, total));
    let sent = Math.min(window, total);
    let answered = 0;
    return new Promise((resolve, reject) => {
      this.#answered = (n, e) => {
        if (e) {
          this.#answered = null;
          return reject(e);
        }
        answered += n;
        if (answered >= total) {
          this.#answered = null;
          return resolve();
        }
        const more = Math.min(n, total - sent);
        if (more > 0) {
          this.#socket.write(burst.subarray(0, more * bytes.length));
          sent += more;
        }
      };
      this.#socket.write(burst);
    });
  }

  close(): void {
    this.#socket.destroy();
  }
}
