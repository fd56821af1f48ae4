// What the numbers were measured on, for bench/RESULTS.md: results without the machine, the
// runtime and the server version cannot be compared with anything.
import { ask } from "./ask.ts";
import { run } from "./probe.ts";

/** The machine, runtime and server of a run. */
export type Machine = Awaited<ReturnType<typeof describeMachine>>;

/** The pgpipe being measured: the repository's commit, and whether src/ had changes. */
async function pgpipeRevision(): Promise<string> {
  const git = (...args: string[]) =>
    run("git", ["-C", new URL("../..", import.meta.url).pathname, ...args]).then((s) => s.trim());
  try {
    const commit = await git("rev-parse", "--short", "HEAD");
    const dirty = (await git("status", "--porcelain", "--", "src", "mod.ts")) !== "";
    return `this repository at ${commit}${dirty ? " with uncommitted changes in src/" : ""}`;
  } catch {
    return "this repository (no git information)";
  }
}

/** Describes this machine and the server behind url. */
export async function describeMachine(url: string) {
  const cpuinfo = await Deno.readTextFile("/proc/cpuinfo").catch(() => "");
  let memory = "unknown";
  try {
    memory = `${(Deno.systemMemoryInfo().total / 2 ** 30).toFixed(1)} GiB`;
  } catch { /* not available on this platform */ }
  return {
    cpu: /^model name\s*:\s*(.+)$/m.exec(cpuinfo)?.[1].trim() ?? "unknown",
    cores: navigator.hardwareConcurrency,
    memory,
    os: `${Deno.build.os} ${Deno.osRelease()} (${Deno.build.arch})`,
    deno: Deno.version.deno,
    v8: Deno.version.v8,
    server: String(await ask(url, "select version()")),
    pgpipe: await pgpipeRevision(),
  };
}
