/**
 * Typed SQL for pgpipe: writes each query's row and parameter types into the source, as the
 * `sql` tag's type arguments, from the project's schema: its migrations applied to PGlite in
 * memory (no server, no Docker, no network), or a server it describes the queries on (never
 * running them).
 *
 * ```sh
 * deno run -A jsr:@pgpipe/pgpipe/typegen --migrations migrations src/
 * deno run -A jsr:@pgpipe/pgpipe/typegen --migrations migrations --check src/   # in CI
 * ```
 *
 * A query ``sql`select id, name from users where id = ${id}` `` becomes
 * ``sql<{ id: number; name: string | null }[], [number]>`...` ``: its rows are typed, and a
 * value of the wrong type no longer type-checks. Queries whose text is built at run time
 * (`sql(name)`, helpers, fragments chosen by a condition, `sql.unsafe`) are listed and left as
 * they are. See docs/typegen.md.
 *
 * This module loads the TypeScript compiler (npm:typescript); `jsr:@pgpipe/pgpipe` itself does
 * not.
 *
 * @example
 * ```ts
 * import { main } from "jsr:@pgpipe/pgpipe/typegen";
 * // The same as the command line: the exit code back.
 * const code = await main(["--migrations", "migrations", "--check", "src/"]);
 * if (code !== 0) console.error("the typed queries are out of date: run typegen");
 * ```
 *
 * @module
 */
import { openDescriber } from "./src/typegen/describer.ts";
import { typegenMain } from "./src/typegen/cli.ts";

/**
 * Runs typegen with command-line arguments (see `--help`); resolves to its exit code: 0 done,
 * 1 a query failed to describe or (with `--check`) an annotation differs, 2 bad usage.
 *
 * @example
 * ```ts
 * import { main } from "jsr:@pgpipe/pgpipe/typegen";
 * Deno.exit(await main(["--database", "postgres://app@localhost/app", "src/"]));
 * ```
 */
export function main(args: readonly string[]): Promise<number> {
  return typegenMain(args, openDescriber);
}

if (import.meta.main) Deno.exit(await main(Deno.args));
