// The physical limit of serial latency: the very bytes a driver sends for a query, written on a
// raw Deno socket, reading until ReadyForQuery, one query after another. The bytes are captured
// once through a recording proxy (so they are exactly the driver's, statement names and format
// codes included), then the whole session is replayed on a fresh connection: its startup and
// set-up requests once, its last request (the steady state, e.g. Bind/Execute/Sync of a prepared
// `select 1`) in a loop. A driver's serial latency minus this is what the driver itself costs.
import type { TLSSocket } from "node:tls";
import { hostPort, via } from "../shared/env.ts";
import { flightRecorder } from "../shared/harness.ts";
import { closeQuietly } from "../shared/proxy.ts";
import { mean, percentile, serial } from "../shared/stats.ts";

/**
 * A frontend session: its startup message (length-prefixed, no type byte), then each request up
 * to a Sync or simple Query, where the server answers ReadyForQuery, with the message types it
 * holds, e.g. "BES" (Bind, Execute, Sync); trailing messages without a Sync (Terminate) dropped.
 */
export type WireSession = { startup: Uint8Array; requests: { bytes: Uint8Array; types: string }[] };

const SSL_REQUEST = new Uint8Array([0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f]);
const int32 = (b: Uint8Array, at: number) =>
  ((b[at] << 24) | (b[at + 1] << 16) | (b[at + 2] << 8) | b[at + 3]) >>> 0;
const concat = (chunks: Uint8Array[]) => {
  if (chunks.length === 1) return chunks[0];
  const out = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0));
  chunks.reduce((at, c) => (out.set(c, at), at + c.length), 0);
  return out;
};

/**
 * Walks the complete backend messages in `buf` up to `end`: where the incomplete rest starts and
 * how many ReadyForQuery messages it held. An ErrorResponse or an authentication request (the
 * replay cannot answer one) throws.
 */
function scanAnswers(buf: Uint8Array, end: number): { at: number; ready: number } {
  let [at, ready] = [0, 0];
  while (at + 5 <= end && at + 1 + int32(buf, at + 1) <= end) {
    const type = buf[at];
    if (type === 0x5a) ready++; // 'Z' ReadyForQuery
    else if (type === 0x45) throw new Error("the server answered the replay with an ErrorResponse");
    else if (type === 0x52 && int32(buf, at + 5) !== 0) {
      throw new Error("the server asked for a password: the ping-pong needs a trust login");
    }
    at += 1 + int32(buf, at + 1);
  }
  return { at, ready };
}

/** Splits a frontend byte stream, as a client sends it from the start, into a WireSession. */
export function splitSession(stream: Uint8Array): WireSession {
  if (stream.length < 8) throw new Error("captured stream too short for a startup message");
  if (int32(stream, 4) === 80877103 || int32(stream, 4) === 80877104) {
    throw new Error("captured session starts with an SSL/GSS request: use sslmode=disable");
  }
  const startup = stream.slice(0, int32(stream, 0));
  const requests: WireSession["requests"] = [];
  let [start, at, types] = [startup.length, startup.length, ""];
  while (at < stream.length) {
    if (at + 5 > stream.length) throw new Error(`truncated message header at byte ${at}`);
    const type = String.fromCharCode(stream[at]);
    const end = at + 1 + int32(stream, at + 1);
    if (end > stream.length) throw new Error(`truncated '${type}' message at byte ${at}`);
    [types, at] = [types + type, end];
    if (type === "S" || type === "Q") {
      requests.push({ bytes: stream.slice(start, at), types });
      [start, types] = [at, ""];
    }
  }
  return { startup, requests };
}

/**
 * Records the session a driver opens while `run` uses it through a recorder
 * (test/harness/flights.ts): run gets the URL and must close its client before resolving.
 */
