// A TCP proxy on 127.0.0.1 that delays every chunk by a fixed time in each direction, to stand
// in for a real network (a Deno Deploy handler talking to a database in another region).
// Each direction has a delay queue: the reader stamps each chunk with its due time and keeps
// reading, the writer sends chunks in order once due. So latency is added but throughput is
// not serialised, as on a real link (a sleep per chunk before reading on would be neither).

/** A running proxy. */
export interface DelayProxy {
  /** Port on 127.0.0.1 to connect to instead of the server. */
  port: number;
  /** Stops listening and closes every proxied connection. */
  close(): Promise<void>;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

function closeQuietly(c: Deno.Conn): void {
  try {
    c.close();
  } catch {
    // already closed
  }
}

/** Copies from → to, each chunk held back until `delayMs` after it was read. */
async function delayedPipe(from: Deno.Conn, to: Deno.Conn, delayMs: number): Promise<void> {
  const queue: { due: number; data: Uint8Array }[] = [];
  let head = 0;
  let ended = false;
  let wake: (() => void) | null = null;
  const notify = () => {
    wake?.();
    wake = null;
  };

  async function drain(): Promise<void> {
    while (true) {
      if (head === queue.length) {
        if (ended) return;
        await new Promise<void>((r) => wake = r);
        continue;
      }
      const item = queue[head];
      const wait = item.due - performance.now();
      if (wait > 0) await sleep(wait);
      queue[head++] = undefined as never; // let the chunk be collected
      if (head > 1024 && head * 2 > queue.length) {
        queue.splice(0, head);
        head = 0;
      }
      let off = 0;
      while (off < item.data.length) off += await to.write(item.data.subarray(off));
    }
  }

  const writer = (async () => {
    try {
      await drain();
    } catch {
      // the peer went away: stop reading too, which ends this direction
      closeQuietly(from);
    }
  })();

  const buf = new Uint8Array(64 * 1024);
  try {
    while (true) {
      const n = await from.read(buf);
      if (n === null) break;
      queue.push({ due: performance.now() + delayMs, data: buf.slice(0, n) });
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

/** Starts a proxy to target that adds `delayMs` to every chunk in each direction. */
export function startDelayProxy(
  target: { hostname: string; port: number },
  delayMs: number,
): DelayProxy {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const open = new Set<Deno.Conn>();
  const sessions = new Set<Promise<void>>();

  const serve = async (client: Deno.TcpConn) => {
    let server: Deno.TcpConn | undefined;
    try {
      server = await Deno.connect(target);
      open.add(server);
      for (const c of [client, server]) c.setNoDelay(true);
      // Either side finishing (or failing) ends the whole session.
      await Promise.race([
        delayedPipe(client, server, delayMs),
        delayedPipe(server, client, delayMs),
      ]).catch(() => {});
    } finally {
      closeQuietly(client);
      open.delete(client);
      if (server) {
        closeQuietly(server);
        open.delete(server);
      }
    }
  };

  const accepting = (async () => {
    try {
      for await (const client of listener) {
        open.add(client);
        const s = serve(client).catch(() => {});
        sessions.add(s);
        s.finally(() => sessions.delete(s));
      }
    } catch {
      // listener closed
    }
  })();

  return {
    port: (listener.addr as Deno.NetAddr).port,
    async close() {
      try {
        listener.close();
      } catch {
        // already closed
      }
      for (const c of open) closeQuietly(c);
      await accepting;
      await Promise.allSettled([...sessions]);
    },
  };
}

/**
 * Runs the proxy in a worker (see proxy_worker.ts) and resolves once it listens. close() shuts
 * the proxy down inside the worker, then terminates the worker.
 */
export function startDelayProxyWorker(
  target: { hostname: string; port: number },
  delayMs: number,
): Promise<DelayProxy> {
  const worker = new Worker(new URL("./proxy_worker.ts", import.meta.url), { type: "module" });
  const next = () =>
    new Promise<{ type: string; port?: number; message?: string }>((resolve, reject) => {
      worker.onmessage = (e) => resolve(e.data);
      worker.onerror = (e) => {
        e.preventDefault();
        reject(new Error(`proxy worker: ${e.message}`));
      };
    });
  const fail = (m: { type: string; message?: string }) => {
    worker.terminate();
    throw new Error(`proxy worker: ${m.message ?? m.type}`);
  };
  const started = next();
  worker.postMessage({ type: "start", target, delayMs });
  return started.then((m) => {
    if (m.type !== "started" || m.port === undefined) return fail(m);
    return {
      port: m.port,
      async close() {
        const closed = next();
        worker.postMessage({ type: "close" });
        try {
          await closed;
        } finally {
          worker.terminate();
        }
      },
    };
  });
}
