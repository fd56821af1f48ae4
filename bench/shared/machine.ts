// What the numbers were measured on, for bench/RESULTS.md: results without the machine, the
// runtime and the server version cannot be compared with anything.
import postgres from "../../mod.ts";

/** The machine, runtime and server of a run. */
export interface Machine {
  cpu: string;
  cores: number;
  memory: string;
  os: string;
  deno: string;
  v8: string;
  server: string;
  /** The pgpipe being measured: the repository's commit, and whether the tree had changes. */
  pgpipe: string;
}

function cpuModel(): string {
  try {
    const info = Deno.readTextFileSync("/proc/cpuinfo");
    return /^model name\s*:\s*(.+)$/m.exec(info)?.[1].trim() ?? "unknown";
  } catch {
    return "unknown (no /proc/cpuinfo)";
  }
}

/** The server's `version()`, asked over the URL the suites use. */
async function serverVersion(url: string): Promise<string> {
  const sql = postgres(url, { max: 1, ssl: false });
  try {
    const [{ v }] = await sql`select version() as v`;
    return String(v);
  } finally {
    await sql.end();
  }
}

/** `git describe`-like text for the working tree bench/ lives in. */
async function pgpipeRevision(): Promise<string> {
  const git = async (...args: string[]) => {
    const out = await new Deno.Command("git", {
      args,
      cwd: new URL("../..", import.meta.url).pathname,
      stdout: "piped",
      stderr: "null",
    }).output();
    if (!out.success) throw new Error(`git ${args[0]} failed`);
    return new TextDecoder().decode(out.stdout).trim();
  };
  try {
    const commit = await git("rev-parse", "--short", "HEAD");
    const dirty = (await git("status", "--porcelain", "--", "src", "mod.ts")) !== "";
    return `this repository at ${commit}${dirty ? " with uncommitted changes in src/" : ""}`;
  } catch {
    return "this repository (no git information)";
  }
}

/** Describes this machine and the server behind url. */
export async function describeMachine(url: string): Promise<Machine> {
  let memory = "unknown";
  try {
    memory = `${(Deno.systemMemoryInfo().total / 2 ** 30).toFixed(1)} GiB`;
  } catch {
    // not available on this platform
  }
  return {
    cpu: cpuModel(),
    cores: navigator.hardwareConcurrency,
    memory,
    os: `${Deno.build.os} ${Deno.osRelease()} (${Deno.build.arch})`,
    deno: Deno.version.deno,
    v8: Deno.version.v8,
    server: await serverVersion(url),
    pgpipe: await pgpipeRevision(),
  };
}
