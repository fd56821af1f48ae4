// One bulk load or read method in a fresh process (so peak RSS is this method's alone):
// `deno run -A bench/probes/bulk.ts <method> <url> <rows> <runs>`. Loads <rows> rows of
// (int8, text, timestamptz, float8, bool, jsonb) into its own unlogged table, or reads the
// suite's `bulk_source` table, <runs> times; checks the result each time and prints one JSON line:
// the best time, the rows and the process's peak RSS (VmHWM). bench/suites/bulk.ts runs it.
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import postgres from "../../mod.ts";
import { POSTGRES_JS } from "../peers/specifiers.ts";
import { sslOf } from "../shared/env.ts";

const [method, url, rowsText, runsText] = Deno.args;
const total = Number(rowsText);
const runs = Number(runsText);
/** The table read methods read (filled by bench/suites/bulk.ts before they run). */
export const SOURCE_TABLE = "bulk_source";
const COLUMNS = "id int8, name text, at timestamptz, score float8, flag bool, meta jsonb";
const BASE = Date.UTC(2024, 0, 1);

/** The rows, made one at a time as the consumer asks (the same for every method). */
async function* rowArrays(n: number) {
  for (let i = 0; i < n; i++) {
    yield [i, `name ${i}`, new Date(BASE + i * 1000), i / 4, i % 2 === 0, { n: i, tag: "x" }];
  }
}

async function* rowObjects(n: number) {
  for (let i = 0; i < n; i++) {
    yield {
      id: i,
      name: `name ${i}`,
      at: new Date(BASE + i * 1000),
      score: i / 4,
      flag: i % 2 === 0,
      meta: { n: i, tag: "x" },
    };
  }
}

/** Batches of `size` from an async iterable. */
async function* batches<T>(rows: AsyncIterable<T>, size: number) {
  let batch: T[] = [];
  for await (const row of rows) {
    batch.push(row);
    if (batch.length === size) {
      yield batch;
      batch = [];
    }
  }
  if (batch.length > 0) yield batch;
}

/** COPY text format: escapes for backslash, tab, newline and carriage return. */
function copyText(value: string): string {
  return /[\\\t\n\r]/.test(value)
    ? value.replace(
      /[\\\t\n\r]/g,
      (c) => ({ "\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r" })[c]!,
    )
    : value;
}

/** The rows as COPY text, about 1,000 rows per chunk (one write per chunk, not per row). */
async function* textChunks(n: number) {
  let chunk = "";
  for await (const [id, name, at, score, flag, meta] of rowArrays(n)) {
    chunk += `${id}\t${copyText(name as string)}\t${(at as Date).toISOString()}\t${score}\t${
      flag ? "t" : "f"
    }\t${copyText(JSON.stringify(meta))}\n`;
    if (chunk.length >= 64 * 1024) {
      yield chunk;
      chunk = "";
    }
  }
  if (chunk) yield chunk;
}

function peakRss(): number {
  const status = Deno.readTextFileSync("/proc/self/status");
  return Number(/VmHWM:\s+(\d+) kB/.exec(status)?.[1] ?? NaN) * 1024;
}

// deno-lint-ignore no-explicit-any
type AnySql = any;

async function client(driver: "pgpipe" | "postgres.js"): Promise<AnySql> {
  const make = driver === "pgpipe" ? postgres : (await import(POSTGRES_JS)).default;
  const sql = make(url, { max: 1, ssl: sslOf(url), onnotice: () => {} });
  await sql`select 1`;
  return sql;
}

/** A load method: fills `table` with `total` rows. */
type Load = (sql: AnySql, table: string) => Promise<void>;
/** A read method: resolves with the rows read and the last one (id, meta.n). */
type Read = (sql: AnySql) => Promise<{ rows: number; lastId: unknown; lastMeta: unknown }>;

