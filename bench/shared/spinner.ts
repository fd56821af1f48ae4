// Keeps one CPU core busy from a worker thread. On an otherwise idle virtual machine a strictly
// serial round trip can be dominated by cores waking from idle (~100 µs instead of ~20 µs seen
// here), so the throughput suite measures serial latency both as is and with a core kept awake
// by this.

// A busy loop in slices that checks a shared stop flag: worker.terminate() does not interrupt
// a busy loop here, so the flag (and the time limit) is what ends it. It says "spinning", then
// "stopped" once stopped or past its time limit.
const SOURCE = `
self.onmessage = (e) => {
  const { flag, maxMs } = e.data;
  const stop = new Int32Array(flag);
  const end = performance.now() + maxMs;
  let x = 0;
  self.postMessage("spinning");
  while (Atomics.load(stop, 0) === 0 && performance.now() < end) {
    for (let i = 0; i < 1e4; i++) x += i;
  }
  self.postMessage(x > 0 ? "stopped" : "stopped.");
};
`;

/** Starts spinning one core for at most maxMs; resolves once the worker spins (`await using`). */
export async function startSpinner(maxMs: number): Promise<AsyncDisposable> {
  const url = URL.createObjectURL(new Blob([SOURCE], { type: "text/javascript" }));
  const worker = new Worker(url, { type: "module" });
  const flag = new SharedArrayBuffer(4);
  // "stopped" may come before stop() is called (a measurement that outlasts maxMs): remember it.
  const { promise: started, resolve: spinning } = Promise.withResolvers<void>();
  const { promise: ended, resolve: stopped } = Promise.withResolvers<void>();
  worker.onmessage = (e) => (e.data === "spinning" ? spinning() : stopped());
  worker.postMessage({ flag, maxMs });
  await started;
  return {
    async [Symbol.asyncDispose]() {
      Atomics.store(new Int32Array(flag), 0, 1);
      await ended;
      worker.terminate();
      URL.revokeObjectURL(url);
    },
  };
}
