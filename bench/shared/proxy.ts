// A TCP proxy on 127.0.0.1 that delays every chunk by a fixed time in each direction, to stand
// in for a real network (a Deno Deploy handler talking to a database in another region).
// Each direction has a delay queue: the reader stamps each chunk with its due time and keeps
// reading, the writer sends chunks in order once due. So latency is added but throughput is
// not serialised, as on a real link (a sleep per chunk before reading on would be neither).
// With no delay and a `record` array it is the throughput suite's recording proxy: it keeps
// what the first client sends (bench/peers/pingpong.ts replays it).

/** A running proxy. */
export interface DelayProxy {
  /** Port on 127.0.0.1 to connect to instead of the server. */
  port: number;
  /** Stops listening and closes every proxied connection. */
  close(): Promise<void>;
}

/** Closes a connection or listener, quietly if it is closed already. */
export function closeQuietly(c: Deno.Conn | Deno.Listener): void {
  try {
    c.close();
  } catch { /* already closed */ }
}

/** Copies from → to, each chunk held back until `delayMs` after it was read (and kept in record). */
async function delayedPipe(from: Deno.Conn, to: Deno.Conn, delayMs: number, record?: Uint8Array[]) {
  const queue: { due: number; data: Uint8Array }[] = [];
  let head = 0;
  let ended = false;
  let wake: (() => void) | null = null;
  const notify = () => {
    wake?.();
    wake = null;
  };
  const writer = (async () => {
    try {
      while (head < queue.length || !ended) {
        if (head === queue.length) {
          await new Promise<void>((r) => wake = r);
          continue;
        }
        const item = queue[head];
        const wait = item.due - performance.now();
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        queue[head++] = undefined as never; // let the chunk be collected
        if (head > 1024 && head * 2 > queue.length) {
          queue.splice(0, head);
          head = 0;
        }
        for (let off = 0; off < item.data.length;) off += await to.write(item.data.subarray(off));
      }
    } catch {
      closeQuietly(from); // the peer went away: stop reading too, which ends this direction
    }
  })();
  const buf = new Uint8Array(64 * 1024);
  try {
    for (let n; (n = await from.read(buf)) !== null;) {
      const data = buf.slice(0, n);
      record?.push(data);
      queue.push({ due: performance.now() + delayMs, data });
      notify();
    }
  } catch {
    // the connection was closed under us: treat as end of stream
  } finally {
    ended = true;
    notify();
  }
  await writer;
}

/**
 * Starts a proxy to target that adds `delayMs` to every chunk in each direction; `record` gets
 * every chunk the first client sends.
 */
export function startDelayProxy(
  target: { hostname: string; port: number },
  delayMs: number,
  record?: Uint8Array[],
): DelayProxy {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const open = new Set<Deno.Conn>();
  const sessions = new Set<Promise<void>>();
  const serve = async (client: Deno.TcpConn, kept?: Uint8Array[]) => {
    const server = await Deno.connect(target).catch(() => undefined);
    if (server) open.add(server);
    try {
      for (const c of [client, server]) c?.setNoDelay(true);
      // Either side finishing (or failing) ends the whole session.
      if (server) {
        await Promise.race([
          delayedPipe(client, server, delayMs, kept),
          delayedPipe(server, client, delayMs),
        ]);
      }
    } finally {
      for (const c of [client, server]) {
        if (!c) continue;
        closeQuietly(c);
        open.delete(c);
      }
    }
  };
  const accepting = (async () => {
    try {
      for await (const client of listener) {
        open.add(client);
        const s = serve(client, record).catch(() => {});
        record = undefined;
        sessions.add(s);
        s.finally(() => sessions.delete(s));
      }
    } catch { /* listener closed */ }
  })();
  return {
    port: (listener.addr as Deno.NetAddr).port,
    async close() {
      closeQuietly(listener);
      open.forEach(closeQuietly);
      await accepting;
      await Promise.allSettled([...sessions]);
    },
  };
}

/**
 * Runs the proxy in a worker (proxy_worker.ts), so its timers and copies run on their own event
 * loop: in the benchmark's thread they would wait behind a driver decoding a large result and
 * add delay that depends on the driver, not on the simulated network.
 */
export async function startDelayProxyWorker(
  target: { hostname: string; port: number },
  delayMs: number,
): Promise<DelayProxy> {
  const worker = new Worker(new URL("./proxy_worker.ts", import.meta.url), { type: "module" });
  // The worker answers each message: the port once it listens, anything once it has closed.
  const answer = () =>
    new Promise<number>((resolve, reject) => {
      worker.onmessage = (e) => resolve(e.data);
      worker.onerror = (e) => {
        e.preventDefault();
        reject(new Error(`proxy worker: ${e.message}`));
      };
    });
  const started = answer();
  worker.postMessage({ target, delayMs });
  const port = await started.catch((e) => {
    worker.terminate();
    throw e;
  });
  return {
    port,
    async close() {
      const closed = answer();
      worker.postMessage(null);
      await closed.finally(() => worker.terminate());
    },
  };
}
