// A server the bench starts and load-tests (the HTTP servers of the http and orm_http suites): it
// prints `{"port":N}` once it is ready, runs until its standard input closes, then shuts down
// cleanly (so `--cpu-prof` gets to write its profile), else is killed.
import { kill } from "./probe.ts";

/** A running server: its process id, its port, and how to stop it (or `await using` it). */
export interface Server extends AsyncDisposable {
  pid: number;
  port: number;
  stop(): Promise<void>;
}

/** Starts `command` (program and arguments) and waits for its port; `name` labels an error. */
export async function startServer(name: string, command: string[]): Promise<Server> {
  const [cmd, ...args] = command;
  const child = new Deno.Command(cmd, { args, stdin: "piped", stdout: "piped" }).spawn();
  const stdin = child.stdin.getWriter();
  const stop = async () => {
    await stdin.close().catch(() => {});
    const timer = setTimeout(() => kill(child), 20_000);
    await child.status.finally(() => clearTimeout(timer));
  };
  const lines = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  const timer = setTimeout(() => lines.cancel().catch(() => {}), 60_000);
  let text = "";
  try {
    for (let r; !text.includes("\n") && !(r = await lines.read()).done;) text += r.value;
    clearTimeout(timer);
    // The rest is drained, so a chatty server never blocks on a full pipe.
    (async () => {
      while (!(await lines.read()).done) { /* drain */ }
    })().catch(() => {});
    const port = JSON.parse(text.split("\n")[0]).port;
    if (typeof port !== "number") throw new Error(`no port in ${text}`);
    return { pid: child.pid, port, stop, [Symbol.asyncDispose]: stop };
  } catch (e) {
    clearTimeout(timer);
    await stop();
    throw new Error(`${name}: the server did not start: ${(e as Error).message}`);
  }
}
