// Drives the HTTP suite's load: wrk when it is installed (Debian: apt-get install wrk), else
// http_load.ts in its own Deno process. Either runs under `sh`, which reports the CPU time its
// child used once it has ended (cutime + cstime in /proc/<sh>/stat), so the load generator's CPU
// is measured apart from the server's.
import { join } from "node:path";
import type { LoadResult } from "../probes/http_load.ts";

export type { LoadResult };

/** A load run and the CPU seconds the load generator spent on it. */
export interface LoadRun extends LoadResult {
  cpuSeconds: number;
}

/** Which load generator runs: wrk's path, or the Deno fallback. */
export type LoadTool = { kind: "wrk"; path: string } | { kind: "deno"; why: string };

const probes = new URL("../probes/", import.meta.url).pathname;

function isExecutable(path: string): boolean {
  try {
    const st = Deno.statSync(path);
    return st.isFile && ((st.mode ?? 0o111) & 0o111) !== 0;
  } catch {
    return false;
  }
}

/** The first `name` on PATH, if any. */
export function onPath(name: string): string | undefined {
  for (const dir of (Deno.env.get("PATH") ?? "").split(":")) {
    if (dir && isExecutable(join(dir, name))) return join(dir, name);
  }
  return undefined;
}

/** wrk if installed, unless PGPIPE_BENCH_LOADGEN=deno asks for the fallback. */
export function chooseLoadTool(): LoadTool {
  if (Deno.env.get("PGPIPE_BENCH_LOADGEN") === "deno") {
    return { kind: "deno", why: "PGPIPE_BENCH_LOADGEN=deno" };
  }
  const path = onPath("wrk");
  return path
    ? { kind: "wrk", path }
    : { kind: "deno", why: "wrk not installed; Debian: apt-get install wrk" };
}

/** How a tool is named in the report. */
export function describeTool(tool: LoadTool, threads: number): string {
  return tool.kind === "wrk"
    ? `wrk (${tool.path}, ${threads} thread${threads === 1 ? "" : "s"})`
    : `bench/probes/http_load.ts, concurrent keep-alive fetch loops in a Deno process (${tool.why})`;
}

/** "512.33us", "1.20ms", "2.00s", "1.00m" (wrk's units) in milliseconds. */
export function parseWrkDuration(text: string): number {
  const m = /^([\d.]+)(us|ms|s|m)$/.exec(text.trim());
  if (!m) throw new Error(`not a wrk duration: ${text}`);
  const scale = { us: 0.001, ms: 1, s: 1000, m: 60_000 }[m[2] as "us" | "ms" | "s" | "m"];
  return Number(m[1]) * scale;
}

/** Reads `wrk --latency` output. */
export function parseWrk(out: string): LoadResult {
  const num = (re: RegExp, what: string) => {
    const m = re.exec(out);
    if (!m) throw new Error(`wrk printed no ${what}:\n${out}`);
    return m[1];
  };
  const requests = Number(num(/^\s*(\d+) requests in ([\d.]+\w+)/m, "request count"));
  const seconds = parseWrkDuration(num(/^\s*\d+ requests in ([\d.]+\w+)/m, "duration")) / 1000;
  const p50Ms = parseWrkDuration(num(/^\s*50%\s+([\d.]+\w+)/m, "50% latency"));
  const p99Ms = parseWrkDuration(num(/^\s*99%\s+([\d.]+\w+)/m, "99% latency"));
  const non2xx = Number(/Non-2xx or 3xx responses: (\d+)/.exec(out)?.[1] ?? 0);
  const socket = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(out);
  const socketErrors = socket ? socket.slice(1).reduce((n, s) => n + Number(s), 0) : 0;
  return { requests, seconds, p50Ms, p99Ms, errors: non2xx + socketErrors };
}

/** The fields of /proc/PID/stat after the command name (field 3 onwards). */
export function statFields(stat: string): string[] {
  return stat.slice(stat.lastIndexOf(")") + 2).trim().split(" ");
}

let ticks: number | undefined;
/** Clock ticks per second (CLK_TCK) for /proc times. */
async function clockTicks(): Promise<number> {
  if (ticks) return ticks;
  try {
    const out = await new Deno.Command("getconf", { args: ["CLK_TCK"], stdout: "piped" }).output();
    ticks = Number(new TextDecoder().decode(out.stdout).trim()) || 100;
  } catch {
    ticks = 100;
  }
  return ticks;
}

/** CPU seconds (user + system, all threads) a running process has used so far. */
export async function processCpuSeconds(pid: number): Promise<number> {
  const f = statFields(await Deno.readTextFile(`/proc/${pid}/stat`));
  return (Number(f[11]) + Number(f[12])) / await clockTicks();
}

const STAT_MARK = "LOADGEN-STAT ";

/** Runs the load generator against url for `seconds` with `connections` connections. */
export async function runLoad(
  tool: LoadTool,
  url: string,
  opts: { connections: number; seconds: number; threads: number },
): Promise<LoadRun> {
  const command = tool.kind === "wrk"
    ? [
      tool.path,
      `-t${opts.threads}`,
      `-c${opts.connections}`,
      `-d${opts.seconds}s`,
      "--latency",
      url,
    ]
    : [
      Deno.execPath(),
      "run",
      "-A",
      "--no-lock",
      "--quiet",
      join(probes, "http_load.ts"),
      url,
      String(opts.connections),
      String(opts.seconds),
    ];
  // The child's times are added to the shell's cutime/cstime once the shell has waited for it.
  const script = `"$@"; s=$?; echo "${STAT_MARK}$(cat /proc/$$/stat)"; exit $s`;
  const out = await new Deno.Command("sh", {
    args: ["-c", script, "sh", ...command],
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  const stdout = new TextDecoder().decode(out.stdout);
  if (!out.success) {
    throw new Error(
      `load generator failed (exit ${out.code}): ${new TextDecoder().decode(out.stderr)}`,
    );
  }
  const statLine = stdout.split("\n").find((l) => l.startsWith(STAT_MARK));
  if (!statLine) throw new Error(`load generator: no CPU figures:\n${stdout}`);
  const f = statFields(statLine.slice(STAT_MARK.length));
  const cpuSeconds = (Number(f[13]) + Number(f[14])) / await clockTicks();
  const text = stdout.slice(0, stdout.indexOf(STAT_MARK));
  const result = tool.kind === "wrk"
    ? parseWrk(text)
    : JSON.parse(text.trim().split("\n").pop()!) as LoadResult;
  return { ...result, cpuSeconds };
}
