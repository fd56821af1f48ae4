// One cold start in a fresh process: import the driver, connect, run the first query, exit.
// `deno run -A bench/probes/cold.ts <driver> <url> <module>` (pgpipe, postgres.js or
// deno-postgres, imported from <module>) prints the ms from process start.
const [driver, url, specifier] = Deno.args;
const t0 = performance.now(); // ms since this process's time origin (process start)
/** The slice of pgpipe's and postgres.js's API the probe uses. */
type Sql = {
  (strings: TemplateStringsArray): PromiseLike<{ x: unknown }[]>;
  end(): Promise<void>;
};
/** The slice of deno-postgres's Client the probe uses. */
type DpClient = {
  connect(): Promise<void>;
  queryObject(text: string): Promise<{ rows: { x: unknown }[] }>;
  end(): Promise<void>;
};
const mod = await import(specifier);
let first: () => Promise<unknown>;
let end: () => Promise<void>;
if (driver === "deno-postgres") {
  const client: DpClient = new mod.Client(url);
  await client.connect();
  first = async () => (await client.queryObject("select 1 as x")).rows[0].x;
  end = () => client.end();
} else {
  const sql: Sql = mod.default(url, { max: 1, onnotice: () => {} });
  first = async () => (await sql`select 1 as x`)[0].x;
  end = () => sql.end();
}
const x = await first();
if (x !== 1) throw new Error(`${driver}: wrong answer ${x}`);
const total = performance.now();
await end();
console.log(JSON.stringify({ firstQuery: total, importToAnswer: total - t0 }));
