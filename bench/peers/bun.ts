// Finds a `bun` binary for the suites' Bun.sql comparisons: PGPIPE_BENCH_BUN, else `bun` on
// PATH, else the one the bench installed before into its cache directory, else it installs
// BUN_NPM there with npm (the npm package carries the binary). Without one, a suite skips Bun
// with the one line `skip` holds.
import { join } from "node:path";
import { onPath } from "../shared/loadgen.ts";
import { run } from "../shared/probe.ts";
import { BUN_NPM } from "./specifiers.ts";

/** A bun to run, with its version, or the one line a suite prints when there is none. */
export type BunFound = { path: string; version: string } | { skip: string };

/** Where the bench keeps the Bun it installs: $XDG_CACHE_HOME or ~/.cache, then pgpipe-bench/. */
function bunCacheDir(): string {
  const base = Deno.env.get("XDG_CACHE_HOME") ?? join(Deno.env.get("HOME") ?? "/tmp", ".cache");
  return join(base, "pgpipe-bench", "bun");
}

const version = (path: string) => run(path, ["--version"]).then((v) => v.trim(), () => undefined);

/** Where it was found, or why there is none (no machine path: the reason may reach the report). */
async function find(log: (line: string) => void): Promise<BunFound | string> {
  const given = Deno.env.get("PGPIPE_BENCH_BUN");
  if (given) {
    const v = await version(given);
    return v ? { path: given, version: v } : "PGPIPE_BENCH_BUN does not run";
  }
  for (const path of [onPath("bun"), join(bunCacheDir(), "node_modules", ".bin", "bun")]) {
    const v = path && await version(path);
    if (path && v) return { path, version: v };
  }
  const npm = onPath("npm");
  if (!npm) return "npm not found to install it";
  log(`installing ${BUN_NPM} with npm into ${bunCacheDir()} (once)`);
  try {
    await Deno.mkdir(bunCacheDir(), { recursive: true });
    const args = ["install", "--prefix", bunCacheDir(), "--no-audit", "--no-fund", "--silent"];
    await run(npm, [...args, BUN_NPM], { timeoutMs: 180_000 });
  } catch (e) {
    return `npm install ${BUN_NPM} failed: ${(e as Error).message.split("\n")[0]}`;
  }
  const path = join(bunCacheDir(), "node_modules", ".bin", "bun");
  const v = await version(path);
  return v ? { path, version: v } : `npm installed ${BUN_NPM} but its bun does not run`;
}

/** Finds (or installs) bun; logs one line when it installs. */
export async function findBun(log: (line: string) => void): Promise<BunFound> {
  const found = await find(log);
  return typeof found === "string" ? { skip: `skipped Bun.sql: no bun binary (${found})` } : found;
}
