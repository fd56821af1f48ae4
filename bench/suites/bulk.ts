// Bulk load and bulk read of two tables (bench/shared/bulk_tables.ts), `events` (int8,
// text, timestamptz, float8, bool, jsonb) and `mixed` (int8, numeric, uuid, bytea, text[], int4[],
// date, varchar, text with 10% NULLs), 500,000 rows each into an unlogged table and back. Each
// method runs in a fresh process (probes/bulk.ts, its peak RSS its own), in rounds with the
// methods rotated: pgpipe's binary COPY (sql.copyFrom / sql.copyTo), multi-row inserts of 1,000
// rows with pgpipe and postgres.js (events), postgres.js writing COPY text to its writable(),
// asyncpg's copy_records_to_table (Python, events, when installed) and psql's \copy of a
// pre-encoded binary file, which costs the client nothing and so shows the server's own pace
// (and of a COPY text file: its pace for text). Each also says what it cost in CPU: the client's
// main thread, its other threads, and the server backend, which shows which held it. Then per
// type: for every type with a binary codec, the client's encode and decode cost per value
// (probes/bulk_codecs.ts) beside the server's pace for a one-column table of it.
import postgres from "../../mod.ts";
import { suiteDrivers } from "../peers/drivers.ts";
import { BULK_TABLES, type BulkTable, CODEC_TYPES } from "../shared/bulk_tables.ts";
import { BACKEND_SCHEDSTAT, type CpuTimes, minus, parseSchedstat } from "../shared/cpu.ts";
import type { ThreadCpu } from "../shared/cpu.ts";
import { benchUrl, isQuick } from "../shared/env.ts";
import { clientTool, findPgBin } from "../shared/harness.ts";
import { probe, run, tempDir } from "../shared/probe.ts";
import { fmt, formatRatio, mib, Report } from "../shared/report.ts";

const url = benchUrl();
const quick = isQuick();
const ROWS = quick ? 100_000 : 500_000;
const ROUNDS = quick ? 1 : 3;
/** Rows of each one-column table of the per-type view. */
const TYPE_ROWS = quick ? 50_000 : 200_000;
const peers = (await suiteDrivers()).map((d) => d.name);
const haveJs = peers.includes("postgres.js");
/** Peers that have no COPY at all: a row says so rather than leaving them out. */
const NO_COPY: Record<string, string> = {
  "deno-postgres": "cannot: no COPY (binary or text) in its API",
};

/** Where a probe's memory is (bytes): RSS once loaded and once connected, V8's heap at the end. */
const MEMORY = ["loadedRss", "connectedRss", "young", "old", "otherHeap", "external"] as const;

/** What one run of a method measured (bench/probes/bulk.ts prints it; psql's runs too). */
interface Measured {
  ms: number;
  peakRss: number | null;
  /** CPU ms: the client's main thread and its other threads, and the server backend. */
  cpu?: { client: ThreadCpu | null; server: CpuTimes | null };
  memory?: Record<typeof MEMORY[number], number>;
  version?: string;
}

/** Each method's row (`method | driver`), by key: the probe's method name, asyncpg's, psql's. */
const ROW: Record<string, string> = {
  "pgpipe-copy-array":
    "binary COPY, sql.copyFrom(table, array) (rows built first, not timed) | pgpipe",
  "pgpipe-copy-cycled":
    "binary COPY of 1,000 prepared rows handed out in turn (the driver's pace, rows cost ~nothing) | pgpipe",
  "rows-alone": "the same async generator iterated alone (the rows' own cost) | -",
  "pgpipe-copyto": "binary COPY, sql.copyTo(table), batches of 1,000 | pgpipe",
  "pgpipe-cursor": "select * ... .cursor(1000) | pgpipe",
  "pgpipe-insert": "insert ${sql(rows)}, batches of 1,000 | pgpipe",
  "postgresjs-insert": "insert ${sql(rows)}, batches of 1,000 | postgres.js",
  "postgresjs-copy-text": "COPY text to .writable(), 64 KiB chunks | postgres.js",
  "postgresjs-cursor": "select * ... .cursor(1000) | postgres.js",
  "asyncpg-load": "copy_records_to_table(generator) (Python) | asyncpg",
  "asyncpg-read": "cursor(prefetch=1000) in a transaction (Python) | asyncpg",
  "psql-read": "\\copy to /dev/null, binary (nothing decoded: the server's pace) | psql (libpq)",
  "psql-binary":
    "\\copy of a pre-encoded binary file (no client work: the server's pace) | psql (libpq)",
  "psql-text": "\\copy of a pre-encoded COPY text file (the server's pace for text) | psql (libpq)",
};

