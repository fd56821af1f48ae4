// deno-lint-ignore-file no-import-prefix -- the ORM is a bench-only npm import, pinned here
// The orm_http suite's HTTP server: `deno run -A bench/probes/orm_http_server.ts DRIVER MAX URL
// [force_prepare]` serves orm_app.ts's Drizzle handler through drizzle-orm/postgres-js over
// pgpipe or postgres.js (`max` connections) on a free port of 127.0.0.1, prints `{"port":N}`
// once its connections are open, and shuts down cleanly when its standard input closes. Each
// driver is imported on its own (Drizzle's driver module loads postgres.js either way, as it
// does in an application).
import { drizzle } from "npm:drizzle-orm@0.45.4/postgres-js";
import { drizzleHandler, schema } from "../shared/orm_app.ts";
import { POSTGRES_JS } from "../peers/specifiers.ts";
import { sslOf } from "../shared/env.ts";

interface Client {
  (strings: TemplateStringsArray, ...values: unknown[]): PromiseLike<unknown>;
  end(options?: { timeout?: number }): Promise<void>;
}
type Factory = (url: string, options: Record<string, unknown>) => Client;

const [driver, maxText, url, flag] = Deno.args;
const max = Number(maxText);
if (!url || !(max >= 1) || (driver !== "pgpipe" && driver !== "postgres.js")) {
  throw new Error("usage: orm_http_server.ts pgpipe|postgres.js MAX URL [force_prepare]");
}
const specifier = driver === "pgpipe" ? new URL("../../mod.ts", import.meta.url).href : POSTGRES_JS;
const factory = (await import(specifier)).default as Factory;
const options = flag === "force_prepare" ? { force_prepare: true } : {};
const sql = factory(url, { max, ssl: sslOf(url), onnotice: () => {}, ...options });
const db = drizzle(sql as any, { schema });
// Opens every connection before the load starts, so no run times connection set-up.
await Promise.all(Array.from({ length: max * 4 }, () => sql`select pg_sleep(0.01)`));

const server = Deno.serve({
  hostname: "127.0.0.1",
  port: 0,
  onListen: ({ port }) => console.log(JSON.stringify({ port })),
}, drizzleHandler(db));

for await (const _ of Deno.stdin.readable) {
  // nothing is sent: end of input is the signal to stop
}
await server.shutdown();
await sql.end({ timeout: 5 });
Deno.exit(0);
