// One cold start in a fresh process: import the driver, connect, run the first query, exit.
// `deno run -A bench/probes/cold.ts <pgpipe|postgres.js> <url>` prints the ms from process start.
import { POSTGRES_JS } from "../peers/specifiers.ts";

const [driver, url] = Deno.args;
const t0 = performance.now(); // ms since this process's time origin (process start)
/** The slice of both drivers' API the probe uses. */
type Client = {
  (strings: TemplateStringsArray): PromiseLike<{ x: unknown }[]>;
  end(): Promise<void>;
};
const sql: Client = driver === "pgpipe"
  ? (await import("../../mod.ts")).default(url, { max: 1, onnotice: () => {} })
  : (await import(POSTGRES_JS)).default(url, { max: 1, onnotice: () => {} });
const [{ x }] = await sql`select 1 as x`;
if (x !== 1) throw new Error(`${driver}: wrong answer ${x}`);
const total = performance.now();
await sql.end();
console.log(JSON.stringify({ firstQuery: total, importToAnswer: total - t0 }));
