// The HTTP suite's server under Bun: `bun bench/probes/http_server_bun.ts MAX URL` serves the very
// same handler (http_app.ts) with Bun.sql (`max` connections) through Bun.serve, and otherwise
// behaves as http_server.ts: prints `{"port":N}` once connected, stops when its stdin closes.
import { makeHandler } from "../shared/http_app.ts";
import { Bun } from "./bun_api.ts";

const [max, url] = Bun.argv.slice(2);
const sql = new Bun.SQL(url, { max: Number(max) });
// Opens every connection before the load starts, as http_server.ts does.
await Promise.all(Array.from({ length: Number(max) * 4 }, () => sql`select pg_sleep(0.01)`));
const fetch = makeHandler(sql);
const server = Bun.serve({ hostname: "127.0.0.1", port: 0, development: false, fetch });
console.log(JSON.stringify({ port: server.port }));
for await (const _ of Bun.stdin.stream()) {
  /* nothing is sent: end of input is the signal to stop */
}
await server.stop();
await sql.close({ timeout: 5 });
(globalThis as unknown as { process: { exit(code: number): never } }).process.exit(0);
