// A fake PostgreSQL server for what a real one will not do: stay silent, send garbage, break
// the protocol. Byte builders for backend messages, a Peer (the server side of one client
// connection, with buffered reads), a listener that runs a handler per client, and a
// FakeSession that answers the extended and simple protocols correctly, so a test can break
// exactly one answer and check that the next query still works.
import assert from "node:assert/strict";
import postgres, { type Options, type Sql } from "../../mod.ts";
import { within } from "./wait.ts";

export const encoder = new TextEncoder();
const decoder = new TextDecoder();

// ---------------------------------------------------------------------------------------------
// Bytes

export function concat(...parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

export function int16(n: number): Uint8Array {
  const out = new Uint8Array(2);
  new DataView(out.buffer).setInt16(0, n);
  return out;
}

export function int32(n: number): Uint8Array {
  const out = new Uint8Array(4);
  new DataView(out.buffer).setInt32(0, n);
  return out;
}

/** A backend message: type byte, int32 length (itself included), body. */
export function message(type: string, ...body: Uint8Array[]): Uint8Array {
  const b = concat(...body);
  return concat(encoder.encode(type), int32(b.length + 4), b);
}

/** A message header declaring `length` (the int32 field) whatever follows. */
export function header(type: string, length: number): Uint8Array {
  return concat(encoder.encode(type), int32(length));
}

export const auth = (code: number, ...extra: Uint8Array[]): Uint8Array =>
  message("R", int32(code), ...extra);
export const cstr = (s: string): Uint8Array => encoder.encode(`${s}\0`);

export function errorResponse(code: string, text: string, severity = "FATAL"): Uint8Array {
  return message(
    "E",
    cstr(`S${severity}`),
    cstr(`V${severity}`),
    cstr(`C${code}`),
    cstr(`M${text}`),
    cstr(""),
  );
}

export const readyForQuery = (status = "I"): Uint8Array => message("Z", encoder.encode(status));
export const backendKeyData = (pid: number, secret: number): Uint8Array =>
  message("K", int32(pid), int32(secret));
export const parameterStatus = (name: string, value: string): Uint8Array =>
  message("S", cstr(name), cstr(value));

/** AuthenticationOk, a few ParameterStatus, BackendKeyData and ReadyForQuery 'I'. */
export const STARTUP_OK: Uint8Array = concat(
  auth(0),
  parameterStatus("server_version", "16.0"),
  parameterStatus("client_encoding", "UTF8"),
  backendKeyData(4242, 0x5ec2e7),
  readyForQuery(),
);

/** A result column of a fake answer. */
export interface FakeColumn {
  name: string;
  /** Type OID (25 text, 23 int4, ...). */
  type: number;
}

export function rowDescription(columns: readonly FakeColumn[]): Uint8Array {
  return message(
    "T",
    int16(columns.length),
    ...columns.map((c) =>
      concat(cstr(c.name), int32(0), int16(0), int32(c.type), int16(-1), int32(-1), int16(0))
    ),
  );
}

/** A DataRow; strings are sent as UTF-8, byte arrays as they are, null as NULL. */
export function dataRow(values: readonly (string | Uint8Array | null)[]): Uint8Array {
  return message(
    "D",
    int16(values.length),
    ...values.map((v) => {
      if (v === null) return int32(-1);
      const b = typeof v === "string" ? encoder.encode(v) : v;
      return concat(int32(b.length), b);
    }),
  );
}

export const commandComplete = (tag: string): Uint8Array => message("C", cstr(tag));
export const parseComplete = (): Uint8Array => message("1");
export const bindComplete = (): Uint8Array => message("2");
export const closeComplete = (): Uint8Array => message("3");
export const noData = (): Uint8Array => message("n");
export const parameterDescription = (types: readonly number[]): Uint8Array =>
  message("t", int16(types.length), ...types.map(int32));

export const SSL_REQUEST = 80877103;

/** Splits well-framed backend bytes into their messages (views, not copies). */
export function messagesOf(bytes: Uint8Array): Uint8Array[] {
  const out: Uint8Array[] = [];
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  for (let at = 0; at < bytes.length;) {
    const end = at + 1 + view.getInt32(at + 1);
    out.push(bytes.subarray(at, end));
    at = end;
  }
  return out;
}

/** The type letter of a backend message. */
export const typeOf = (m: Uint8Array): string => String.fromCharCode(m[0]);

// ---------------------------------------------------------------------------------------------
// The server side of one connection

/** One frontend message. */
export interface FrontendMessage {
  type: string;
  body: Uint8Array;
}

/** What a Peer reads and writes: a Deno.Conn, or a TLS socket adapted to its three methods. */
export interface PeerConn {
  read(p: Uint8Array): Promise<number | null>;
  write(p: Uint8Array): Promise<number>;
  close(): void;
}

/** The server side of one client connection, with buffered reads. */
export class Peer {
  readonly conn: PeerConn;
  #buf = new Uint8Array(4096);
  #read = 0;
  #filled = 0;

  constructor(conn: PeerConn) {
    this.conn = conn;
  }

  /** Reads more into the buffer (compacting or growing it first); false at end of stream. */
  async #fill(): Promise<boolean> {
    if (this.#read > 0) {
      this.#buf.copyWithin(0, this.#read, this.#filled);
      this.#filled -= this.#read;
      this.#read = 0;
    }
    if (this.#filled === this.#buf.length) {
      const next = new Uint8Array(this.#buf.length * 2);
      next.set(this.#buf);
      this.#buf = next;
    }
    const got = await this.conn.read(this.#buf.subarray(this.#filled));
    if (got === null) return false;
    this.#filled += got;
    return true;
  }

  async take(n: number): Promise<Uint8Array> {
    while (this.#filled - this.#read < n) {
      if (!(await this.#fill())) throw new Error("the client closed the connection");
    }
    const out = this.#buf.slice(this.#read, this.#read + n);
    this.#read += n;
    if (this.#read === this.#filled) this.#read = this.#filled = 0;
    return out;
  }

  async int32(): Promise<number> {
    return new DataView((await this.take(4)).buffer).getInt32(0);
  }

  /**
   * Reads the StartupMessage (answering an SSLRequest with 'N' first), which must ask for
   * `version` (3.0 unless told); returns its parameters.
   */
  async startup(version = 196608): Promise<Map<string, string>> {
    for (;;) {
      const length = await this.int32();
      const body = await this.take(length - 4);
      const code = new DataView(body.buffer).getInt32(0);
      if (code === SSL_REQUEST) {
        await this.send(encoder.encode("N"));
        continue;
      }
      assert.equal(code, version, `protocol ${version >> 16}.${version & 0xffff}`);
      const parts = decoder.decode(body.subarray(4)).split("\0");
      const params = new Map<string, string>();
      for (let i = 0; i + 1 < parts.length && parts[i] !== ""; i += 2) {
        params.set(parts[i], parts[i + 1]);
      }
      return params;
    }
  }

  /** Reads one frontend message. */
  async message(): Promise<{ type: string; body: Uint8Array }> {
    const type = String.fromCharCode((await this.take(1))[0]);
    const length = await this.int32();
    return { type, body: await this.take(length - 4) };
  }

  /**
   * Reads the messages of one request: up to and including Sync, or one simple Query.
   * Null when the client terminates or closes between requests.
   */
  async segment(): Promise<FrontendMessage[] | null> {
    const out: FrontendMessage[] = [];
    for (;;) {
      if (out.length === 0 && this.#filled === this.#read && !(await this.#fill())) return null;
      const m = await this.message();
      if (m.type === "X") return null;
      out.push(m);
      if (m.type === "S" || m.type === "Q") return out;
    }
  }

  async send(bytes: Uint8Array): Promise<void> {
    for (let off = 0; off < bytes.length;) off += await this.conn.write(bytes.subarray(off));
  }

  /** Completes startup without authentication: reads the StartupMessage, sends STARTUP_OK. */
  async handshake(): Promise<Map<string, string>> {
    const params = await this.startup();
    await this.send(STARTUP_OK);
    return params;
  }

  /** Closes our end (idempotent). */
  close(): void {
    try {
      this.conn.close();
    } catch {
      // already closed
    }
  }

  /**
   * Everything the client sends from now until it closes its end (or `ms` pass): the bytes
   * already buffered, then the rest of the stream.
   */
  async rest(ms: number): Promise<{ closed: boolean; bytes: Uint8Array }> {
    const parts: Uint8Array[] = [this.#buf.slice(this.#read, this.#filled)];
    this.#read = this.#filled = 0;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const expired = new Promise<false>((r) => timer = setTimeout(() => r(false), ms));
    const eof = (async () => {
      try {
        for (;;) {
          const chunk = new Uint8Array(4096);
          const n = await this.conn.read(chunk);
          if (n === null) break;
          parts.push(chunk.subarray(0, n));
        }
      } catch {
        // reset by the client, or closed by us: either way it is over
      }
      return true as const;
    })();
    try {
      const closed = await Promise.race([eof, expired]);
      return { closed, bytes: concat(...parts) };
    } finally {
      clearTimeout(timer);
    }
  }

  /** Whether the client closes its end within `ms` (anything it still sends is skipped). */
  async closedWithin(ms: number): Promise<boolean> {
    const eof = (async () => {
      try {
        while ((await this.conn.read(new Uint8Array(4096))) !== null) { /* skip */ }
      } catch {
        // reset by the client, or closed by us: either way it is over
      }
      return true as const;
    })();
    return await within(eof, ms, "the client's close").catch(() => false);
  }
}

// ---------------------------------------------------------------------------------------------
// Correct answers

/** What a fake query returns. */
export interface FakeResult {
  columns: FakeColumn[];
  rows: (string | Uint8Array | null)[][];
}

/** Answers a query by its text and (text) parameters; columns must depend on the text alone. */
export type Responder = (text: string, params: (string | null)[]) => FakeResult;

/**
 * The default: the `fetch_types` catalog query returns no rows; anything else returns one
 * text column `x` holding the first parameter, or "ok" without parameters.
 */
export const defaultResponder: Responder = (text, params) => {
  if (text.includes("pg_catalog.pg_type")) {
    return {
      columns: [{ name: "oid", type: 23 }, { name: "typarray", type: 23 }, {
        name: "typdelim",
        type: 25,
      }],
      rows: [],
    };
  }
  return { columns: [{ name: "x", type: 25 }], rows: [[params[0] ?? "ok"]] };
};

/** Reads C strings and integers from a frontend message body. */
class BodyReader {
  at = 0;
  constructor(readonly body: Uint8Array) {}
  cstr(): string {
    const stop = this.body.indexOf(0, this.at);
    assert.ok(stop !== -1, "unterminated string in a frontend message");
    const s = decoder.decode(this.body.subarray(this.at, stop));
    this.at = stop + 1;
    return s;
  }
  byte(): string {
    return String.fromCharCode(this.body[this.at++]);
  }
  int16(): number {
    const v = new DataView(this.body.buffer, this.body.byteOffset).getInt16(this.at);
    this.at += 2;
    return v;
  }
  int32(): number {
    const v = new DataView(this.body.buffer, this.body.byteOffset).getInt32(this.at);
    this.at += 4;
    return v;
  }
  bytes(n: number): Uint8Array {
    const out = this.body.subarray(this.at, this.at + n);
    this.at += n;
    return out;
  }
}

/** The statements and portal of one fake connection; answers each request correctly. */
export class FakeSession {
  readonly statements = new Map<string, string>();
  #portal: { text: string; params: (string | null)[] } | null = null;
  readonly respond: Responder;

  constructor(respond: Responder = defaultResponder) {
    this.respond = respond;
  }

  /** The text of the query a segment runs (Parse, Bind's statement, or Query). */
  textOf(segment: readonly FrontendMessage[]): string {
    for (const m of segment) {
      const r = new BodyReader(m.body);
      if (m.type === "Q") return r.cstr();
      if (m.type === "P") {
        r.cstr();
        return r.cstr();
      }
      if (m.type === "B") {
        r.cstr();
        return this.statements.get(r.cstr()) ?? "";
      }
    }
    return "";
  }

  /** The correct answer to one segment (updates the session's statements and portal). */
  answer(segment: readonly FrontendMessage[]): Uint8Array {
    const out: Uint8Array[] = [];
    for (const m of segment) {
      const r = new BodyReader(m.body);
      switch (m.type) {
        case "P": {
          const name = r.cstr();
          this.statements.set(name, r.cstr());
          out.push(parseComplete());
          break;
        }
        case "B": {
          r.cstr(); // portal (always unnamed here)
          const statement = r.cstr();
          const text = this.statements.get(statement);
          assert.ok(text !== undefined, `Bind to unknown statement ${statement}`);
          const formats = r.int16();
          for (let i = 0; i < formats; i++) r.int16();
          const params: (string | null)[] = [];
          for (let i = r.int16(); i > 0; i--) {
            const len = r.int32();
            params.push(len < 0 ? null : decoder.decode(r.bytes(len)));
          }
          this.#portal = { text, params };
          out.push(bindComplete());
          break;
        }
        case "D": {
          const kind = r.byte();
          const name = r.cstr();
          const text = kind === "S" ? this.statements.get(name) : this.#portal?.text;
          assert.ok(text !== undefined, `Describe of unknown ${kind} ${name}`);
          if (kind === "S") out.push(parameterDescription([]));
          const { columns } = this.respond(text, []);
          out.push(columns.length === 0 ? noData() : rowDescription(columns));
          break;
        }
        case "E": {
          const portal = this.#portal;
          assert.ok(portal !== null, "Execute without Bind");
          const { rows } = this.respond(portal.text, portal.params);
          for (const row of rows) out.push(dataRow(row));
          out.push(commandComplete(`SELECT ${rows.length}`));
          break;
        }
        case "C":
          r.byte();
          this.statements.delete(r.cstr());
          out.push(closeComplete());
          break;
        case "H":
          break;
        case "S":
          out.push(readyForQuery());
          break;
        case "Q": {
          const { columns, rows } = this.respond(r.cstr(), []);
          if (columns.length > 0) out.push(rowDescription(columns));
          for (const row of rows) out.push(dataRow(row));
          out.push(commandComplete(`SELECT ${rows.length}`), readyForQuery());
          break;
        }
        default:
          assert.fail(`the fake server does not handle frontend message ${m.type}`);
      }
    }
    return concat(...out);
  }

  /** Answers every request correctly until the client terminates or closes. */
  async serve(peer: Peer): Promise<void> {
    for (let seg = await peer.segment(); seg !== null; seg = await peer.segment()) {
      await peer.send(this.answer(seg));
    }
  }
}

/** Whether a segment is the driver's `fetch_types` catalog query. */
export function isFetchTypes(session: FakeSession, segment: readonly FrontendMessage[]): boolean {
  return session.textOf(segment).includes("pg_catalog.pg_type");
}

// ---------------------------------------------------------------------------------------------
// The listener

export interface FakeServer {
  port: number;
  /** What each handler returned (or threw), in accept order. */
  results: Promise<unknown>[];
  close(): Promise<void>;
}

/**
 * A TCP server on 127.0.0.1 that runs `handle` for each client (`index`: 0 for the first
 * connection accepted, 1 for the next...); close() cleans up everything.
 */
export function fakeServer(handle: (peer: Peer, index: number) => Promise<unknown>): FakeServer {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const conns = new Set<Deno.Conn>();
  const results: Promise<unknown>[] = [];
  const loop = (async () => {
    for (;;) {
      let conn: Deno.Conn;
      try {
        conn = await listener.accept();
      } catch {
        return; // listener closed
      }
      conns.add(conn);
      const result = handle(new Peer(conn), results.length);
      result.catch(() => {}); // inspected through `results` when the test cares
      results.push(result);
    }
  })();
  return {
    port: (listener.addr as Deno.NetAddr).port,
    results,
    async close() {
      listener.close();
      await loop;
      for (const conn of conns) {
        try {
          conn.close();
        } catch {
          // already closed
        }
      }
      await Promise.allSettled(results);
    },
  };
}

/** Runs `fn` against a fake server and always closes it. */
export async function withServer(
  handle: (peer: Peer, index: number) => Promise<unknown>,
  fn: (server: FakeServer) => Promise<void>,
): Promise<void> {
  const server = fakeServer(handle);
  try {
    await fn(server);
  } finally {
    await server.close();
  }
}

/** A client of a fake server on 127.0.0.1:`port`: plain TCP, a short connect timeout, quiet. */
export function fakeClient(port: number, extra: Options = {}): Sql {
  return postgres({
    host: "127.0.0.1",
    port,
    user: "fake",
    database: "fake",
    ssl: "disable",
    connect_timeout: 2,
    onnotice: () => {},
    ...extra,
  });
}