/** One method, as its table row starts: the best time (and its run's CPU), the highest peak RSS. */
class Method {
  readonly method: string;
  readonly driver: string;
  best: Measured = { ms: Infinity, peakRss: null };
  /** Where the memory was in the round with the highest peak. */
  memory: Measured["memory"];
  constructor(readonly key: string, readonly run: () => Promise<Measured>, row = ROW[key]) {
    [this.method, this.driver] = row.split(" | ");
  }
  get ms() {
    return this.best.ms;
  }
  async measure(): Promise<void> {
    const r = await this.run();
    const peakRss = r.peakRss !== null && r.peakRss >= (this.best.peakRss ?? 0) ? r.peakRss : null;
    if (peakRss !== null) this.memory = r.memory;
    this.best = {
      ms: Math.min(this.best.ms, r.ms),
      peakRss: peakRss ?? this.best.peakRss,
      cpu: r.ms < this.best.ms ? r.cpu : this.best.cpu,
    };
  }
}

await using sql = postgres(url, { max: 1, onnotice: () => {} });
await using temp = await tempDir("pgpipe-bulk-");
const psql = findPgBin() === null ? null : clientTool(findPgBin(), "psql");
const report = new Report("bulk");
const notes: string[] = [];
const versions: string[] = [];
const pyReady = await run("python3", ["-c", "import asyncpg"]).then(() => true, () => false);
if (!pyReady) {
  notes.push("asyncpg skipped: python3 or its asyncpg package is missing (pip3 install asyncpg)");
}
if (psql === null) notes.push("psql skipped: no PostgreSQL client binaries found");
/** The floor under every probe: the peak RSS of a Deno process that does nothing (best of 3). */
let idleRss = Infinity;
for (let i = 0; i < 3; i++) {
  idleRss = Math.min(idleRss, (await probe<{ peakRss: number }>("idle.ts", [])).peakRss);
}
const rate = (m: Method) => ROWS / (m.ms / 1000);
const cpuMs = (t: CpuTimes | undefined | null) => (t == null ? "-" : fmt(t.cpu));
let files = 0;
const tempFile = (suffix: string) => `${temp.path}/${files++}${suffix}`;
const freshTable = (table: string, columns: string) =>
  sql.unsafe(`drop table if exists ${table}; create unlogged table ${table} (${columns})`);
function* generated<T>(n: number, row: (i: number) => T) {
  for (let i = 0; i < n; i++) yield row(i);
}
/** One table's method by its key. */
type Get = (key: string) => Method | undefined;

/** Whether the backend may read its own CPU times (tried once: a refusal must not fail a \copy). */
let readable: Promise<boolean> | null = null;

/**
 * psql's \copy in `format`, timed around the whole process; with `cpu`, the backend's CPU across it
 * too (read by the backend in the same session; null where it may not).
 */
