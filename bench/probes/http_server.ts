// The HTTP servers under Deno: `deno run -A bench/probes/http_server.ts DRIVER MAX URL [HANDLER]`
// serves, with pgpipe or postgres.js (`max` connections) on a free port of 127.0.0.1, the http
// suite's handler (http_app.ts), or with HANDLER `drizzle` or `drizzle-force_prepare` the
// orm_http suite's: orm_app.ts's Drizzle handler through drizzle-orm/postgres-js over the driver
// (pgpipe with `force_prepare`). It prints `{"port":N}` once its connections are open, and shuts
// down cleanly when its standard input closes (so `--cpu-prof` gets to write its profile). Each
// driver, and the Drizzle side, is imported through a variable specifier, only when asked for:
// the postgres.js server never loads pgpipe, and the http suite's servers never load Drizzle.
import { makeHandler, type SqlTag } from "../shared/http_app.ts";
import { POSTGRES_JS } from "../peers/specifiers.ts";
import { sslOf } from "../shared/env.ts";

const [driver, max, url, handler = "plain"] = Deno.args;
if (driver !== "pgpipe" && driver !== "postgres.js") throw new Error(`unknown driver ${driver}`);
if (!["plain", "drizzle", "drizzle-force_prepare"].includes(handler)) {
  throw new Error(`unknown handler ${handler}`);
}
const specifier = driver === "pgpipe" ? new URL("../../mod.ts", import.meta.url).href : POSTGRES_JS;
const forced = handler === "drizzle-force_prepare" ? { force_prepare: true } : {};
const options = { max: Number(max), ssl: sslOf(url), onnotice: () => {}, ...forced };
const sql = (await import(specifier)).default(url, options);
// Opens every connection before the load starts, so no run times connection set-up.
await Promise.all(Array.from({ length: Number(max) * 4 }, () => sql`select pg_sleep(0.01)`));
const orm = new URL("../shared/orm_app.ts", import.meta.url).href;
const fetch = handler === "plain"
  ? makeHandler(sql as SqlTag)
  : (await import(orm)).drizzleHandler(sql) as (req: Request) => Promise<Response>;
const onListen = ({ port }: { port: number }) => console.log(JSON.stringify({ port }));
const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen }, fetch);
for await (
  const _ of Deno.stdin.readable
) { /* nothing is sent: end of input is the signal to stop */ }
await server.shutdown();
await sql.end({ timeout: 5 });
Deno.exit(0);
