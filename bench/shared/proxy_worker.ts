// Hosts the delay proxy (proxy.ts) in a worker, so its timers and copies run on their own
// event loop: in the benchmark's thread they would wait behind a driver decoding a large
// result and add delay that depends on the driver, not on the simulated network.
import { type DelayProxy, startDelayProxy } from "./proxy.ts";

/** Messages from the parent. */
export type ProxyCommand =
  | { type: "start"; target: { hostname: string; port: number }; delayMs: number }
  | { type: "close" };

/** Messages to the parent. */
export type ProxyEvent = { type: "started"; port: number } | { type: "closed" } | {
  type: "error";
  message: string;
};

const scope = self as unknown as {
  onmessage: ((e: MessageEvent<ProxyCommand>) => void) | null;
  postMessage(m: ProxyEvent): void;
};

let proxy: DelayProxy | undefined;
scope.onmessage = async (e) => {
  try {
    if (e.data.type === "start") {
      proxy = startDelayProxy(e.data.target, e.data.delayMs);
      scope.postMessage({ type: "started", port: proxy.port });
    } else {
      await proxy?.close();
      scope.postMessage({ type: "closed" });
    }
  } catch (err) {
    scope.postMessage({ type: "error", message: (err as Error).message });
  }
};