async function psqlCopy(to: boolean, table: string, file: string, format = "binary", cpu = false) {
  const copy = `\\copy ${table} ${to ? "to" : "from"} '${file}' (format ${format})`;
  const at = ["-X", "-q", "-At", "-d", url];
  readable ??= run(psql!, [...at, "-c", BACKEND_SCHEDSTAT]).then(() => true, () => false);
  const backend = cpu && await readable;
  const stat = backend ? ["-c", BACKEND_SCHEDSTAT] : [];
  const t0 = performance.now();
  const out = (await run(psql!, [...at, ...stat, "-c", copy, ...stat])).trim().split("\n");
  const ms = performance.now() - t0;
  const server = backend ? minus(parseSchedstat(out.at(-1)!), parseSchedstat(out[0])) : null;
  return { ms, peakRss: null, cpu: { client: null, server } };
}

/** A load or read table: every method, with a row per peer that cannot. */
function methodTable(title: string, rows: Method[]): void {
  const cannot = peers.filter((p) => NO_COPY[p]).map((p) => [NO_COPY[p], p, ...Array(7).fill("-")]);
  report.table(
    title,
    "method | driver | rows/s | time | peak RSS MiB | pgpipe binary COPY speed-up | client main thread CPU ms | client other threads CPU ms | server backend CPU ms",
    [
      ...rows.map((m) => [
        m.method,
        m.driver,
        fmt(rate(m)),
        `${fmt(m.ms / 1000, 2)} s`,
        mib(m.best.peakRss),
        m === rows[0] ? "baseline" : formatRatio(m.ms / rows[0].ms),
        ...[m.best.cpu?.client?.main, m.best.cpu?.client?.others, m.best.cpu?.server].map(cpuMs),
      ]),
      ...cannot,
    ],
  );
}

/** asyncpg (Python) in a fresh process; the first run notes its version. */
async function asyncpg(mode: "load" | "read"): Promise<Measured> {
  const r = await probe<Measured>("bulk_asyncpg.py", [mode, url, ROWS, 1], { runtime: "python3" });
  if (versions.length === 0) {
    versions.push(`asyncpg ${r.version} on ${(await run("python3", ["--version"])).trim()}`);
  }
  return r;
}

/** Every load and read method for one table, psql's last (their files pre-encoded here). */
async function methods(spec: BulkTable, source: string): Promise<[Method[], Method[]]> {
  const events = spec.name === "events";
  const by = (name: string, row?: string) =>
    new Method(name, () => probe<Measured>("bulk.ts", [name, url, spec.name, ROWS]), row);
  const from = `sql.copyFrom(table, asyncGenerator) (${events ? "arrays" : "objects"})`;
  const loads = [
    by("pgpipe-copy-generator", `binary COPY, ${from} | pgpipe`),
    ...["pgpipe-copy-array", "pgpipe-copy-cycled", "rows-alone"].map((n) => by(n)),
  ];
  const reads = [by("pgpipe-copyto"), by("pgpipe-cursor")];
  if (events) loads.push(by("pgpipe-insert"));
  if (haveJs && events) loads.push(by("postgresjs-insert"));
  if (haveJs) {
    loads.push(by("postgresjs-copy-text"));
    reads.push(by("postgresjs-cursor"));
  }
  if (pyReady && events) {
    loads.push(new Method("asyncpg-load", () => asyncpg("load")));
    reads.push(new Method("asyncpg-read", () => asyncpg("read")));
  }
  if (psql === null) return [loads, reads];
  reads.push(new Method("psql-read", () => psqlCopy(true, source, "/dev/null", "binary", true)));
  const target = `bulk_psql_${spec.name}`;
  await freshTable(target, spec.columns);
  for (const format of ["binary", "text"]) {
    const file = tempFile(`.${format}`);
    await psqlCopy(true, source, file, format); // the pre-encoded file (not timed)
    loads.push(
      new Method(`psql-${format}`, async () => {
        await sql.unsafe(`truncate ${target}`);
        const r = await psqlCopy(false, target, file, format, true);
        const [{ n }] = await sql.unsafe(`select count(*)::int as n from ${target}`);
        if (n !== ROWS) throw new Error(`psql stored ${n} rows`);
        return r;
      }),
    );
  }
  return [loads, reads];
}

