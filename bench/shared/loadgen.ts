// Drives the HTTP suite's load: wrk when it is installed (Debian: apt-get install wrk), else
// bench/probes/http_load.ts in its own Deno process. Either runs under `sh`, which prints its own
// stat line once its child has ended: the child's CPU is in its cutime + cstime (bench/shared/
// cpu.ts's fallback, as the kernel keeps no schedstat of an ended child), so the load
// generator's CPU is measured apart from the server's.
import { join } from "node:path";
import { statCpuMs } from "./cpu.ts";
import { denoArgs, lastJson, run } from "./probe.ts";

/** What a load run reports (wrk's output is read into it); errors: non-200 answers and failures. */
export type LoadResult = Record<"requests" | "seconds" | "p50Ms" | "p99Ms" | "errors", number>;

/** Which load generator runs: wrk's path, or the Deno fallback. */
export type LoadTool = { kind: "wrk"; path: string } | { kind: "deno"; why: string };

/** The first `name` on PATH, if any. */
export function onPath(name: string): string | undefined {
  for (const dir of (Deno.env.get("PATH") ?? "").split(":")) {
    try {
      const st = Deno.statSync(join(dir, name));
      if (dir && st.isFile && ((st.mode ?? 0o111) & 0o111) !== 0) return join(dir, name);
    } catch { /* not there */ }
  }
}

/** wrk if installed, unless PGPIPE_BENCH_LOADGEN=deno asks for the fallback. */
export function chooseLoadTool(): LoadTool {
  const path = onPath("wrk");
  if (Deno.env.get("PGPIPE_BENCH_LOADGEN") === "deno") {
    return { kind: "deno", why: "PGPIPE_BENCH_LOADGEN=deno" };
  }
  return path
    ? { kind: "wrk", path }
    : { kind: "deno", why: "wrk not installed; Debian: apt-get install wrk" };
}

/** How a tool is named in the report (by name: its path is this machine's). */
export function describeTool(tool: LoadTool, threads: number): string {
  return tool.kind === "wrk"
    ? `wrk (${threads} thread${threads === 1 ? "" : "s"})`
    : `bench/probes/http_load.ts, concurrent keep-alive fetch loops in a Deno process (${tool.why})`;
}

/** "512.33us", "1.20ms", "2.00s", "1.00m" (wrk's units) in milliseconds. */
export function parseWrkDuration(text: string): number {
  const m = /^([\d.]+)(us|ms|s|m)$/.exec(text.trim());
  if (!m) throw new Error(`not a wrk duration: ${text}`);
  return Number(m[1]) * { us: 0.001, ms: 1, s: 1000, m: 60_000 }[m[2] as "us" | "ms" | "s" | "m"];
}

/** Reads `wrk --latency` output. */
export function parseWrk(out: string): LoadResult {
  const num = (re: RegExp, what: string) => {
    const m = re.exec(out);
    if (!m) throw new Error(`wrk printed no ${what}:\n${out}`);
    return m[1];
  };
  const socket = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(out);
  const non2xx = Number(/Non-2xx or 3xx responses: (\d+)/.exec(out)?.[1] ?? 0);
  return {
    requests: Number(num(/^\s*(\d+) requests in ([\d.]+\w+)/m, "request count")),
    seconds: parseWrkDuration(num(/^\s*\d+ requests in ([\d.]+\w+)/m, "duration")) / 1000,
    p50Ms: parseWrkDuration(num(/^\s*50%\s+([\d.]+\w+)/m, "50% latency")),
    p99Ms: parseWrkDuration(num(/^\s*99%\s+([\d.]+\w+)/m, "99% latency")),
    errors: non2xx + (socket ? socket.slice(1).reduce((n, s) => n + Number(s), 0) : 0),
  };
}

const STAT_MARK = "LOADGEN-STAT ";

/** Runs the load generator against url; its result and the CPU seconds it spent. */
export async function runLoad(
  tool: LoadTool,
  url: string,
  opts: Record<"connections" | "seconds" | "threads", number>,
) {
  const { connections: c, seconds: s, threads: t } = opts;
  const command = tool.kind === "wrk"
    ? [tool.path, `-t${t}`, `-c${c}`, `-d${s}s`, "--latency", url]
    : [Deno.execPath(), ...denoArgs("http_load.ts", [url, c, s])];
  // The child's times are added to the shell's cutime/cstime once the shell has waited for it.
  const script = `"$@"; s=$?; echo "${STAT_MARK}$(cat /proc/$$/stat)"; exit $s`;
  const stdout = await run("sh", ["-c", script, "sh", ...command]);
  const at = stdout.indexOf(STAT_MARK);
  if (at < 0) throw new Error(`load generator: no CPU figures:\n${stdout}`);
  const cpuSeconds = statCpuMs(stdout.slice(at + STAT_MARK.length), true) / 1000;
  const text = stdout.slice(0, at);
  return { ...(tool.kind === "wrk" ? parseWrk(text) : lastJson<LoadResult>(text)), cpuSeconds };
}
