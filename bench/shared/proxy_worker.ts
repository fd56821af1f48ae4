// The worker that hosts a delay proxy for startDelayProxyWorker (proxy.ts): given a target it
// starts one and answers its port; given null it closes it and answers 0.
import { type DelayProxy, startDelayProxy } from "./proxy.ts";

type Start = { target: { hostname: string; port: number }; delayMs: number } | null;
const scope = self as unknown as {
  onmessage(e: MessageEvent<Start>): void;
  postMessage(port: number): void;
};
let proxy: DelayProxy | undefined;
scope.onmessage = async ({ data }) => {
  if (data) proxy = startDelayProxy(data.target, data.delayMs);
  else await proxy?.close();
  scope.postMessage(data ? proxy!.port : 0);
};
