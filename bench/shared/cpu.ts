// CPU accounting for the benchmarks, read from Linux's /proc (schedstat: ns on a CPU, and ns
// runnable but waiting for one). The throughput suite uses it for how much processor time a run
// cost the client process and the server's backends (which side limits a rate, and what TLS adds
// on each); the bulk suite for what a load costs the client's threads and the server backend, and
// whether they ran side by side or took turns. Plain node:fs, so the Bun probe uses it too.
// Everything returns undefined (or null) where /proc is not there or the server is not local.
import { readdirSync, readFileSync } from "node:fs";
import process from "node:process";

/** Linux's USER_HZ: /proc/<pid>/stat counts CPU time in these ticks. */
const TICKS_PER_SECOND = 100;

/** The fields of /proc/<pid>/stat after the command name (which may hold spaces). */
function statFields(pid: number): { comm: string; fields: string[] } | undefined {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return undefined; // not Linux, or the process is gone
  }
  const close = text.lastIndexOf(")");
  return {
    comm: text.slice(text.indexOf("(") + 1, close),
    fields: text.slice(close + 2).split(" "),
  };
}

/** Nanoseconds a thread has run, from its schedstat; undefined where the kernel has none. */
function threadRunNs(path: string): number | undefined {
  try {
    return parseSchedstat(readFileSync(path, "utf8")).cpu * 1e6;
  } catch {
    return undefined;
  }
}

/**
 * CPU time a process has used so far, in microseconds: the run time the scheduler counts for
 * each of its threads (schedstat, in ns), else user + system time from its stat line. The stat
 * line's figures are sampled at each 10 ms tick and only scaled to the real run time, so over a
 * run of a tenth of a second they can be off by most of their value; schedstat is exact.
 */
export function processCpuUs(pid: number): number | undefined {
  let tasks: string[] = [];
  try {
    tasks = readdirSync(`/proc/${pid}/task`);
  } catch {
    // not Linux, or the process is gone: the stat line says as much
  }
  let ns = 0;
  for (const tid of tasks) {
    const run = threadRunNs(`/proc/${pid}/task/${tid}/schedstat`);
    if (run === undefined) {
      ns = NaN;
      break;
    }
    ns += run;
  }
  if (tasks.length > 0 && Number.isFinite(ns)) return ns / 1000;
  const stat = statFields(pid);
  if (stat === undefined) return undefined;
  // Fields 14 and 15 of the stat line (utime, stime): 12 and 13 after the name.
  return (Number(stat.fields[11]) + Number(stat.fields[12])) * (1e6 / TICKS_PER_SECOND);
}

/**
 * The postmaster of a backend whose pid the server reported (`pg_backend_pid()`), when that
 * server runs on this machine: both processes visible here and named postgres.
 */
export function localPostmaster(backendPid: number): number | undefined {
  const backend = statFields(backendPid);
  if (backend === undefined || backend.comm !== "postgres") return undefined;
  const parent = Number(backend.fields[1]);
  return statFields(parent)?.comm === "postgres" ? parent : undefined;
}

/**
 * CPU time used so far by every process the postmaster started (µs): the backends plus the
 * server's own workers, whose share while a benchmark runs is noise-sized. A backend that exits
 * between two readings takes its time with it, so read around a run whose connections stay open.
 */
export function serverCpuUs(postmaster: number): number {
  let total = 0;
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = statFields(Number(entry));
    if (stat === undefined || Number(stat.fields[1]) !== postmaster) continue;
    total += processCpuUs(Number(entry)) ?? 0;
  }
  return total;
}

/** CPU per query of one run, on each side (µs). */
export interface CpuPerQuery {
  client: number;
  server: number;
}

/**
 * Measures `run` (`queries` says how many queries it did): the CPU it cost this process (`self`, or
 * another process's pid) and the server's processes, per query. Undefined sides read as NaN.
 */
export async function cpuPerQuery<T>(
  postmaster: number | undefined,
  run: () => Promise<T>,
  queries: (result: T) => number,
  clientPid: number = process.pid,
): Promise<{ result: T; cpu: CpuPerQuery | undefined }> {
  if (postmaster === undefined) return { result: await run(), cpu: undefined };
  const c0 = processCpuUs(clientPid);
  const s0 = serverCpuUs(postmaster);
  const result = await run();
  const c1 = processCpuUs(clientPid);
  const s1 = serverCpuUs(postmaster);
  const n = queries(result);
  return {
    result,
    cpu: {
      client: c0 === undefined || c1 === undefined ? NaN : (c1 - c0) / n,
      server: (s1 - s0) / n,
    },
  };
}

/** CPU and run-queue time, in ms. */
export interface CpuTimes {
  /** On a CPU. */
  cpu: number;
  /** Runnable, waiting for a CPU. */
  wait: number;
}

/** This process's threads: the main (JavaScript) thread and all the others together. */
export interface ProcessCpu {
  main: CpuTimes;
  /** V8's GC helper threads, Deno's I/O threads and the rest. */
  others: CpuTimes;
}

/** `cpu wait slices` (ns) as /proc/.../schedstat writes them. */
export function parseSchedstat(text: string): CpuTimes {
  const [cpu, wait] = text.trim().split(/\s+/).map(Number);
  return { cpu: cpu / 1e6, wait: wait / 1e6 };
}

/** This process's threads' times so far, or null off Linux. */
export function processCpu(): ProcessCpu | null {
  try {
    const main = parseSchedstat(readFileSync(`/proc/self/task/${process.pid}/schedstat`, "utf8"));
    const others: CpuTimes = { cpu: 0, wait: 0 };
    for (const task of readdirSync("/proc/self/task")) {
      if (task === String(process.pid)) continue;
      try {
        const t = parseSchedstat(readFileSync(`/proc/self/task/${task}/schedstat`, "utf8"));
        others.cpu += t.cpu;
        others.wait += t.wait;
      } catch {
        // the thread ended between the listing and the read
      }
    }
    return { main, others };
  } catch {
    return null;
  }
}

/** What a span cost this process: `after - before`. */
export function processCpuSince(before: ProcessCpu | null): ProcessCpu | null {
  const after = processCpu();
  if (before === null || after === null) return null;
  return { main: minus(after.main, before.main), others: minus(after.others, before.others) };
}

/** `a - b`, field by field. */
export function minus(a: CpuTimes, b: CpuTimes): CpuTimes {
  return { cpu: a.cpu - b.cpu, wait: a.wait - b.wait };
}

/** The query that reads a backend's own times (needs pg_read_server_files or a superuser). */
export const BACKEND_SCHEDSTAT = "select pg_read_file('/proc/self/schedstat') as s";
