/**
 * A loopback proxy between a client and the test server that lets a test see and steer the
 * wire: while `state.recording` it counts the chunks the driver writes and keeps their bytes,
 * while `state.gate` is set it holds the server's answers back, while `state.swallow` is set it
 * drops what the driver writes (counting it), and `drop()` cuts every connection at once.
 */
import postgres, { type Options, type Sql } from "../../mod.ts";
import { quiet } from "./connect.ts";

/** What the test reads and sets while the proxy runs. */
export interface TapState {
  recording: boolean;
  /** Chunks the driver wrote while recording. */
  chunks: number;
  /** Their bytes. */
  bytes: Uint8Array[];
  /** While set, answers wait for it. */
  gate: Promise<void> | null;
  /** While true, what the driver writes is counted in `swallowed` and never reaches the server. */
  swallow: boolean;
  /** Chunks swallowed. */
  swallowed: number;
}

/** A running proxy and a client (max 1) connected through it. */
export interface TapProxy {
  sql: Sql;
  state: TapState;
  /** The type letter of each frontend message recorded (recording starts between messages). */
  types(): string[];
  /** Closes every connection through the proxy (both sides) now; new ones are still accepted. */
  drop(): void;
  [Symbol.asyncDispose](): Promise<void>;
}

/** Starts a proxy in front of the server `url` points at, and a client through it. */
export function tapProxy(url: string, options: Options = {}): TapProxy {
  const target = new URL(url.replace(/^postgres(ql)?:/, "http:"));
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const state: TapState = {
    recording: false,
    chunks: 0,
    bytes: [],
    gate: null,
    swallow: false,
    swallowed: 0,
  };
  const pumps: Promise<void>[] = [];
  // Disposing opens any gate still shut: a test that failed with answers held must not hang.
  let disposed!: () => void;
  const disposing = new Promise<void>((resolve) => disposed = resolve);
  const open = new Set<Deno.Conn>();
  const close = (c: Deno.Conn) => {
    open.delete(c);
    try {
      c.close();
    } catch { /* already closed */ }
  };
  const accept = (async () => {
    for await (const client of listener) {
      const server = await Deno.connect({ hostname: target.hostname, port: Number(target.port) });
      open.add(client);
      open.add(server);
      const up = async () => {
        const buf = new Uint8Array(1 << 20);
        for (;;) {
          const n = await client.read(buf).catch(() => null);
          if (n === null) break;
          if (state.recording) {
            state.chunks++;
            state.bytes.push(buf.slice(0, n));
          }
          if (state.swallow) {
            state.swallowed++;
            continue;
          }
          await server.write(buf.subarray(0, n)).catch(() => {});
        }
        close(server);
      };
      const down = async () => {
        const buf = new Uint8Array(1 << 20);
        for (;;) {
          const n = await server.read(buf).catch(() => null);
          if (n === null) break;
          if (state.gate !== null) await Promise.race([state.gate, disposing]);
          const sent = await client.write(buf.subarray(0, n)).catch(() => null);
          if (sent === null) break;
        }
        close(client);
      };
      pumps.push(up(), down());
    }
  })();
  const port = (listener.addr as Deno.NetAddr).port;
  const sql = postgres(url.replace(/@[^/]+\//, `@127.0.0.1:${port}/`), {
    max: 1,
    ssl: false,
    ...quiet,
    ...options,
  });
  return {
    sql,
    state,
    types() {
      const all = new Uint8Array(state.bytes.reduce((n, b) => n + b.length, 0));
      let at = 0;
      for (const b of state.bytes) all.set(b, (at += b.length) - b.length);
      const view = new DataView(all.buffer);
      const out: string[] = [];
      for (let i = 0; i < all.length; i += 1 + view.getInt32(i + 1)) {
        out.push(String.fromCharCode(all[i]));
      }
      return out;
    },
    drop() {
      for (const c of [...open]) close(c);
    },
    async [Symbol.asyncDispose]() {
      disposed();
      await sql.end({ timeout: 5 });
      listener.close();
      await accept.catch(() => {});
      await Promise.allSettled(pumps);
    },
  };
}
