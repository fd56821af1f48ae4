// The peers' pinned module specifiers, in a module that imports nothing, so a probe can load a
// peer without also loading pgpipe (which would skew cold-start figures).

/** postgres.js from npm, pinned. */
export const POSTGRES_JS = "npm:postgres@3.4.9";
/** deno-postgres from JSR, pinned (the fallback when no local copy is given or loads). */
export const DENO_POSTGRES = "jsr:@db/postgres@0.19.5";
/**
 * The variable naming a local copy of deno-postgres (the path of its mod.ts), loaded before JSR:
 * where JSR is unreachable, a copy with its imports rewritten to relative paths stands in.
 */
export const DENO_POSTGRES_COPY_ENV = "PGPIPE_BENCH_DENO_POSTGRES";

/** The local copy's mod.ts as a file URL (a relative path is from the working directory). */
export function denoPostgresCopy(): string | undefined {
  const path = Deno.env.get(DENO_POSTGRES_COPY_ENV);
  return path ? new URL(path, `file://${Deno.cwd()}/`).href : undefined;
}
/**
 * pglue, a Deno pipelining driver published only as source on GitHub, pinned to a tag (skipped
 * where GitHub is unreachable).
 */
export const PGLUE = "https://raw.githubusercontent.com/luaneko/pglue/refs/tags/v0.2.0/mod.ts";
/**
 * Bun from npm (the package ships the binary), pinned; installed into a cache directory when no
 * `bun` is on PATH (bench/peers/bun.ts).
 */
export const BUN_NPM = "bun@1.4.5";