const insertBatches: Load = async (sql, table) => {
  for await (const batch of batches(rowObjects(total), 1000)) {
    await sql`insert into ${sql(table)} ${sql(batch)}`;
  }
};

const loads: Record<string, [driver: "pgpipe" | "postgres.js", load: Load]> = {
  "pgpipe-copy-generator": ["pgpipe", (sql, table) => sql.copyFrom(table, rowArrays(total))],
  "pgpipe-copy-array": ["pgpipe", async (sql, table) => {
    const rows = [];
    for await (const row of rowArrays(total)) rows.push(row);
    const t0 = performance.now(); // only the COPY is timed here: the rows already exist
    await sql.copyFrom(table, rows);
    timed = performance.now() - t0;
  }],
  "pgpipe-insert": ["pgpipe", insertBatches],
  "postgresjs-insert": ["postgres.js", insertBatches],
  "postgresjs-copy-text": ["postgres.js", async (sql, table) => {
    const writable = await sql`copy ${sql(table)} from stdin`.writable();
    await pipeline(Readable.from(textChunks(total)), writable);
  }],
};

/** Reads every row through a cursor of 1,000 (the bounded-memory way for a query). */
const cursorRead: Read = async (sql) => {
  let rows = 0;
  let last: Record<string, unknown> | undefined;
  for await (const batch of sql`select * from ${sql(SOURCE_TABLE)}`.cursor(1000)) {
    rows += batch.length;
    last = batch[batch.length - 1];
  }
  return { rows, lastId: last?.id, lastMeta: (last?.meta as { n: number })?.n };
};

const reads: Record<string, [driver: "pgpipe" | "postgres.js", read: Read]> = {
  "pgpipe-copyto": ["pgpipe", async (sql) => {
    let rows = 0;
    let last: Record<string, unknown> | undefined;
    for await (const batch of sql.copyTo(SOURCE_TABLE)) {
      rows += batch.length;
      last = batch[batch.length - 1];
    }
    return { rows, lastId: last?.id, lastMeta: (last?.meta as { n: number })?.n };
  }],
  "pgpipe-cursor": ["pgpipe", cursorRead],
  "postgresjs-cursor": ["postgres.js", cursorRead],
};

let timed: number | null = null; // set by a method that times only part of its work

const times: number[] = [];
if (method in loads) {
  const [driver, load] = loads[method];
  const sql = await client(driver);
  const table = `bulk_${method.replaceAll("-", "_")}`;
  await sql.unsafe(`drop table if exists ${table}; create unlogged table ${table} (${COLUMNS})`);
  try {
    for (let r = 0; r < runs; r++) {
      await sql.unsafe(`truncate ${table}`);
      timed = null;
      const t0 = performance.now();
      await load(sql, table);
      times.push(timed ?? performance.now() - t0);
      const [{ n, s }] = await sql.unsafe(
        `select count(*)::int as n, sum(id)::text as s, sum((meta->>'n')::int8)::text as m from ${table}`,
      );
      const sum = String(BigInt(total) * BigInt(total - 1) / 2n);
      if (n !== total || s !== sum) throw new Error(`${method}: stored ${n} rows (sum ${s})`);
    }
  } finally {
    await sql.unsafe(`drop table if exists ${table}`);
    await sql.end();
  }
} else if (method in reads) {
  const [driver, read] = reads[method];
  const sql = await client(driver);
  try {
    for (let r = 0; r < runs; r++) {
      const t0 = performance.now();
      const got = await read(sql);
      times.push(performance.now() - t0);
      if (
        got.rows !== total || String(got.lastId) !== String(total - 1) || got.lastMeta !== total - 1
      ) {
        throw new Error(`${method}: read ${got.rows} rows, last ${got.lastId} ${got.lastMeta}`);
      }
    }
  } finally {
    await sql.end();
  }
} else {
  throw new Error(`unknown method ${method}`);
}
console.log(JSON.stringify({ ms: Math.min(...times), times, rows: total, peakRss: peakRss() }));
