// CPU time of this process's threads and of a server backend, from Linux's schedstat (ns):
// time on a CPU, and time runnable but waiting for one (the run queue: another process or thread
// had the core). The bulk suite uses it to show what a load costs the client and the server, and
// whether they ran side by side or took turns. Where /proc is missing (not Linux) or the server
// will not read its own (not a superuser), the figures are null.

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
    const main = parseSchedstat(Deno.readTextFileSync(`/proc/self/task/${Deno.pid}/schedstat`));
    const others: CpuTimes = { cpu: 0, wait: 0 };
    for (const task of Deno.readDirSync("/proc/self/task")) {
      if (task.name === String(Deno.pid)) continue;
      try {
        const t = parseSchedstat(Deno.readTextFileSync(`/proc/self/task/${task.name}/schedstat`));
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

export function minus(a: CpuTimes, b: CpuTimes): CpuTimes {
  return { cpu: a.cpu - b.cpu, wait: a.wait - b.wait };
}

/** The query that reads a backend's own times (needs pg_read_server_files or a superuser). */
export const BACKEND_SCHEDSTAT = "select pg_read_file('/proc/self/schedstat') as s";
