/**
 * A loopback proxy that records, per client connection, the conversation as flights: runs of
 * bytes in one direction until the other side speaks. The client's flights are its round trips,
 * so a test can see what rode together (plaintext: by message type) and count the waits.
 */

/** One run of bytes in one direction. */
export interface Flight {
  from: "client" | "server";
  bytes: Uint8Array;
}

/** A running recorder in front of `hostname:port`. */
export interface FlightRecorder {
  /** Where clients connect instead. */
  port: number;
  /** Every connection's flights, in accept order. */
  connections: Flight[][];
  close(): Promise<void>;
}

function append(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
}

/**
 * Starts a recording proxy on `hostname` to `to` (read at each connection, so a test may point
 * it elsewhere between clients); close() ends every pump.
 */
export function flightRecorder(
  to: { hostname: string; port: number },
  hostname = "127.0.0.1",
): FlightRecorder {
  const listener = Deno.listen({ hostname, port: 0 });
  const connections: Flight[][] = [];
  const conns = new Set<Deno.Conn>();
  const pumps: Promise<void>[] = [];
  const closeQuietly = (c: Deno.Conn) => {
    try {
      c.close();
    } catch {
      // already closed
    }
  };
  const pump = async (
    from: Deno.Conn,
    into: Deno.Conn,
    side: Flight["from"],
    flights: Flight[],
  ) => {
    const buf = new Uint8Array(1 << 16);
    try {
      for (;;) {
        const n = await from.read(buf);
        if (n === null) break;
        const last = flights[flights.length - 1];
        if (last?.from === side) last.bytes = append(last.bytes, buf.subarray(0, n));
        else flights.push({ from: side, bytes: buf.slice(0, n) });
        for (let off = 0; off < n;) off += await into.write(buf.subarray(off, n));
      }
    } catch {
      // one side went away
    } finally {
      closeQuietly(from);
      closeQuietly(into);
    }
  };
  const loop = (async () => {
    for (;;) {
      let client: Deno.Conn;
      try {
        client = await listener.accept();
      } catch {
        return;
      }
      conns.add(client);
      // Nagle against delayed ACKs would hold a short write ~40 ms and blur the timing.
      (client as Deno.TcpConn).setNoDelay(true);
      const flights: Flight[] = [];
      connections.push(flights);
      try {
        const server = await Deno.connect({ hostname: to.hostname, port: to.port });
        server.setNoDelay(true);
        conns.add(server);
        pumps.push(
          pump(client, server, "client", flights),
          pump(server, client, "server", flights),
        );
      } catch {
        closeQuietly(client);
      }
    }
  })();
  return {
    port: (listener.addr as Deno.NetAddr).port,
    connections,
    async close() {
      listener.close();
      await loop;
      for (const c of conns) closeQuietly(c);
      await Promise.all(pumps);
    },
  };
}

/**
 * The frontend message types in a plaintext client flight: the letter of each message, and
 * "startup" / "ssl" for the untyped first messages (told apart by their protocol code).
 */
export function frontendTypes(bytes: Uint8Array): string[] {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const out: string[] = [];
  for (let at = 0; at < bytes.length;) {
    const first = bytes[at];
    if (first === 0) {
      // An untyped message: int32 length, int32 code.
      const length = view.getInt32(at);
      const code = view.getInt32(at + 4);
      out.push(code === 80877103 ? "ssl" : code === 80877102 ? "cancel" : "startup");
      at += length;
    } else {
      out.push(String.fromCharCode(first));
      at += 1 + view.getInt32(at + 1);
    }
  }
  return out;
}
