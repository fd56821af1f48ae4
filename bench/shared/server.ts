// A server the bench starts and load-tests (the HTTP servers of the http and orm_http suites): it
// prints `{"port":N}` once it is ready, runs until its standard input closes, then shuts down
// cleanly (so `--cpu-prof` gets to write its profile), else is killed. loadServer is the one
// way such a server is measured: its answer checked, warmed up, loaded for a window.
import { deepStrictEqual } from "node:assert/strict";
import { type LoadTool, runLoad } from "./loadgen.ts";
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

/** How a server is loaded: the generator, its connections and threads, warm-up and window (s). */
export type LoadPlan = {
  tool: LoadTool;
  connections: number;
  threads: number;
  warmupSeconds: number;
  seconds: number;
};

/**
 * Starts `command`'s server, checks that its first page (`/users?after=0`) is `expected`, warms
 * it up, then loads it for the measured window; `read` (given the server's pid) is called just
 * before the window and just after it, while the server still runs, to take its figures around it.
 */
export async function loadServer<R>(
  name: string,
  command: string[],
  expected: unknown,
  plan: LoadPlan,
  read: (pid: number) => R | Promise<R>,
) {
  await using s = await startServer(name, command);
  const res = await fetch(`http://127.0.0.1:${s.port}/users?after=0`);
  const body = await res.text();
  if (res.status !== 200) throw new Error(`${name}: status ${res.status}: ${body}`);
  try {
    deepStrictEqual(JSON.parse(body), expected);
  } catch (e) {
    throw new Error(`${name}: wrong answer: ${(e as Error).message.slice(0, 500)}`);
  }
  const target = `http://127.0.0.1:${s.port}/users`;
  const { tool, connections, threads } = plan;
  await runLoad(tool, target, { connections, threads, seconds: plan.warmupSeconds });
  const before = await read(s.pid);
  const load = await runLoad(tool, target, { connections, threads, seconds: plan.seconds });
  return { load, before, after: await read(s.pid) };
}
