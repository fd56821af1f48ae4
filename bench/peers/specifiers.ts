// The peers' pinned module specifiers, in a module that imports nothing, so a probe can load a
// peer without also loading pgpipe (which would skew cold-start figures).

/** postgres.js from npm, pinned. */
export const POSTGRES_JS = "npm:postgres@3.4.9";
/** deno-postgres from JSR, pinned (skipped where JSR is unreachable). */
export const DENO_POSTGRES = "jsr:@db/postgres@0.19.5";
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
