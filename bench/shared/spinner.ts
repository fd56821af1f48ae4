// Keeps one CPU core busy from a worker thread. On an otherwise idle virtual machine a strictly
// serial round trip can be dominated by cores waking from idle (~100 µs instead of ~20 µs seen
// here), so suite 2 measures serial latency both as is and with a core kept awake by this.

/** A running spinner; stop() ends it (it also ends by itself after its time limit). */
export interface Spinner {
  stop(): Promise<void>;
}

// A busy loop in slices that checks a shared stop flag: worker.terminate() does not interrupt
// a busy loop here, so the flag (and the time limit) is what ends it.
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

/** Starts spinning one core for at most maxMs; resolves once the worker is spinning. */
export async function startSpinner(maxMs: number): Promise<Spinner> {
  const url = URL.createObjectURL(new Blob([SOURCE], { type: "text/javascript" }));
  const worker = new Worker(url, { type: "module" });
  const flag = new SharedArrayBuffer(4);
  // The worker says "spinning", then "stopped" once stopped or past its time limit, which may
  // come before stop() is called (a measurement that outlasts maxMs): remember it.
  let spinning!: () => void;
  let stopped!: () => void;
  const started = new Promise<void>((r) => spinning = r);
  const ended = new Promise<void>((r) => stopped = r);
  worker.onmessage = (e) => (e.data === "spinning" ? spinning() : stopped());
  worker.postMessage({ flag, maxMs });
  await started;
  return {
    async stop() {
      Atomics.store(new Int32Array(flag), 0, 1);
      await ended;
      worker.terminate();
      URL.revokeObjectURL(url);
    },
  };
}
