// One bulk load or read method in a fresh process, its peak RSS its own: `deno run -A
// bench/probes/bulk.ts <method> <url> <table> <rows>` loads <rows> rows of a suite table
// (bench/shared/bulk_tables.ts) into its own unlogged table, or reads `bulk_source_<table>`, once,
// checked; prints one JSON line: the time, its CPU (this process's main thread and other
// threads, the server backend's read by itself), the peak RSS (VmHWM) and where the memory is
// (RSS once loaded and once connected, V8's heap at the end).
import v8 from "node:v8";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import postgres from "../../mod.ts";
import { POSTGRES_JS } from "../peers/specifiers.ts";
import { sslOf } from "../shared/env.ts";
import { BULK_TABLES, type BulkTable } from "../shared/bulk_tables.ts";
import { BACKEND_SCHEDSTAT, type CpuTimes, minus, parseSchedstat } from "../shared/cpu.ts";
import { type ThreadCpu, threadCpu, threadCpuSince } from "../shared/cpu.ts";

const [method, url, tableName, rowsText] = Deno.args;
const spec: BulkTable = BULK_TABLES[tableName as BulkTable["name"]];
if (spec === undefined) throw new Error(`unknown table ${tableName}`);
const total = Number(rowsText);
/** The table read methods read (filled by bench/suites/bulk.ts before they run). */
const SOURCE_TABLE = `bulk_source_${spec.name}`;

/** Row `i` as made: arrays for `events`, objects for `mixed` (as issue 20's user wrote them). */
const row = (i: number) => spec.name === "events" ? spec.array(i) : spec.object(i);

/** The rows, made one at a time as the consumer asks (the same for every method). */
async function* rows(n: number, make: (i: number) => unknown = row) {
  for (let i = 0; i < n; i++) yield make(i);
}

/**
 * The driver's own pace: 1,000 rows made once and handed out in turn, each with its id set
 * (the COPY encodes a row before it asks for the next), so the rows cost next to nothing.
 */
function* cycled(n: number) {
  const pool = Array.from({ length: 1000 }, (_, i) => row(i));
  for (let i = 0; i < n; i++) {
    const r = pool[i % 1000];
    if (Array.isArray(r)) r[0] = i;
    else r.id = i;
    yield r;
  }
}

/** Batches of `size` from an async iterable. */
async function* batches<T>(items: AsyncIterable<T>, size: number) {
  const batch: T[] = [];
  for await (const item of items) {
    if (batch.push(item) === size) yield batch.splice(0);
  }
  if (batch.length > 0) yield batch;
}

/** The rows as COPY text, about 64 KiB per chunk (one write per chunk, not per row). */
async function* textChunks(n: number) {
  let chunk = "";
  for (let i = 0; i < n; i++) {
    chunk += spec.text(i);
    if (chunk.length < 64 * 1024) continue;
    yield chunk;
    chunk = "";
  }
  if (chunk) yield chunk;
}

/** Bytes V8 holds: the young generation (new space, its large objects), the old, the rest. */
function heapSpaces(): { young: number; old: number; otherHeap: number } {
  const sizes = { young: 0, old: 0, otherHeap: 0 };
  for (const { space_name: name, space_size: size } of v8.getHeapSpaceStatistics()) {
    // Other heap: code, trusted, large objects, ...
    sizes[name.startsWith("new") ? "young" : name === "old_space" ? "old" : "otherHeap"] += size;
  }
  return sizes;
}

/** RSS once the modules are loaded: Deno, its runtime and this probe's imports. */
const loadedRss = Deno.memoryUsage().rss;
let connectedRss = NaN;

// deno-lint-ignore no-explicit-any
type AnySql = any;

/** A connected client of `driver`, ended by `await using`. */
async function client(driver: "pgpipe" | "postgres.js"): Promise<AnySql> {
  const make = driver === "pgpipe" ? postgres : (await import(POSTGRES_JS)).default;
  const sql = make(url, { max: 1, ssl: sslOf(url), onnotice: () => {} });
  await sql`select 1`;
  connectedRss = Deno.memoryUsage().rss;
  // pgpipe's sql is disposable already (read-only); postgres.js's gets end() as its disposal.
  if (!(Symbol.asyncDispose in sql)) sql[Symbol.asyncDispose] = () => sql.end();
  return sql;
}

/** A load fills `table` with `total` rows; a read resolves with the rows read and the last. */
type Load = (sql: AnySql, table: string) => Promise<void>;
type Read = (sql: AnySql) => Promise<{ rows: number; last?: Record<string, unknown> }>;

const insertBatches: Load = async (sql, table) => {
  for await (const batch of batches(rows(total, spec.object), 1000)) {
    await sql`insert into ${sql(table)} ${sql(batch)}`;
  }
};