export async function captureSession(url: string, run: (proxyUrl: string) => Promise<void>) {
  const recorder = flightRecorder(hostPort(url));
  try {
    await run(via(url, recorder.port));
  } finally {
    await recorder.close();
  }
  const sent = (recorder.connections[0] ?? []).filter((f) => f.from === "client");
  return splitSession(concat(sent.map((f) => f.bytes)));
}

/**
 * A raw replay: startup and set-up once, then round trips and pipelines of one request.
 * `pipeline` sends `total` copies of one request keeping `window` in flight, the way a
 * pipelining driver does at best: on each read, as many new copies as answers arrived, in one
 * write. A round trip is a pipeline of one: write it, read until its ReadyForQuery.
 */
export interface Replay {
  pipeline(bytes: Uint8Array, total: number, window: number): Promise<void>;
  roundTrip(bytes: Uint8Array): Promise<void>;
  close(): void;
}

/** `window` copies of `bytes` back to back (`bytes` itself for one): a pipeline's first write. */
const burstOf = (bytes: Uint8Array, total: number, window: number) =>
  concat(Array(Math.min(window, total)).fill(bytes));

/** Replays the session's startup and set-up requests on a fresh replay. */
async function setUp<R extends Replay>(replay: R, session: WireSession): Promise<R> {
  try {
    await replay.roundTrip(session.startup);
    for (const r of session.requests) await replay.roundTrip(r.bytes);
    return replay;
  } catch (e) {
    replay.close();
    throw e;
  }
}

async function writeAll(conn: Deno.Conn, bytes: Uint8Array): Promise<void> {
  for (let off = 0; off < bytes.length;) off += await conn.write(bytes.subarray(off));
}

/** A raw Deno socket (plain TCP, or Deno's native TLS given a CA) that awaits its reads. */
export class PingPong implements Replay {
  #buf: Uint8Array = new Uint8Array(64 * 1024);
  /** Bytes of an incomplete backend message kept from the last read. */
  #have = 0;
  private constructor(private conn: Deno.Conn) {}

  /** Connects, sends startup and set-up; with `ca`, over native TLS verifying against it. */
  static async open(host: string, port: number, session: WireSession, ca?: string) {
    let conn: Deno.Conn = await Deno.connect({ hostname: host, port });
    (conn as Deno.TcpConn).setNoDelay(true);
    if (ca !== undefined) {
      await writeAll(conn, SSL_REQUEST);
      const answer = new Uint8Array(1);
      if (await conn.read(answer) !== 1 || answer[0] !== 0x53) {
        throw new Error("the server refused TLS");
      }
      conn = await Deno.startTls(conn as Deno.TcpConn, { hostname: host, caCerts: [ca] });
    }
    return await setUp(new PingPong(conn), session);
  }

  roundTrip = (bytes: Uint8Array) => this.pipeline(bytes, 1, 1);

  async pipeline(bytes: Uint8Array, total: number, window: number): Promise<void> {
    const burst = burstOf(bytes, total, window);
    let sent = Math.min(window, total);
    await writeAll(this.conn, burst);
    for (let answered = 0; answered < total;) {
      const n = await this.#readAnswers();
      answered += n;
      const more = Math.min(n, total - sent);
      if (more > 0) {
        await writeAll(this.conn, burst.subarray(0, more * bytes.length));
        sent += more;
      }
    }
  }

