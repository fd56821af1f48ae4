// One cold start in a fresh process: import the driver, create a client, run the first query,
// exit. `deno run -A bench/probes/cold.ts <pgpipe|pgpipe-ca|postgres.js> <url>` prints the ms
// from process start to the answer and from creating the client to the answer. `pgpipe-ca`
// gives pgpipe the CA in PGPIPE_BENCH_CA (so it verifies the server: native TLS).
import { POSTGRES_JS } from "../peers/specifiers.ts";

const [driver, url] = Deno.args;
const t0 = performance.now(); // ms since this process's time origin (process start)
/** The slice of both drivers' API the probe uses. */
type Client = {
  (strings: TemplateStringsArray): PromiseLike<{ x: unknown }[]>;
  end(): Promise<void>;
};
type Factory = (url: string, options: Record<string, unknown>) => Client;
const factory: Factory = driver.startsWith("pgpipe")
  ? (await import("../../mod.ts")).default as unknown as Factory
  : (await import(POSTGRES_JS)).default;
const tls = new URL(url).searchParams.get("sslmode") === "require";
const ca = driver === "pgpipe-ca" ? Deno.readTextFileSync(Deno.env.get("PGPIPE_BENCH_CA")!) : "";
const created = performance.now();
const sql = factory(url, {
  max: 1,
  onnotice: () => {},
  // The URL says sslmode=require for both; postgres.js reads `ssl` from its options too.
  ...(driver === "pgpipe-ca" ? { ssl: { mode: "require", ca } } : tls ? { ssl: "require" } : {}),
});
const [{ x }] = await sql`select 1 as x`;
if (x !== 1) throw new Error(`${driver}: wrong answer ${x}`);
const total = performance.now();
await sql.end();
console.log(JSON.stringify({ importToAnswer: total - t0, createdToAnswer: total - created }));