const loads: Record<string, [driver: "pgpipe" | "postgres.js", load: Load]> = {
  "pgpipe-copy-generator": ["pgpipe", (sql, table) => sql.copyFrom(table, rows(total))],
  "pgpipe-copy-array": ["pgpipe", async (sql, table) => {
    const all = [];
    for await (const row of rows(total)) all.push(row);
    const t0 = performance.now(); // only the COPY is timed here: the rows already exist
    timedCpu = threadCpu();
    await sql.copyFrom(table, all);
    timed = performance.now() - t0;
  }],
  "pgpipe-copy-cycled": ["pgpipe", (sql, table) => sql.copyFrom(table, cycled(total))],
  "pgpipe-insert": ["pgpipe", insertBatches],
  "postgresjs-insert": ["postgres.js", insertBatches],
  "postgresjs-copy-text": ["postgres.js", async (sql, table) => {
    const writable = await sql`copy ${sql(table)} from stdin`.writable();
    await pipeline(Readable.from(textChunks(total)), writable);
  }],
};

/** Reads every batch, counting the rows and keeping the last. */
async function readAll(batches: AsyncIterable<Record<string, unknown>[]>) {
  let rows = 0;
  let last: Record<string, unknown> | undefined;
  for await (const batch of batches) {
    rows += batch.length;
    last = batch[batch.length - 1];
  }
  return { rows, last };
}

/** Reads every row through a cursor of 1,000 (the bounded-memory way for a query). */
const cursorRead: Read = (sql) => readAll(sql`select * from ${sql(SOURCE_TABLE)}`.cursor(1000));

const reads: Record<string, [driver: "pgpipe" | "postgres.js", read: Read]> = {
  "pgpipe-copyto": ["pgpipe", (sql) => readAll(sql.copyTo(SOURCE_TABLE))],
  "pgpipe-cursor": ["pgpipe", cursorRead],
  "postgresjs-cursor": ["postgres.js", cursorRead],
};

let timed: number | undefined; // set by a method that times only part of its work
/** Where such a method's timed part began, for its CPU. */
let timedCpu: ThreadCpu | undefined;

/** The backend's own CPU times, or null where it may not read them (not a superuser). */
async function serverCpu(sql: AnySql): Promise<CpuTimes | null> {
  try {
    const [{ s }] = await sql.unsafe(BACKEND_SCHEDSTAT);
    return parseSchedstat(s);
  } catch {
    return null;
  }
}

let ms = NaN;
/** What the run cost: this process's threads, and the server backend's. */
let cpu: { client: ThreadCpu | null; server: CpuTimes | null } | undefined;

/** Runs `work`, timed, with what it cost this process's threads and (given sql) its backend. */
async function measured<T>(sql: AnySql | null, work: () => Promise<T>): Promise<T> {
  const server = sql && await serverCpu(sql);
  const before = threadCpu();
  const t0 = performance.now();
  const result = await work();
  ms = timed ?? performance.now() - t0;
  const client = threadCpuSince(timedCpu ?? before) ?? null;
  const after = sql && await serverCpu(sql);
  cpu = { client, server: server && after && minus(after, server) };
  return result;
}

if (method === "rows-alone") {
  // The rows' own cost: the generator iterated with no driver (what every load pays first).
  await measured(null, async () => {
    let kept = 0;
    for await (const row of rows(total)) if (row !== null) kept++;
    if (kept !== total) throw new Error(`the generator made ${kept} rows`);
  });
} else if (method in loads) {
  const [driver, load] = loads[method];
  await using sql = await client(driver);
  const table = `bulk_${spec.name}_${method.replaceAll("-", "_")}`;
  const drop = `drop table if exists ${table}`;
  await sql.unsafe(`${drop}; create unlogged table ${table} (${spec.columns})`);
  try {
    await measured(sql, () => load(sql, table));
    const [{ n, s, m }] = await sql.unsafe(`${spec.check} from ${table}`);
    const sum = String(BigInt(total) * BigInt(total - 1) / 2n);
    // Cycled rows repeat every value but the id.
    if (n !== total || s !== sum || (m !== sum && method !== "pgpipe-copy-cycled")) {
      throw new Error(`${method}: stored ${n} rows (sums ${s}, ${m})`);
    }
  } finally {
    await sql.unsafe(drop);
  }
} else if (method in reads) {
  const [driver, read] = reads[method];
  await using sql = await client(driver);
  const { rows, last } = await measured(sql, () => read(sql));
  const mark = last === undefined ? undefined : spec.mark(last);
  if (rows !== total || String(last?.id) !== String(total - 1) || mark !== total - 1) {
    throw new Error(`${method}: read ${rows} rows, last ${last?.id} ${mark}`);
  }
} else {
  throw new Error(`unknown method ${method}`);
}
const status = Deno.readTextFileSync("/proc/self/status");
const peakRss = Number(/VmHWM:\s+(\d+) kB/.exec(status)?.[1] ?? NaN) * 1024;
const memory = { loadedRss, connectedRss, ...heapSpaces(), external: Deno.memoryUsage().external };
console.log(JSON.stringify({ ms, cpu, peakRss, memory }));
