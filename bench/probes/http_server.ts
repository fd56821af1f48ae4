// The HTTP suite's server under Deno: `deno run -A bench/probes/http_server.ts DRIVER MAX URL`
// serves http_app.ts's handler with pgpipe or postgres.js (`max` connections) on a free port of
// 127.0.0.1, prints `{"port":N}` once its client is connected, and shuts down cleanly when its
// standard input closes (so `--cpu-prof` gets to write its profile). Each driver is imported on
// its own, through a variable specifier, so the postgres.js server never loads pgpipe.
import { makeHandler, type SqlTag } from "../shared/http_app.ts";
import { POSTGRES_JS } from "../peers/specifiers.ts";
import { sslOf } from "../shared/env.ts";

const [driver, max, url] = Deno.args;
if (driver !== "pgpipe" && driver !== "postgres.js") throw new Error(`unknown driver ${driver}`);
const specifier = driver === "pgpipe" ? new URL("../../mod.ts", import.meta.url).href : POSTGRES_JS;
const options = { max: Number(max), ssl: sslOf(url), onnotice: () => {} };
const sql = (await import(specifier)).default(url, options);
// Opens every connection before the load starts, so no run times connection set-up.
await Promise.all(Array.from({ length: Number(max) * 4 }, () => sql`select pg_sleep(0.01)`));
const onListen = ({ port }: { port: number }) => console.log(JSON.stringify({ port }));
const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen }, makeHandler(sql as SqlTag));
for await (
  const _ of Deno.stdin.readable
) { /* nothing is sent: end of input is the signal to stop */ }
await server.shutdown();
await sql.end({ timeout: 5 });
Deno.exit(0);
