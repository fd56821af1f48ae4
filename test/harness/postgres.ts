// The driver as the tests that need a database import it: `postgres` from mod.ts, except that
// on PGlite (`deno task test --pg=pglite`) a client of PGLITE_URL (what databaseUrl() then
// hands out, with any path or query) becomes a client of one PGlite shared by the test process,
// through pglite.ts: `postgres(pglite(shared, options))`. Everything else passes through.
import realPostgres from "../../mod.ts";
import type { Options } from "../../mod.ts";
import { pglite } from "../../pglite.ts";
import { PGlite } from "@electric-sql/pglite";
import { onPglite, PGLITE_URL } from "./pglite_mode.ts";

export * from "../../mod.ts";
export type * from "../../interfaces.ts";

/** The PGlite of this test process, started at load so no test pays (or leaks) its start. */
const shared: PGlite | null = onPglite ? await PGlite.create() : null;

/** URL parameters that are driver options; the others are server settings, as in pgpipe. */
const OPTION_KEYS = new Set(["application_name", "fetch_types", "prepare", "max_pipeline"]);

/** The options a PGLITE_URL (with a database path and query) stands for, merged with `options`. */
function fromUrl(url: string, options: Options): Options {
  const u = new URL(url.replace(/^postgres(ql)?:/, "http:"));
  const extra: Record<string, unknown> = {};
  const connection: Record<string, string | number | boolean> = { ...options.connection };
  for (const [key, value] of u.searchParams) {
    if (key === "prepare" || key === "fetch_types" || key === "force_prepare") {
      extra[key] = value !== "false";
    } else if (key === "max_pipeline") extra[key] = Number(value);
    else if (OPTION_KEYS.has(key)) extra[key] = value;
    else connection[key] = value;
  }
  const database = decodeURIComponent(u.pathname.slice(1));
  return { ...extra, ...options, connection, ...(database ? { database } : {}) };
}

function postgres(a?: string | Options, b?: Options) {
  if (
    shared !== null && typeof a === "string" &&
    a.startsWith(PGLITE_URL.slice(0, -"postgres".length))
  ) {
    return realPostgres(pglite(shared, fromUrl(a, b ?? {})));
  }
  return typeof a === "string" ? realPostgres(a, b) : realPostgres(a ?? b);
}

/** postgres() with its statics (postgres.camel, postgres.BigInt, ...). */
const wrapped: typeof realPostgres = Object.assign(postgres, realPostgres) as typeof realPostgres;
export default wrapped;
export { wrapped as postgres };
