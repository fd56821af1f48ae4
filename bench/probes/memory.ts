// One memory measurement in a fresh process (so peak RSS is this case's alone):
// `deno run -A --v8-flags=--expose-gc bench/probes/memory.ts <driver> <case> <url> <module>`,
// where <driver> is pgpipe, postgres.js or deno-postgres and <module> what to import it from.
// Prints one JSON line: peak RSS (VmHWM) and, for full results, the heap retained per row.
import { sslOf } from "../shared/env.ts";

const [driver, kase, url, specifier] = Deno.args;
const gc = (globalThis as { gc?: () => void }).gc ?? (() => {});
const mod = await import(specifier);

/** The rows every case reads: four columns of common types. */
const text = (n: number) =>
  `select g, 'row ' || g as t, g * 1.5 as f, now() as ts from generate_series(1, ${n}) g`;

/** Every row of `n` at once; rows read through a cursor of `batch` at a time; the end. */
let all: (n: number) => Promise<unknown[]>;
let cursor: (n: number, batch: number) => Promise<number>;
let end: () => Promise<void>;
if (driver === "deno-postgres") {
  const c = new mod.Client(url);
  await c.connect();
  const rows = async (q: string): Promise<unknown[]> => (await c.queryObject(q)).rows;
  all = (n) => rows(text(n));
  // deno-postgres has no cursor API: SQL's DECLARE and FETCH in a transaction read the same
  // batches, one round trip each, as the other drivers' cursors do.
  cursor = async (n, batch) => {
    await rows("begin");
    await rows(`declare bench_cursor no scroll cursor for ${text(n)}`);
    let [read, got] = [0, 0];
    while ((got = (await rows(`fetch ${batch} from bench_cursor`)).length) > 0) read += got;
    await rows("commit");
    return read;
  };
  end = () => c.end();
} else {
  // pgpipe and postgres.js share the API used here.
  const sql = mod.default(url, { max: 1, ssl: sslOf(url), onnotice: () => {} });
  all = async (n) => await sql.unsafe(text(n));
  cursor = async (n, batch) => {
    let read = 0;
    for await (const b of sql.unsafe(text(n)).cursor(batch)) read += b.length;
    return read;
  };
  end = () => sql.end();
}

await all(10); // connect and warm up
gc();
const baseHeap = Deno.memoryUsage().heapUsed;
const out: Record<string, number> = {};
if (kase === "result100k") {
  const rows = await all(100_000);
  if (rows.length !== 100_000) throw new Error(`${driver}: ${rows.length} rows, not 100000`);
  gc();
  out.retainedPerRow = (Deno.memoryUsage().heapUsed - baseHeap) / rows.length;
} else if (kase === "cursor1M") {
  const rows = await cursor(1_000_000, 1000);
  if (rows !== 1_000_000) throw new Error(`${driver}: cursor read ${rows} rows, not 1000000`);
} else {
  throw new Error(`unknown case ${kase}`);
}
const status = Deno.readTextFileSync("/proc/self/status");
out.peakRss = Number(/VmHWM:\s+(\d+) kB/.exec(status)?.[1] ?? NaN) * 1024;
await end();
console.log(JSON.stringify(out));
