// One memory measurement in a fresh process (so peak RSS is this case's alone):
// `deno run -A --v8-flags=--expose-gc bench/probes/memory.ts <driver> <case> <url> <module>`,
// where <driver> is pgpipe, postgres.js or deno-postgres and <module> what to import it from.
// Prints one JSON line: peak RSS (VmHWM) and, for full results, the heap retained per row.
import { sslOf } from "../shared/env.ts";

const [driver, kase, url, specifier] = Deno.args;
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

/** pgpipe and postgres.js share the API used here, so one client serves either. */
async function client(): Promise<Client> {
  if (driver === "deno-postgres") return await denoPostgres();
  const make = (await import(specifier)).default;
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

/** The slice of deno-postgres's Client used here. */
interface DpClient {
  connect(): Promise<void>;
  queryObject(text: string): Promise<{ rows: unknown[] }>;
  end(): Promise<void>;
}

async function denoPostgres(): Promise<Client> {
  const { Client } = await import(specifier);
  const c: DpClient = new Client(url);
  await c.connect();
  return {
    all: async (n) => (await c.queryObject(text(n))).rows,
    // deno-postgres has no cursor API: SQL's DECLARE and FETCH in a transaction read the same
    // batches, one round trip each, as the other drivers' cursors do.
    cursor: async (n, batch) => {
      await c.queryObject("begin");
      await c.queryObject(`declare bench_cursor no scroll cursor for ${text(n)}`);
      let rows = 0;
      for (;;) {
        const got = (await c.queryObject(`fetch ${batch} from bench_cursor`)).rows.length;
        if (got === 0) break;
        rows += got;
      }
      await c.queryObject("commit");
      return rows;
    },
    end: () => c.end(),
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
