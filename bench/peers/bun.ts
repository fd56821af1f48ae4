// Finds a `bun` binary for the HTTP suite's Bun.sql variant: PGPIPE_BENCH_BUN, else `bun` on
// PATH, else the one the bench installed before into its cache directory, else it installs
// BUN_NPM there with npm (the npm package carries the binary). Without one, the suite skips Bun
// with one line saying why.
import { join } from "node:path";
import { onPath } from "../shared/loadgen.ts";
import { BUN_NPM } from "./specifiers.ts";

/** A bun to run, with its version, or why there is none. */
export type BunFound = { path: string; version: string; source: string } | { reason: string };

/** Where the bench keeps the Bun it installs: $XDG_CACHE_HOME or ~/.cache, then pgpipe-bench/. */
export function bunCacheDir(): string {
  const base = Deno.env.get("XDG_CACHE_HOME") ?? join(Deno.env.get("HOME") ?? "/tmp", ".cache");
  return join(base, "pgpipe-bench", "bun");
}

async function version(path: string): Promise<string | undefined> {
  try {
    const out = await new Deno.Command(path, {
      args: ["--version"],
      stdout: "piped",
      stderr: "null",
    }).output();
    return out.success ? new TextDecoder().decode(out.stdout).trim() : undefined;
  } catch {
    return undefined;
  }
}

async function npmInstall(dir: string): Promise<string | undefined> {
  const npm = onPath("npm");
  if (!npm) return "npm not found to install it";
  await Deno.mkdir(dir, { recursive: true });
  const out = await new Deno.Command(npm, {
    args: ["install", "--prefix", dir, "--no-audit", "--no-fund", "--silent", BUN_NPM],
    stdin: "null",
    stdout: "null",
    stderr: "piped",
    signal: AbortSignal.timeout(180_000),
  }).output();
  if (!out.success) {
    return `npm install ${BUN_NPM} failed: ${
      new TextDecoder().decode(out.stderr).trim().split("\n")[0]
    }`;
  }
  return undefined;
}

/** Finds (or installs) bun; logs one line when it installs. */
export async function findBun(log: (line: string) => void): Promise<BunFound> {
  const given = Deno.env.get("PGPIPE_BENCH_BUN");
  if (given) {
    const v = await version(given);
    return v
      ? { path: given, version: v, source: "PGPIPE_BENCH_BUN" }
      : { reason: `PGPIPE_BENCH_BUN=${given} does not run` };
  }
  const path = onPath("bun");
  if (path) {
    const v = await version(path);
    if (v) return { path, version: v, source: "PATH" };
  }
  const dir = bunCacheDir();
  const cached = join(dir, "node_modules", ".bin", "bun");
  let v = await version(cached);
  if (v) return { path: cached, version: v, source: `npm ${BUN_NPM} in ${dir}` };
  log(`installing ${BUN_NPM} with npm into ${dir} (once)`);
  let failure: string | undefined;
  try {
    failure = await npmInstall(dir);
  } catch (e) {
    failure = `npm install ${BUN_NPM} failed: ${(e as Error).message}`;
  }
  if (failure) return { reason: failure };
  v = await version(cached);
  return v
    ? { path: cached, version: v, source: `npm ${BUN_NPM} in ${dir}` }
    : { reason: `npm installed ${BUN_NPM} but ${cached} does not run` };
}
