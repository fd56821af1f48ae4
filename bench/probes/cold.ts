// One cold start in a fresh process: import the driver, create a client, run the first query,
// exit. `deno run -A bench/probes/cold.ts <driver> <url> <module> [import]` (pgpipe, pgpipe-ca,
// postgres.js or deno-postgres, imported from <module>) prints the ms from process start to the
// answer and from creating the client to the answer; with `import`, it exits once the driver is
// imported (importToAnswer: the ms to that point), and the driver `empty` imports nothing.
// `pgpipe-ca` gives pgpipe the CA in PGPIPE_BENCH_CA (so it verifies the server: a process's
// first connection takes node:tls, native TLS only with sslnegotiation=direct).
const [driver, url, specifier, mode] = Deno.args;
const t0 = performance.now(); // ms since this process's time origin (process start)
// `empty`: the empty Deno script the imports are measured over (it imports nothing).
const mod = driver === "empty" ? null : await import(specifier);
if (mode === "import" || driver === "empty") {
  // Import only: the process exits once the driver is loaded.
  const imported = performance.now() - t0;
  console.log(JSON.stringify({ importToAnswer: imported, createdToAnswer: 0 }));
  Deno.exit(0);
}
const params = new URL(url).searchParams;
let created: number;
let first: () => Promise<unknown>;
let end: () => Promise<void>;
if (driver === "deno-postgres") {
  created = performance.now();
  const client = new mod.Client(url);
  await client.connect();
  first = async () => (await client.queryObject("select 1 as x")).rows[0].x;
  end = () => client.end();
} else {
  const tls = params.get("sslmode") === "require";
  const ca = driver === "pgpipe-ca" ? Deno.readTextFileSync(Deno.env.get("PGPIPE_BENCH_CA")!) : "";
  created = performance.now();
  const sql = mod.default(url, {
    max: 1,
    onnotice: () => {},
    // The URL says sslmode=require for both; postgres.js reads `ssl` from its options too.
    ...(driver === "pgpipe-ca" ? { ssl: { mode: "require", ca } } : tls ? { ssl: "require" } : {}),
  });
  first = async () => {
    const result = await sql`select 1 as x`;
    if (driver.startsWith("pgpipe") && tls) {
      // The TLS path the tables name: direct TLS with the CA stays native; any other first
      // connection to a server takes node:tls.
      const direct = driver === "pgpipe-ca" && params.get("sslnegotiation") === "direct";
      const expected = direct ? "native" : "node";
      const path = result.state?.tls;
      if (path !== expected) throw new Error(`${driver}: ran on ${String(path)}, not ${expected}`);
    }
    return result[0].x;
  };
  end = () => sql.end();
}
const x = await first();
if (x !== 1) throw new Error(`${driver}: wrong answer ${x}`);
const total = performance.now();
await end();
console.log(JSON.stringify({ importToAnswer: total - t0, createdToAnswer: total - created }));