  /** Reads once and counts the ReadyForQuery messages that completed (an error rejects). */
  async #readAnswers(): Promise<number> {
    if (this.#have === this.#buf.length) this.#buf = concat([this.#buf, this.#buf]);
    const n = await this.conn.read(this.#buf.subarray(this.#have));
    if (n === null) throw new Error("server closed the ping-pong connection");
    const end = this.#have + n;
    const { at, ready } = scanAnswers(this.#buf, end);
    this.#buf.copyWithin(0, at, end);
    this.#have = end - at;
    return ready;
  }

  close = () => closeQuietly(this.conn);
}

/** The same replay over node:tls, unverified (`sslmode=require`), driven by its own events. */
export class NodeTlsPingPong implements Replay {
  #pending: Uint8Array = new Uint8Array(0);
  /** Told how many answers (ReadyForQuery) a chunk completed, or the error that ended it. */
  #answered: ((n: number, e?: Error) => void) | null = null;

  private constructor(private socket: TLSSocket) {
    socket.on("data", (chunk: Uint8Array) => this.#data(chunk));
    socket.on("error", (e: Error) => this.#answered?.(0, e));
    const closed = new Error("server closed the ping-pong connection");
    socket.on("close", () => this.#answered?.(0, closed));
  }

  /** Connects, asks for TLS on a node:net socket, then replays startup and set-up. */
  static async open(host: string, port: number, session: WireSession): Promise<NodeTlsPingPong> {
    const [net, tls] = [await import("node:net"), await import("node:tls")];
    const raw = net.connect({ host, port });
    raw.setNoDelay(true);
    await new Promise((resolve, reject) => raw.once("connect", resolve).once("error", reject));
    raw.write(SSL_REQUEST);
    const answer = await new Promise<Uint8Array>((resolve) => raw.once("data", resolve));
    if (answer[0] !== 0x53) throw new Error("the server refused TLS");
    const socket = tls.connect({ socket: raw, rejectUnauthorized: false });
    await new Promise((ok, reject) => socket.once("secureConnect", ok).once("error", reject));
    return await setUp(new NodeTlsPingPong(socket), session);
  }

  #data(chunk: Uint8Array): void {
    const buf = this.#pending.length > 0 ? concat([this.#pending, chunk]) : chunk;
    let scanned;
    try {
      scanned = scanAnswers(buf, buf.length);
    } catch (e) {
      return this.#answered?.(0, e as Error);
    }
    this.#pending = buf.subarray(scanned.at);
    if (scanned.ready > 0) this.#answered?.(scanned.ready);
  }

  roundTrip = (bytes: Uint8Array) => this.pipeline(bytes, 1, 1);

  pipeline(bytes: Uint8Array, total: number, window: number): Promise<void> {
    const burst = burstOf(bytes, total, window);
    let [sent, answered] = [Math.min(window, total), 0];
    return new Promise((resolve, reject) => {
      this.#answered = (n, e) => {
        answered += n;
        if (e || answered >= total) {
          this.#answered = null;
          return e ? reject(e) : resolve();
        }
        const more = Math.min(n, total - sent);
        if (more > 0) {
          this.socket.write(burst.subarray(0, more * bytes.length));
          sent += more;
        }
      };
      this.socket.write(burst);
    });
  }

  close = () => void this.socket.destroy();
}

/** Mean and median µs of `count` serial round trips of `bytes`, after 500 that warm up. */
export async function serialFloor(replay: Replay, bytes: Uint8Array, count: number) {
  for (let i = 0; i < 500; i++) await replay.roundTrip(bytes);
  const samples = await serial(() => replay.roundTrip(bytes), count);
  return { meanUs: mean(samples), p50Us: percentile(samples, 50) };
}

/** How a raw replay travels: plain TCP, Deno's native TLS (needs the CA) or node:tls. */
export type RawKind = "socket" | "native TLS" | "node:tls";

/** Opens a raw replay of `session` to the server of `url` per kind (native TLS only with `ca`). */
export async function openRaws(url: string, session: WireSession, kinds: RawKind[], ca?: string) {
  const { hostname, port } = hostPort(url);
  const out: { kind: RawKind; replay: Replay }[] = [];
  try {
    for (const kind of kinds.filter((k) => k !== "native TLS" || ca !== undefined)) {
      const replay = kind === "node:tls"
        ? await NodeTlsPingPong.open(hostname, port, session)
        : await PingPong.open(hostname, port, session, kind === "socket" ? undefined : ca);
      out.push({ kind, replay });
    }
  } catch (e) {
    for (const r of out) r.replay.close();
    throw e;
  }
  return out;
}
