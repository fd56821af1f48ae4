// One memory measurement in a fresh process (so peak RSS is this case's alone):
// `deno run -A --v8-flags=--expose-gc bench/probes/memory.ts <pgpipe|postgres.js> <case> <url>`.
// Prints one JSON line: peak RSS (VmHWM) and, for full results, the heap retained per row.
import postgres from "../../mod.ts";
import { POSTGRES_JS } from "../peers/specifiers.ts";
import { sslOf } from "../shared/env.ts";

const [driver, kase, url] = Deno.args;
const gc = (globalThis as { gc?: () => void }).gc ?? (() => {});

/** The rows every case reads: four columns of common types. */
function text(n: number): string {
  return `select g, 'row ' || g as t, g * 1.5 as f, now() as ts from generate_series(1, ${n}) g`;
}

interface Client {
  all(n: number): Promise<unknown[]>;
  cursor(n: number, batch: number): Promise<number>;
  end(): Promise<void>;
}

/** Both drivers share the postgres.js API used here, so one client serves either. */
async function client(): Promise<Client> {
  const make = driver === "pgpipe" ? postgres : (await import(POSTGRES_JS)).default;
  const sql = make(url, { max: 1, ssl: sslOf(url), onnotice: () => {} });
  return {
    all: async (n) => await sql.unsafe(text(n)),
    cursor: async (n, batch) => {
      let rows = 0;
      for await (const b of sql.unsafe(text(n)).cursor(batch)) rows += b.length;
      return rows;
    },
    end: () => sql.end(),
  };
}

function peakRssBytes(): number {
  const status = Deno.readTextFileSync("/proc/self/status");
  const kb = Number(/VmHWM:\s+(\d+) kB/.exec(status)?.[1] ?? NaN);
  return kb * 1024;
}

const c = await client();
await c.all(10); // connect and warm up
gc();
const baseHeap = Deno.memoryUsage().heapUsed;
const out: Record<string, number> = {};
if (kase === "result100k") {
  const rows = await c.all(100_000);
  if (rows.length !== 100_000) throw new Error(`${driver}: ${rows.length} rows, not 100000`);
  gc();
  out.retainedPerRow = (Deno.memoryUsage().heapUsed - baseHeap) / rows.length;
} else if (kase === "cursor1M") {
  const rows = await c.cursor(1_000_000, 1000);
  if (rows !== 1_000_000) throw new Error(`${driver}: cursor read ${rows} rows, not 1000000`);
} else {
  throw new Error(`unknown case ${kase}`);
}
out.peakRss = peakRssBytes();
await c.end();
console.log(JSON.stringify(out));
