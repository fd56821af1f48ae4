// A TCP proxy on 127.0.0.1 that delays every chunk by a fixed time in each direction, to stand
// in for a real network (a Deno Deploy handler talking to a database in another region). Each
// direction reads on at once, stamping each chunk with its due time, while the chunks are written
// in order once due (a chain of writes): so latency is added but throughput is not serialised,
// as on a real link (a sleep per chunk before reading on would be neither). It runs in a worker
// (this same module), so its timers and copies have their own event loop: in the benchmark's
// thread they would wait behind a driver decoding a large result and add delay that depends on
// the driver, not on the simulated network.

/** A running proxy: the port on 127.0.0.1 to connect to instead of the server (`await using`). */
export type DelayProxy = { port: number; close(): Promise<void> } & AsyncDisposable;
type Target = { hostname: string; port: number };

/** Closes a connection or listener, quietly if it is closed already. */
export function closeQuietly(c: Deno.Conn | Deno.Listener): void {
  try {
    c.close();
  } catch { /* already closed */ }
}

/** Copies from → to, each chunk held back until `delayMs` after it was read. */
async function delayedPipe(from: Deno.Conn, to: Deno.Conn, delayMs: number): Promise<void> {
  let written = Promise.resolve();
  const buf = new Uint8Array(64 * 1024);
  try {
    for (let n; (n = await from.read(buf)) !== null;) {
      const [data, due] = [buf.slice(0, n), performance.now() + delayMs];
      written = written.then(async () => {
        const wait = due - performance.now();
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        for (let off = 0; off < data.length;) off += await to.write(data.subarray(off));
      });
      // The peer went away: stop reading too, which ends this direction.
      written.catch(() => closeQuietly(from));
    }
  } catch { /* the connection was closed under us: the end of the stream */ }
  await written.catch(() => {});
}

/** Starts a proxy to `target` that adds `delayMs` to every chunk in each direction. */
export function startDelayProxy(target: Target, delayMs: number): DelayProxy {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const open = new Set<Deno.Conn>();
  const sessions = new Set<Promise<void>>();
  const serve = async (client: Deno.TcpConn) => {
    open.add(client);
    const server = await Deno.connect(target).catch(() => undefined);
    const both = server ? [client, server] : [client];
    for (const c of both) {
      open.add(c);
      c.setNoDelay(true);
    }
    try {
      // Either side finishing (or failing) ends the whole session.
      if (server) {
        await Promise.race([
          delayedPipe(client, server, delayMs),
          delayedPipe(server, client, delayMs),
        ]);
      }
    } finally {
      for (const c of both) {
        closeQuietly(c);
        open.delete(c);
      }
    }
  };
  const accepting = (async () => {
    try {
      for await (const client of listener) {
        const s = serve(client).catch(() => {});
        sessions.add(s);
        s.finally(() => sessions.delete(s));
      }
    } catch { /* listener closed */ }
  })();
  const close = async () => {
    closeQuietly(listener);
    open.forEach(closeQuietly);
    await accepting;
    await Promise.allSettled([...sessions]);
  };
  return { port: (listener.addr as Deno.NetAddr).port, close, [Symbol.asyncDispose]: close };
}

/** Runs the proxy in a worker; the worker answers each message: the port, then 0 once closed. */
export async function startDelayProxyWorker(target: Target, delayMs: number): Promise<DelayProxy> {
  const worker = new Worker(import.meta.url, { type: "module" });
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
  const close = async () => {
    const closed = answer();
    worker.postMessage(null);
    await closed.finally(() => worker.terminate());
  };
  return { port, close, [Symbol.asyncDispose]: close };
}

// In the worker: given a target, start a proxy and answer its port; given null, close it.
if (import.meta.main && "WorkerGlobalScope" in globalThis) {
  const scope = self as unknown as {
    onmessage(e: MessageEvent): void;
    postMessage(n: number): void;
  };
  let proxy: DelayProxy | undefined;
  scope.onmessage = async ({ data }: MessageEvent<{ target: Target; delayMs: number } | null>) => {
    if (data) proxy = startDelayProxy(data.target, data.delayMs);
    else await proxy?.close();
    scope.postMessage(data ? proxy!.port : 0);
  };
}
