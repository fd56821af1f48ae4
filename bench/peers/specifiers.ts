// The peers' pinned module specifiers, in a module that imports nothing, so a probe can load a
// peer without also loading pgpipe (which would skew cold-start figures).

/** postgres.js from npm; deno-postgres from JSR (the fallback when no local copy loads). */
export const POSTGRES_JS = "npm:postgres@3.4.9";
export const DENO_POSTGRES = "jsr:@db/postgres@0.19.5";
/**
 * The variable naming a local copy of deno-postgres's mod.ts (relative to the working directory),
 * loaded before JSR: where JSR is unreachable, a copy with relative imports stands in.
 */
export const DENO_POSTGRES_COPY_ENV = "PGPIPE_BENCH_DENO_POSTGRES";
export function denoPostgresCopy(): string | undefined {
  const path = Deno.env.get(DENO_POSTGRES_COPY_ENV);
  return path ? new URL(path, `file://${Deno.cwd()}/`).href : undefined;
}
/** pglue, a Deno pipelining driver published only as source on GitHub, pinned to a tag. */
export const PGLUE = "https://raw.githubusercontent.com/luaneko/pglue/refs/tags/v0.2.0/mod.ts";
/** Bun from npm (the package ships the binary), installed into a cache when no `bun` is on PATH. */
export const BUN_NPM = "bun@1.4.5";