/** Loads and reads one table with every method, in rotated rounds; adds its tables and ratios. */
async function bulkTable(spec: BulkTable): Promise<void> {
  // The table the read methods read, loaded once with pgpipe (not timed).
  const source = `bulk_source_${spec.name}`;
  await freshTable(source, spec.columns);
  await sql.copyFrom(source, generated(ROWS, spec.array));
  await sql.unsafe(`vacuum analyze ${source}`);
  const [loads, reads] = await methods(spec, source);
  // Rounds with the methods rotated, so a noisy moment does not always land on the same one.
  for (let round = 0; round < ROUNDS; round++) {
    for (const list of [loads, reads]) {
      for (let k = 0; k < list.length; k++) {
        const m = list[(k + round) % list.length];
        console.error(`bulk: ${spec.name} round ${round + 1}: ${m.driver} ${m.method}...`);
        await m.measure();
      }
    }
  }
  await sql.unsafe(`drop table if exists bulk_psql_${spec.name}; drop table ${source}`);
  methodTable(`Bulk load: ${fmt(ROWS)} rows of ${spec.title} into an unlogged table`, loads);
  methodTable(`Bulk read: the same ${fmt(ROWS)} rows back`, reads);
  const get: Get = (key) => [...loads, ...reads].find((m) => m.key === key);
  bulkRatios(spec, loads, reads, get);
  const memory = ([["copyTo", reads[0]], ["copyFrom", loads[0]]] as const).map(([what, m]) => {
    const parts = MEMORY.map((part) => m.memory ? mib(m.memory[part]) : "-");
    return [what, mib(idleRss), ...parts, mib(m.best.peakRss)];
  });
  report.table(
    `Where pgpipe's peak RSS goes (${spec.name}, MiB, the round with the highest peak)`,
    "method | Deno alone | + modules | + connected | young gen | old gen | other heap | external | peak RSS",
    memory,
  );
  paceNote(spec, loads, reads, get);
  cpuNote(spec, loads, get);
}

/** The ratios of one table's methods to pgpipe's, and its peak RSS against the limit. */
function bulkRatios(spec: BulkTable, loads: Method[], reads: Method[], get: Get): void {
  const [ourLoad, ourRead] = [loads[0], reads[0]];
  const rows = `${fmt(ROWS)} rows (${spec.name})`;
  const add = (vs: string, peer: string, theirs: Method | undefined, ours = ourLoad) => {
    const what = ours === ourRead ? "read" : "load";
    if (theirs !== undefined) report.ratio(`${what} ${rows}, ${vs}`, peer, theirs.ms / ours.ms);
  };
  const [server, prepared] = [get("psql-binary"), get("pgpipe-copy-cycled")!];
  add("binary COPY vs psql's binary \\copy (the server's pace)", "psql", server);
  const driverPace = "1,000 prepared rows in turn (the driver's own pace) vs psql's \\copy";
  add(driverPace, "psql", server, prepared);
  add("binary COPY vs COPY text", "postgres.js", get("postgresjs-copy-text"));
  const jsLoads = loads.filter((m) => m.driver === "postgres.js");
  if (spec.name === "events" && jsLoads.length > 0) {
    const best = jsLoads.reduce((a, b) => (a.ms <= b.ms ? a : b));
    add(`binary COPY vs the best other way (${best.method.split(",")[0]})`, "postgres.js", best);
  }
  add("binary COPY vs copy_records_to_table", "asyncpg", get("asyncpg-load"));
  add("copyTo vs cursor(1000)", "postgres.js", get("postgresjs-cursor"), ourRead);
  add("copyTo vs cursor(prefetch=1000)", "asyncpg", get("asyncpg-read"), ourRead);
  const peaks = [["copyFrom from an async generator", ourLoad], ["copyTo", ourRead]] as const;
  for (const [what, m] of peaks) {
    const peak = m.best.peakRss;
    if (peak !== null) {
      report.measure(`peak RSS, ${what} of ${rows}`, "(absolute)", peak / 1048576, "MiB");
    }
  }
}

