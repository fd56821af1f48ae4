/**
 * A loopback TCP proxy that injects connection faults for the chaos soak: `drop()` cuts every
 * connection through it at once, and while `stall(true)` it accepts new connections and never
 * answers them (a client's connect attempt then times out). It remembers the local port of each
 * upstream socket it closed, which is the `client_port` the server lists for that backend, so a
 * sampler can leave out backends whose connection is already gone but that have not exited yet.
 */
export interface FaultProxy {
  /** Where clients connect (127.0.0.1). */
  readonly port: number;
  /** `client_port`s (as the server sees them) of upstream connections the proxy closed. */
  readonly closedPorts: ReadonlySet<number>;
  /** Connections cut by `drop()`. */
  readonly dropped: number;
  /** Connections accepted while stalled. */
  readonly stalled: number;
  /** Cuts every connection now; new ones are accepted as usual. */
  drop(): void;
  /** While on, new connections are accepted and never answered. */
  stall(on: boolean): void;
  /** Stops listening and closes everything. */
  close(): Promise<void>;
}

interface Pair {
  client: Deno.Conn;
  server: Deno.Conn | null;
  port: number;
}

function closeQuietly(c: Deno.Conn | null): void {
  try {
    c?.close();
  } catch { /* already closed */ }
}

/** Starts a proxy to `target` on a free loopback port. */
export function faultProxy(target: { host: string; port: number }): FaultProxy {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const pairs = new Set<Pair>();
  const stalledConns = new Set<Deno.Conn>();
  const closedPorts = new Set<number>();
  const pumps = new Set<Promise<void>>();
  let stalling = false;
  let dropped = 0;
  let stalled = 0;

  const end = (pair: Pair) => {
    if (!pairs.delete(pair)) return;
    if (pair.port > 0) closedPorts.add(pair.port); // before the server can see the close
    closeQuietly(pair.client);
    closeQuietly(pair.server);
  };

  const pump = async (from: Deno.Conn, to: Deno.Conn, pair: Pair) => {
    const buf = new Uint8Array(64 * 1024);
    try {
      for (;;) {
        const n = await from.read(buf);
        if (n === null) break;
        let off = 0;
        while (off < n) off += await to.write(buf.subarray(off, n));
      }
    } catch {
      // either side closed
    }
    end(pair);
  };

  const track = (p: Promise<void>) => {
    pumps.add(p);
    p.finally(() => pumps.delete(p));
  };

  const accepting = (async () => {
    for await (const client of listener) {
      if (stalling) {
        stalled++;
        stalledConns.add(client);
        // Never answered; read only to notice when the client gives up.
        track((async () => {
          const buf = new Uint8Array(1024);
          try {
            while (await client.read(buf) !== null) { /* discard */ }
          } catch { /* closed */ }
          stalledConns.delete(client);
          closeQuietly(client);
        })());
        continue;
      }
      const pair: Pair = { client, server: null, port: 0 };
      pairs.add(pair);
      track((async () => {
        try {
          const server = await Deno.connect({ hostname: target.host, port: target.port });
          pair.server = server;
          pair.port = (server.localAddr as Deno.NetAddr).port;
          if (!pairs.has(pair)) { // dropped while connecting
            closedPorts.add(pair.port);
            return closeQuietly(server);
          }
        } catch {
          return end(pair); // the server is down: the client sees its connection close
        }
        await Promise.all([pump(client, pair.server, pair), pump(pair.server, client, pair)]);
      })());
    }
  })();

  return {
    port: (listener.addr as Deno.NetAddr).port,
    closedPorts,
    get dropped() {
      return dropped;
    },
    get stalled() {
      return stalled;
    },
    drop() {
      for (const pair of [...pairs]) {
        dropped++;
        end(pair);
      }
    },
    stall(on: boolean) {
      stalling = on;
    },
    async close() {
      listener.close();
      await accepting.catch(() => {});
      for (const pair of [...pairs]) end(pair);
      for (const c of stalledConns) closeQuietly(c);
      await Promise.allSettled([...pumps]);
    },
  };
}
