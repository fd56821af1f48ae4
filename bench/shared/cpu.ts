// The bench's one CPU accounting, from Linux's /proc. Each thread's schedstat gives the ns it ran
// and the ns it waited runnable for a core, exactly; where a kernel keeps none (and for a child
// that has ended), the fallback is the stat line's utime + stime, counted in 10 ms ticks (over a
// tenth of a second they can be off by most of their value). Plain node:fs, so the Bun probe
// uses it too. Everything reads undefined where /proc does not show the process.
import { readdirSync, readFileSync } from "node:fs";
import process from "node:process";

/** ms on a CPU, and ms runnable, waiting for one. */
export type CpuTimes = { cpu: number; wait: number };
/** A process's main (JavaScript) thread, and all the others together (V8's GC helpers, I/O...). */
export type ThreadCpu = { main: CpuTimes; others: CpuTimes };

const read = (path: string) => {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return undefined; // not Linux, or the process or thread is gone
  }
};

/** `cpu wait slices` (ns) as /proc/.../schedstat writes them. */
export function parseSchedstat(text: string): CpuTimes {
  const [cpu, wait] = text.trim().split(/\s+/).map(Number);
  return { cpu: cpu / 1e6, wait: wait / 1e6 };
}

/** A /proc/<pid>/stat line: the command name, and the fields after it (field 3 onwards). */
export function parseStat(text: string): { comm: string; fields: string[] } {
  const close = text.lastIndexOf(")");
  return {
    comm: text.slice(text.indexOf("(") + 1, close),
    fields: text.slice(close + 2).trim().split(" "),
  };
}

/**
 * CPU ms of a stat line: utime + stime, or with `children` cutime + cstime (ended children), in
 * ticks of Linux's USER_HZ (100 a second): fields 14-15 (16-17), 12-13 (14-15) after the name.
 */
export function statCpuMs(text: string, children = false): number {
  const f = parseStat(text).fields;
  const at = children ? 13 : 11;
  return (Number(f[at]) + Number(f[at + 1])) * 10;
}

/** `a + b` and `a - b`, field by field. */
const plus = (a: CpuTimes, b: CpuTimes) => ({ cpu: a.cpu + b.cpu, wait: a.wait + b.wait });
export const minus = (a: CpuTimes, b: CpuTimes) => plus(a, { cpu: -b.cpu, wait: -b.wait });

/** A process's threads by schedstat so far; undefined where the kernel keeps none. */
export function threadCpu(pid: number = process.pid): ThreadCpu | undefined {
  let tasks: string[];
  try {
    tasks = readdirSync(`/proc/${pid}/task`);
  } catch {
    return undefined;
  }
  // A thread that ended since the listing reads undefined and is left out.
  const schedstat = (t: string) => read(`/proc/${pid}/task/${t}/schedstat`);
  const others = tasks.filter((t) => t !== String(pid)).map(schedstat);
  return fromSchedstats(schedstat(String(pid)), others);
}

/** The main thread's schedstat and the others' summed (undefined where the main's is missing). */
export function fromSchedstats(main: string | undefined, others: (string | undefined)[]) {
  if (main === undefined) return undefined;
  const known = others.filter((t) => t !== undefined).map(parseSchedstat);
  return { main: parseSchedstat(main), others: known.reduce(plus, { cpu: 0, wait: 0 }) };
}

/** What a span cost a process's threads: now minus `before`. */
export function threadCpuSince(before: ThreadCpu | undefined, pid?: number): ThreadCpu | undefined {
  const after = threadCpu(pid);
  if (before === undefined || after === undefined) return undefined;
  return { main: minus(after.main, before.main), others: minus(after.others, before.others) };
}

/**
 * CPU ms a process has used so far, all threads: schedstat, else the stat line. A thread that
 * ends between two readings takes its schedstat with it: read around runs whose threads live on.
 */
export const cpuMs = (pid: number = process.pid) =>
  totalCpuMs(threadCpu(pid), read(`/proc/${pid}/stat`));

/** The total of a process's threads' schedstat, else (the fallback) its stat line's ticks. */
export function totalCpuMs(threads: ThreadCpu | undefined, stat: string | undefined) {
  if (threads !== undefined) return threads.main.cpu + threads.others.cpu;
  return stat === undefined ? undefined : statCpuMs(stat);
}

/** A process's parent and command name, from its stat line. */
function parentOf(pid: number | string) {
  const text = read(`/proc/${pid}/stat`);
  if (text === undefined) return undefined;
  const { comm, fields } = parseStat(text);
  return { comm, parent: Number(fields[1]) };
}

/** The postmaster of a backend (`pg_backend_pid()`), if both run here, named postgres. */
export function localPostmaster(backendPid: number): number | undefined {
  const backend = parentOf(backendPid);
  if (backend?.comm !== "postgres") return undefined;
  return parentOf(backend.parent)?.comm === "postgres" ? backend.parent : undefined;
}

/** CPU ms used so far by every process the postmaster started (its own workers: noise-sized). */
export function serverCpuMs(postmaster: number): number {
  const children = readdirSync("/proc").filter((e) =>
    /^\d+$/.test(e) && parentOf(e)?.parent === postmaster
  );
  return children.reduce((total, pid) => total + (cpuMs(Number(pid)) ?? 0), 0);
}

/** CPU per query of one run, on each side (µs). */
export type CpuPerQuery = { client: number; server: number };

/**
 * Runs `run` (`queries` says how many queries it did) and measures what it cost per query: the
 * client process (this one, or `clientPid`) and the server's processes. Unread sides are NaN.
 */
export async function cpuPerQuery<T>(
  postmaster: number | undefined,
  run: () => Promise<T>,
  queries: (result: T) => number,
  clientPid: number = process.pid,
): Promise<{ result: T; cpu: CpuPerQuery | undefined }> {
  if (postmaster === undefined) return { result: await run(), cpu: undefined };
  const [c0, s0] = [cpuMs(clientPid), serverCpuMs(postmaster)];
  const result = await run();
  const [c1, s1] = [cpuMs(clientPid), serverCpuMs(postmaster)];
  const us = 1000 / queries(result);
  const client = c0 === undefined || c1 === undefined ? NaN : (c1 - c0) * us;
  return { result, cpu: { client, server: (s1 - s0) * us } };
}

/** The query that reads a backend's own times (needs pg_read_server_files or a superuser). */
export const BACKEND_SCHEDSTAT = "select pg_read_file('/proc/self/schedstat') as s";