/** How pgpipe's load and read compare with the server's own pace (psql's \copy). */
function paceNote(spec: BulkTable, loads: Method[], reads: Method[], get: Get): void {
  const [server, serverRead] = [get("psql-binary"), get("psql-read")];
  if (!server || !serverRead) return;
  const share = (a: number, b: number | undefined) => fmt(100 * a / (b ?? NaN));
  const [loadRate, readRate] = [fmt(rate(server)), fmt(rate(serverRead))];
  const ofLoad = share(server.ms, loads[0].ms);
  const ofPrepared = share(server.ms, get("pgpipe-copy-cycled")?.ms);
  const ofRead = share(serverRead.ms, reads[0].ms);
  const generator = spec.name === "events" ? "generator" : "generator of objects";
  const alone = fmt(100 * (get("rows-alone")?.ms ?? NaN) / server.ms);
  notes.push(
    `${spec.name}: the server alone (psql's \\copy, no client work) loads ${loadRate} rows/s and reads ${readRate} rows/s here; pgpipe loads at ${ofLoad}% of that pace (with rows that cost nothing to make: ${ofPrepared}%) and reads at ${ofRead}%; the ${generator} alone takes ${alone}% of the server's time.`,
  );
}

/**
 * Where a load's time went: the client's main thread (rows made and encoded, one thread) and
 * the server backend (one process) run side by side, so a load takes at least the larger of
 * the two; this says which one held pgpipe's load, and what the server's own pace is for
 * binary and text COPY (no COPY of one connection can beat the server's binary pace).
 */
function cpuNote(spec: BulkTable, loads: Method[], get: Get): void {
  const ours = loads[0].best;
  const [main, backend] = [ours.cpu?.client?.main.cpu, ours.cpu?.server?.cpu];
  if (main === undefined || backend === undefined) return;
  const part = (label: string, m: Method | undefined) =>
    m?.best.cpu?.server
      ? `; ${label}: ${fmt(m.ms)} ms, backend ${fmt(m.best.cpu.server.cpu)} ms CPU`
      : "";
  const others = part("psql's binary \\copy", get("psql-binary")) +
    part("psql's text \\copy", get("psql-text")) +
    part("postgres.js COPY text", get("postgresjs-copy-text"));
  const [took, mainMs, backendMs, larger] = [ours.ms, main, backend, Math.max(main, backend)]
    .map((x) => fmt(x));
  const aloneMs = fmt(get("rows-alone")?.best.cpu?.client?.main.cpu ?? NaN);
  const othersMs = fmt(ours.cpu?.client?.others.cpu ?? NaN);
  const held = main >= backend ? "client's main thread" : "server backend";
  notes.push(
    `${spec.name}, CPU of each load's best run: pgpipe's copyFrom from the generator took ${took} ms: the client's main thread ${mainMs} ms CPU (the generator alone: ${aloneMs} ms), its other threads (V8's GC helpers, I/O) ${othersMs} ms, the server backend ${backendMs} ms. Both run at once on their own threads, so the load takes at least the larger: here the ${held} (${larger} ms)${others}. A single COPY cannot go faster than its backend's CPU for the format.`,
  );
}

/**
 * The per-type view: the client's encode and decode ns per value (bench/probes/bulk_codecs.ts,
 * a fresh process) beside the server's ns per value for a one-column table of the type (psql's
 * binary \copy in and out, less a \copy of no rows: psql's own start and connect).
 */
