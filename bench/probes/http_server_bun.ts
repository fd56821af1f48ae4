// The HTTP suite's server under Bun: `bun bench/probes/http_server_bun.ts MAX URL` serves the very same
// handler (http_app.ts) with Bun.sql (`max` connections) through Bun.serve, and otherwise behaves
// as http_server.ts: prints `{"port":N}` once connected, stops when its standard input closes.
// Deno type-checks this file too, so the little of Bun's API it uses is declared here.
import { makeHandler, type SqlTag } from "../shared/http_app.ts";

interface BunSql extends SqlTag {
  close(options?: { timeout?: number }): Promise<void>;
}
interface BunApi {
  argv: string[];
  SQL: new (url: string, options: { max: number }) => BunSql;
  serve(options: {
    hostname: string;
    port: number;
    development: boolean;
    fetch(req: Request): Promise<Response>;
  }): { port: number; stop(closeActiveConnections?: boolean): Promise<void> | void };
  stdin: { stream(): ReadableStream<Uint8Array> };
}
const Bun = (globalThis as unknown as { Bun: BunApi }).Bun;
const proc = (globalThis as unknown as { process: { exit(code: number): never } }).process;

const [maxText, url] = Bun.argv.slice(2);
const max = Number(maxText);
if (!url || !(max >= 1)) throw new Error("usage: bun http_server_bun.ts MAX URL");

const sql = new Bun.SQL(url, { max });
// Opens every connection before the load starts, as http_server.ts does.
await Promise.all(Array.from({ length: max * 4 }, () => sql`select pg_sleep(0.01)`));

const server = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  development: false,
  fetch: makeHandler(sql),
});
console.log(JSON.stringify({ port: server.port }));

for await (const _ of Bun.stdin.stream()) {
  // nothing is sent: end of input is the signal to stop
}
await server.stop();
await sql.close({ timeout: 5 });
proc.exit(0);
