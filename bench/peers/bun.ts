// Finds a `bun` binary for the suites' Bun.sql comparisons: PGPIPE_BENCH_BUN, else `bun` on
// PATH, else the one the bench installed before into its cache directory, else it installs
// BUN_NPM there with npm (the npm package carries the binary). Without one, a suite skips Bun
// with the one line `skip` holds (no machine path: the reason may reach the report).
import { join } from "node:path";
import { onPath } from "../shared/loadgen.ts";
import { run } from "../shared/probe.ts";
import { BUN_NPM } from "./specifiers.ts";

/** Where the bench keeps the Bun it installs: $XDG_CACHE_HOME or ~/.cache, then pgpipe-bench/. */
const cache = join(
  Deno.env.get("XDG_CACHE_HOME") ?? join(Deno.env.get("HOME") ?? "/tmp", ".cache"),
  "pgpipe-bench",
  "bun",
);
const cached = join(cache, "node_modules", ".bin", "bun");
const version = (path: string) => run(path, ["--version"]).then((v) => v.trim(), () => undefined);

/** Finds (or installs) bun; logs one line when it installs. */
export async function findBun(
  log: (line: string) => void,
): Promise<{ path: string; version: string } | { skip: string }> {
  const skip = (why: string) => ({ skip: `skipped Bun.sql: no bun binary (${why})` });
  const given = Deno.env.get("PGPIPE_BENCH_BUN");
  for (const path of given ? [given] : [onPath("bun"), cached]) {
    const v = path && await version(path);
    if (path && v) return { path, version: v };
  }
  if (given) return skip("PGPIPE_BENCH_BUN does not run");
  const npm = onPath("npm");
  if (!npm) return skip("npm not found to install it");
  log(`installing ${BUN_NPM} with npm into ${cache} (once)`);
  try {
    await Deno.mkdir(cache, { recursive: true });
    await run(npm, ["install", "--prefix", cache, "--no-audit", "--no-fund", "--silent", BUN_NPM], {
      timeoutMs: 180_000,
    });
  } catch (e) {
    return skip(`npm install ${BUN_NPM} failed: ${(e as Error).message.split("\n")[0]}`);
  }
  const v = await version(cached);
  return v
    ? { path: cached, version: v }
    : skip(`npm installed ${BUN_NPM} but its bun does not run`);
}