async function perType(): Promise<void> {
  type Cost = { type: string; encodeNs: number; decodeNs: number };
  const costs = new Map((await probe<Cost[]>("bulk_codecs.ts", [20000])).map((c) => [c.type, c]));
  const file = tempFile(".bin");
  let overhead = Infinity;
  if (psql !== null) {
    await freshTable("bulk_type", "v int4");
    const empty = tempFile(".bin");
    await psqlCopy(true, "bulk_type", empty);
    for (let r = 0; r < 5; r++) {
      overhead = Math.min(overhead, (await psqlCopy(false, "bulk_type", empty)).ms);
    }
  }
  const perValue = (ms: number) => (Math.max(0, ms - overhead) * 1e6) / TYPE_ROWS;
  const share = (client: number, server: number) =>
    Number.isFinite(server) && server > 0 ? `${fmt((100 * client) / server)}%` : "-";
  const rows: string[][] = [];
  for (const { type, value } of CODEC_TYPES) {
    const { encodeNs, decodeNs } = costs.get(type)!;
    const server = psql === null ? [NaN, NaN] : await serverPerValue(type, value, file);
    const [load, read] = server.map(perValue);
    const [en, de] = [fmt(encodeNs), fmt(decodeNs)];
    rows.push([type, en, fmt(load), share(encodeNs, load), de, fmt(read), share(decodeNs, read)]);
  }
  await sql.unsafe("drop table if exists bulk_type");
  const typeRows = fmt(TYPE_ROWS);
  report.table(
    `Per type: the client's binary codec cost per value beside the server's (${typeRows} rows of a one-column table)`,
    "type | encode ns | server load ns | encode / server | decode ns | server read ns | decode / server",
    rows,
  );
  notes.push(
    "Per type: encode and decode ns are the best of 15 rounds over 20,000 values in a fresh process (no server); server ns are psql's binary \\copy of the one-column table in and out (to /dev/null), less a \\copy of no rows (psql's start and connect), per value. A codec at a large share of the server's time is the one that would hold a load or a read below the server's pace.",
  );
}

/** The best ms of psql's binary \copy into and out of a one-column table of `type`. */
async function serverPerValue(type: string, value: (i: number) => unknown, file: string) {
  console.error(`bulk: per-type ${type}...`);
  await freshTable("bulk_type", `v ${type}`);
  const values = generated(TYPE_ROWS, (i) => [value(i)]);
  await sql.copyFrom("bulk_type", values, { columns: ["v"], types: [type] });
  await psqlCopy(true, "bulk_type", file);
  let [load, read] = [Infinity, Infinity];
  for (let r = 0; r < ROUNDS; r++) {
    await sql.unsafe("truncate bulk_type");
    load = Math.min(load, (await psqlCopy(false, "bulk_type", file)).ms);
    read = Math.min(read, (await psqlCopy(true, "bulk_type", "/dev/null")).ms);
  }
  return [load, read];
}

await bulkTable(BULK_TABLES.events);
await bulkTable(BULK_TABLES.mixed);
await perType();
for (const peer of peers.filter((p) => NO_COPY[p])) {
  for (const what of ["load", "read"]) {
    report.ratio(`${what}, binary COPY`, peer, NaN, NO_COPY[peer]);
  }
}
report.note(
  `Each method runs in a fresh process, once per round, ${ROUNDS} round(s) with the methods rotated; the best time is shown, peak RSS is the highest of the process's high-water marks (VmHWM), rows generated included.`,
  "Where the peak RSS goes: Deno alone is a process that imports nothing (probes/idle.ts); + modules is the probe's RSS once its modules (pgpipe, node:stream) are loaded, + connected once its connection is up; young gen, old gen, other heap (code, trusted and large-object spaces) and external (ArrayBuffers) are V8's at the end of the run (V8 grows its young generation, up to two 32 MiB semi-spaces, while objects keep surviving its scavenges: here the batch the consumer holds and the one being decoded, or the rows being encoded; the old generation holds what incremental marking found reachable while rows passed through). Peak RSS is a little above their sum: allocator and thread stacks.",
  "Rows are made one at a time by a generator as the method asks for them (except for the array case), with the same values for every driver; each load is checked (count and sums), each read checks its row count and last row. Multi-row inserts and asyncpg run on the events table only.",
  ...notes,
  ...versions,
);
await report.emit();
