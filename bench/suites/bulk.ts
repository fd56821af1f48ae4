// Suite 6: bulk load and bulk read, of two tables (bench/shared/bulk_tables.ts): `events`
// (int8, text, timestamptz, float8, bool, jsonb) and `mixed` (int8, numeric, uuid, bytea, text[],
// int4[], date, varchar, and text with 10% NULLs), 500,000 rows each into an unlogged table and
// back. Each method runs in a fresh process (probes/bulk.ts) so its peak RSS is its own, in
// rounds with the methods rotated: pgpipe's binary COPY (sql.copyFrom / sql.copyTo), multi-row
// inserts of 1,000 rows with pgpipe and postgres.js (events), postgres.js writing COPY text to its
// writable(), asyncpg's copy_records_to_table (Python, events, when installed) and psql's \copy
// of a pre-encoded binary file, which costs the client nothing and so shows the server's own
// pace (and of a COPY text file: the server's pace for text). Each load and read also says what
// it cost in CPU: the client's main thread, its other threads, and the server backend, which
// shows which of them held it. Then a per-type view: for every type with a binary codec, the client's encode and decode
// cost per value (probes/bulk_codecs.ts) beside the server's pace for a one-column table of it.
import { join } from "node:path";
import postgres from "../../mod.ts";
import { findPgBin } from "../../test/harness/cluster.ts";
import { suiteDrivers } from "../peers/drivers.ts";
import { BULK_TABLES, type BulkTable, CODEC_TYPES } from "../shared/bulk_tables.ts";
import { BACKEND_SCHEDSTAT, type CpuTimes, minus, parseSchedstat } from "../shared/cpu.ts";
import { benchUrl, isQuick } from "../shared/env.ts";
import {
  emitReport,
  fmt,
  formatRatio,
  type Measure as Limited,
  type Ratio,
  type Table,
} from "../shared/report.ts";

const url = benchUrl();
const quick = isQuick();
const ROWS = quick ? 100_000 : 500_000;
const ROUNDS = quick ? 1 : 3;
/** Rows of each one-column table of the per-type view. */
const TYPE_ROWS = quick ? 50_000 : 200_000;
const probes = new URL("../probes/", import.meta.url).pathname;
const peers = (await suiteDrivers()).map((d) => d.name);
const haveJs = peers.includes("postgres.js");
/** Peers that have no COPY at all: a row says so rather than leaving them out. */
const NO_COPY: Record<string, string> = {
  "deno-postgres": "cannot: no COPY (binary or text) in its API",
};
const MIB = 1048576;

/** CPU ms a run cost: the client's main thread and its other threads, and the server backend. */
interface RunCpu {
  client: { main: CpuTimes; others: CpuTimes } | null;
  server: CpuTimes | null;
}

/** One measured method. */
interface Measure {
  method: string;
  driver: string;
  ms: number;
  peakRss: number | null;
  /** What its best run cost in CPU, where measured. */
  cpu: RunCpu | null;
}

/** Where a probe's memory is (bench/probes/bulk.ts), bytes. */
interface Memory {
  /** RSS once Deno loaded the probe's modules (pgpipe among them), before connecting. */
  loadedRss: number;
  /** RSS once connected, before the method ran. */
  connectedRss: number;
  /** V8's young generation (its two semi-spaces) at the end. */
  young: number;
  /** V8's old space at the end. */
  old: number;
  /** The rest of V8's heap: code, trusted and large-object spaces. */
  otherHeap: number;
  /** Memory outside V8's heap that it tracks: ArrayBuffers (read buffers, Buffer pools). */
  external: number;
}

interface ProbeOut {
  ms: number;
  peakRss: number;
  cpu?: RunCpu;
  version?: string;
  memory?: Memory;
}

async function command(cmd: string, args: string[]): Promise<string> {
  const out = await new Deno.Command(cmd, { args, stdout: "piped", stderr: "piped" }).output();
  const err = new TextDecoder().decode(out.stderr);
  if (out.code !== 0) throw new Error(`${cmd} ${args[0]} failed: ${err.trim()}`);
  return new TextDecoder().decode(out.stdout);
}

function lastLine<T>(out: string): T {
  const lines = out.trim().split("\n");
  return JSON.parse(lines[lines.length - 1]);
}

async function probe(method: string, table: BulkTable): Promise<ProbeOut> {
  const file = join(probes, "bulk.ts");
  const args = ["run", "-A", "--no-lock", file, method, url, table.name, String(ROWS), "1"];
  return lastLine(await command(Deno.execPath(), args));
}

/** Whether asyncpg can run, or why not (one line in the notes). */
async function haveAsyncpg(): Promise<true | string> {
  try {
    await command("python3", ["-c", "import asyncpg"]);
    return true;
  } catch {
    return "asyncpg skipped: python3 or its asyncpg package is missing (pip3 install asyncpg)";
  }
}

async function asyncpg(mode: "load" | "read"): Promise<ProbeOut> {
  const file = join(probes, "bulk_asyncpg.py");
  return lastLine(await command("python3", [file, mode, url, String(ROWS), "1"]));
}

let readable: Promise<boolean> | null = null;

/** Whether the backend may read its own CPU times (tried once: a refusal must not fail a \copy). */
function backendCpuReadable(psql: string): Promise<boolean> {
  readable ??= command(psql, ["-X", "-q", "-At", "-d", url, "-c", BACKEND_SCHEDSTAT]).then(
    () => true,
    () => false,
  );
  return readable;
}

/** psql's \copy of a binary file, timed around the whole psql process. */
async function psqlCopy(psql: string, direction: "from" | "to", table: string, file: string) {
  return (await psqlCopyCpu(psql, direction, table, file, "binary", false)).ms;
}

/**
 * psql's \copy in `format`, timed around the whole psql process; with `cpu`, the backend's own
 * CPU time across the \copy too (read by the backend before and after it in the same session;
 * null where it may not read /proc).
 */
async function psqlCopyCpu(
  psql: string,
  direction: "from" | "to",
  table: string,
  file: string,
  format: "binary" | "text",
  cpu: boolean,
): Promise<{ ms: number; server: CpuTimes | null }> {
  const copy = `\\copy ${table} ${direction} '${file}' (format ${format})`;
  const probe = cpu && await backendCpuReadable(psql);
  const args = probe
    ? ["-X", "-q", "-At", "-d", url, "-c", BACKEND_SCHEDSTAT, "-c", copy, "-c", BACKEND_SCHEDSTAT]
    : ["-X", "-q", "-d", url, "-c", copy];
  const t0 = performance.now();
  const out = await command(psql, args);
  const ms = performance.now() - t0;
  if (!probe) return { ms, server: null };
  const lines = out.trim().split("\n");
  const before = parseSchedstat(lines[0]);
  const after = parseSchedstat(lines[lines.length - 1]);
  return { ms, server: minus(after, before) };
}

/** The best time (and its run's CPU) and the highest peak RSS of one method over the rounds. */
class Method {
  ms = Infinity;
  peakRss: number | null = null;
  cpu: RunCpu | null = null;
  /** Where the memory was in the round with the highest peak. */
  memory: Memory | null = null;
  constructor(
    readonly method: string,
    readonly driver: string,
    readonly run: () => Promise<
      { ms: number; peakRss: number | null; cpu?: RunCpu; memory?: Memory }
    >,
  ) {}
  async measure(): Promise<void> {
    const r = await this.run();
    if (r.ms < this.ms) this.cpu = r.cpu ?? null;
    this.ms = Math.min(this.ms, r.ms);
    if (r.peakRss !== null && r.peakRss >= (this.peakRss ?? 0)) {
      this.peakRss = r.peakRss;
      this.memory = r.memory ?? null;
    }
  }
}

const sql = postgres(url, { max: 1, onnotice: () => {} });
const bin = findPgBin();
const psql = bin === null ? null : join(bin, "psql");
const notes: string[] = [];
const versions: string[] = [];
const tables: Table[] = [];
const ratios: Ratio[] = [];
const measures: Limited[] = [];
const pyReady = await haveAsyncpg();
/** The floor under every probe: the peak RSS of a Deno process that does nothing (best of 3). */
let idleRss = Infinity;
for (let i = 0; i < 3; i++) {
  const out = await command(Deno.execPath(), ["run", "-A", "--no-lock", join(probes, "idle.ts")]);
  idleRss = Math.min(idleRss, lastLine<{ peakRss: number }>(out).peakRss);
}
if (pyReady !== true) notes.push(pyReady);
if (psql === null) notes.push("psql skipped: no PostgreSQL client binaries found");
const temp: string[] = [];
const rate = (m: Measure) => ROWS / (m.ms / 1000);
const mib = (b: number | null) => (b === null ? "-" : fmt(b / MIB, 1));

/** CPU ms as a cell, "-" where not measured. */
const cpuMs = (t: CpuTimes | undefined | null) => (t == null ? "-" : fmt(t.cpu));

function report(title: string, rows: Measure[], ours: Measure): Table {
  const cannot = peers.filter((p) => NO_COPY[p]).map((p) => [
    NO_COPY[p],
    p,
    ...Array(7).fill("-"),
  ]);
  return {
    title,
    head: [
      "method",
      "driver",
      "rows/s",
      "time",
      "peak RSS MiB",
      "pgpipe binary COPY speed-up",
      "client main thread CPU ms",
      "client other threads CPU ms",
      "server backend CPU ms",
    ],
    rows: [
      ...rows.map((m) => [
        m.method,
        m.driver,
        fmt(rate(m)),
        `${fmt(m.ms / 1000, 2)} s`,
        mib(m.peakRss),
        m === ours ? "baseline" : formatRatio(m.ms / ours.ms),
        cpuMs(m.cpu?.client?.main),
        cpuMs(m.cpu?.client?.others),
        cpuMs(m.cpu?.server),
      ]),
      ...cannot,
    ],
  };
}

/** Loads and reads one table with every method, in rotated rounds; adds its tables and ratios. */
async function bulkTable(spec: BulkTable): Promise<void> {
  const source = `bulk_source_${spec.name}`;
  // The table the read methods read, loaded once with pgpipe (not timed here).
  await sql.unsafe(
    `drop table if exists ${source}; create unlogged table ${source} (${spec.columns})`,
  );
  await sql.copyFrom(
    source,
    (function* () {
      for (let i = 0; i < ROWS; i++) yield spec.array(i);
    })(),
  );
  await sql.unsafe(`vacuum analyze ${source}`);
  const events = spec.name === "events";
  const by = (method: string, driver: string, label: string) =>
    new Method(label, driver, () => probe(method, spec));
  const loads = [
    by(
      "pgpipe-copy-generator",
      "pgpipe",
      `binary COPY, sql.copyFrom(table, asyncGenerator) (${events ? "arrays" : "objects"})`,
    ),
    by(
      "pgpipe-copy-array",
      "pgpipe",
      "binary COPY, sql.copyFrom(table, array) (rows built first, not timed)",
    ),
  ];
  loads.push(
    by(
      "pgpipe-copy-cycled",
      "pgpipe",
      "binary COPY of 1,000 prepared rows handed out in turn (the driver's pace, rows cost ~nothing)",
    ),
    by("rows-alone", "-", "the same async generator iterated alone (the rows' own cost)"),
  );
  if (events) loads.push(by("pgpipe-insert", "pgpipe", "insert ${sql(rows)}, batches of 1,000"));
  if (haveJs && events) {
    loads.push(by("postgresjs-insert", "postgres.js", "insert ${sql(rows)}, batches of 1,000"));
  }
  if (haveJs) {
    loads.push(
      by("postgresjs-copy-text", "postgres.js", "COPY text to .writable(), 64 KiB chunks"),
    );
  }
  if (pyReady === true && events) {
    loads.push(
      new Method("copy_records_to_table(generator) (Python)", "asyncpg", async () => {
        const r = await asyncpg("load");
        if (versions.length === 0) {
          const python = (await command("python3", ["--version"])).trim();
          versions.push(`asyncpg ${r.version} on ${python}`);
        }
        return r;
      }),
    );
  }
  const reads = [
    by("pgpipe-copyto", "pgpipe", "binary COPY, sql.copyTo(table), batches of 1,000"),
    by("pgpipe-cursor", "pgpipe", "select * ... .cursor(1000)"),
  ];
  if (haveJs) reads.push(by("postgresjs-cursor", "postgres.js", "select * ... .cursor(1000)"));
  if (pyReady === true && events) {
    reads.push(
      new Method(
        "cursor(prefetch=1000) in a transaction (Python)",
        "asyncpg",
        () => asyncpg("read"),
      ),
    );
  }
  if (psql !== null) {
    const target = `bulk_psql_${spec.name}`;
    await sql.unsafe(
      `drop table if exists ${target}; create unlogged table ${target} (${spec.columns})`,
    );
    for (const format of ["binary", "text"] as const) {
      const file = await Deno.makeTempFile({ prefix: "pgpipe-bulk-", suffix: `.${format}` });
      temp.push(file);
      // The pre-encoded file (not timed).
      await psqlCopyCpu(psql, "to", source, file, format, false);
      loads.push(
        new Method(
          format === "binary"
            ? "\\copy of a pre-encoded binary file (no client work: the server's pace)"
            : "\\copy of a pre-encoded COPY text file (the server's pace for text)",
          "psql (libpq)",
          async () => {
            await sql.unsafe(`truncate ${target}`);
            const r = await psqlCopyCpu(psql, "from", target, file, format, true);
            const [{ n }] = await sql.unsafe(`select count(*)::int as n from ${target}`);
            if (n !== ROWS) throw new Error(`psql stored ${n} rows`);
            return { ms: r.ms, peakRss: null, cpu: { client: null, server: r.server } };
          },
        ),
      );
    }
    reads.push(
      new Method(
        "\\copy to /dev/null, binary (nothing decoded: the server's pace)",
        "psql (libpq)",
        async () => {
          const r = await psqlCopyCpu(psql, "to", source, "/dev/null", "binary", true);
          return { ms: r.ms, peakRss: null, cpu: { client: null, server: r.server } };
        },
      ),
    );
  }
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
  if (psql !== null) await sql.unsafe(`drop table if exists bulk_psql_${spec.name}`);
  await sql.unsafe(`drop table ${source}`);

  const [ourLoad] = loads;
  const [ourRead] = reads;
  tables.push(
    report(`Bulk load: ${fmt(ROWS)} rows of ${spec.title} into an unlogged table`, loads, ourLoad),
    report(`Bulk read: the same ${fmt(ROWS)} rows back`, reads, ourRead),
  );
  const rows = `${fmt(ROWS)} rows (${spec.name})`;
  const add = (label: string, peer: string, theirs: Measure | undefined, ours: Measure) => {
    if (theirs !== undefined) {
      ratios.push({ suite: "bulk", label, peer, value: theirs.ms / ours.ms });
    }
  };
  const server = loads.find((m) => m.driver.startsWith("psql"));
  add(
    `load ${rows}, binary COPY vs psql's binary \\copy (the server's pace)`,
    "psql",
    server,
    ourLoad,
  );
  add(
    `load ${rows}, 1,000 prepared rows in turn (the driver's own pace) vs psql's \\copy`,
    "psql",
    server,
    loads.find((m) => m.method.includes("prepared rows"))!,
  );
  const copyText = loads.find((m) => m.method.startsWith("COPY text"));
  add(`load ${rows}, binary COPY vs COPY text`, "postgres.js", copyText, ourLoad);
  const jsLoads = loads.filter((m) => m.driver === "postgres.js");
  if (events && jsLoads.length > 0) {
    const best = jsLoads.reduce((a, b) => (a.ms <= b.ms ? a : b));
    add(
      `load ${rows}, binary COPY vs the best other way (${best.method.split(",")[0]})`,
      "postgres.js",
      best,
      ourLoad,
    );
  }
  const py = (list: Measure[]) => list.find((m) => m.driver === "asyncpg");
  add(`load ${rows}, binary COPY vs copy_records_to_table`, "asyncpg", py(loads), ourLoad);
  const jsRead = reads.find((m) => m.driver === "postgres.js");
  add(`read ${rows}, copyTo vs cursor(1000)`, "postgres.js", jsRead, ourRead);
  add(`read ${rows}, copyTo vs cursor(prefetch=1000)`, "asyncpg", py(reads), ourRead);
  for (const [what, m] of [["copyFrom from an async generator", ourLoad], ["copyTo", ourRead]]) {
    const peak = (m as Measure).peakRss;
    if (peak === null) continue;
    measures.push({
      suite: "bulk",
      label: `peak RSS, ${what} of ${rows}`,
      against: "(absolute)",
      value: peak / MIB,
      unit: "MiB",
    });
  }
  const breakdown: [string, Method][] = [["copyTo", ourRead], ["copyFrom", ourLoad]];
  tables.push({
    title: `Where pgpipe's peak RSS goes (${spec.name}, MiB, the round with the highest peak)`,
    head: [
      "method",
      "Deno alone",
      "+ modules",
      "+ connected",
      "young gen",
      "old gen",
      "other heap",
      "external",
      "peak RSS",
    ],
    rows: breakdown.map(([what, m]) => {
      const r = m.memory;
      if (r === null) return [what, mib(idleRss), "-", "-", "-", "-", "-", "-", mib(m.peakRss)];
      return [
        what,
        mib(idleRss),
        mib(r.loadedRss),
        mib(r.connectedRss),
        mib(r.young),
        mib(r.old),
        mib(r.otherHeap),
        mib(r.external),
        mib(m.peakRss),
      ];
    }),
  });
  const serverRead = reads.find((m) => m.driver.startsWith("psql"));
  if (server && serverRead) {
    notes.push(
      `${spec.name}: the server alone (psql's \\copy, no client work) loads ${
        fmt(rate(server))
      } rows/s and reads ${fmt(rate(serverRead))} rows/s here; pgpipe loads at ${
        fmt(100 * server.ms / ourLoad.ms)
      }% of that pace (with rows that cost nothing to make: ${
        fmt(100 * server.ms / (loads.find((m) => m.method.includes("prepared rows"))?.ms ?? NaN))
      }%) and reads at ${fmt(100 * serverRead.ms / ourRead.ms)}%; the generator ${
        spec.name === "events" ? "" : "of objects "
      }alone takes ${
        fmt(100 * (loads.find((m) => m.driver === "-")?.ms ?? NaN) / server.ms)
      }% of the server's time.`,
    );
  }
  const why = cpuNote(spec, loads, ourLoad);
  if (why !== null) notes.push(why);
}

/**
 * Where a load's time went: the client's main thread (rows made and encoded, one thread) and
 * the server backend (one process) run side by side, so a load takes at least the larger of
 * the two; this says which one held pgpipe's load, and what the server's own pace is for
 * binary and text COPY (no COPY of one connection can beat the server's binary pace).
 */
function cpuNote(spec: BulkTable, loads: Method[], ours: Method): string | null {
  const main = ours.cpu?.client?.main.cpu;
  const backend = ours.cpu?.server?.cpu;
  if (main === undefined || backend === undefined) return null;
  const alone = loads.find((m) => m.driver === "-")?.cpu?.client?.main.cpu;
  const psqlOf = (format: string) =>
    loads.find((m) => m.driver.startsWith("psql") && m.method.includes(format));
  const binary = psqlOf("binary");
  const text = psqlOf("text");
  const js = loads.find((m) => m.method.startsWith("COPY text"));
  const part = (label: string, m: Method | undefined) =>
    m?.cpu?.server == null
      ? ""
      : `; ${label}: ${fmt(m.ms)} ms, backend ${fmt(m.cpu.server.cpu)} ms CPU`;
  return `${spec.name}, CPU of each load's best run: pgpipe's copyFrom from the generator took ${
    fmt(ours.ms)
  } ms: the client's main thread ${fmt(main)} ms CPU (the generator alone: ${
    alone === undefined ? "-" : fmt(alone)
  } ms), its other threads (V8's GC helpers, I/O) ${
    fmt(ours.cpu?.client?.others.cpu ?? NaN)
  } ms, the server backend ${
    fmt(backend)
  } ms. Both run at once on their own threads, so the load takes at least the larger: here the ${
    main >= backend ? "client's main thread" : "server backend"
  } (${fmt(Math.max(main, backend))} ms)${part("psql's binary \\copy", binary)}${
    part("psql's text \\copy", text)
  }${
    part("postgres.js COPY text", js)
  }. A single COPY cannot go faster than its backend's CPU for the format.`;
}

/** Client codec cost per value, from a fresh process. */
async function codecCosts(): Promise<Map<string, { encodeNs: number; decodeNs: number }>> {
  const file = join(probes, "bulk_codecs.ts");
  const out = await command(Deno.execPath(), ["run", "-A", "--no-lock", file, "20000"]);
  const list = lastLine<{ type: string; encodeNs: number; decodeNs: number }[]>(out);
  return new Map(list.map((c) => [c.type, c]));
}

/**
 * The per-type view: the client's encode and decode ns per value beside the server's ns per
 * value for a one-column table of the type (psql's binary \copy in and out, less a \copy of no
 * rows: psql's own start and connect).
 */
async function perType(): Promise<void> {
  const costs = await codecCosts();
  const rows: string[][] = [];
  const file = await Deno.makeTempFile({ prefix: "pgpipe-bulk-type-", suffix: ".bin" });
  temp.push(file);
  let overhead = Infinity;
  if (psql !== null) {
    await sql.unsafe("drop table if exists bulk_type; create unlogged table bulk_type (v int4)");
    const empty = await Deno.makeTempFile({ prefix: "pgpipe-bulk-empty-", suffix: ".bin" });
    temp.push(empty);
    await psqlCopy(psql, "to", "bulk_type", empty);
    for (let r = 0; r < 5; r++) {
      overhead = Math.min(overhead, await psqlCopy(psql, "from", "bulk_type", empty));
    }
  }
  for (const { type, value } of CODEC_TYPES) {
    const cost = costs.get(type)!;
    let loadNs = NaN;
    let readNs = NaN;
    if (psql !== null) {
      console.error(`bulk: per-type ${type}...`);
      await sql.unsafe(
        `drop table if exists bulk_type; create unlogged table bulk_type (v ${type})`,
      );
      await sql.copyFrom(
        "bulk_type",
        (function* () {
          for (let i = 0; i < TYPE_ROWS; i++) yield [value(i)];
        })(),
        { columns: ["v"], types: [type] },
      );
      await psqlCopy(psql, "to", "bulk_type", file);
      let load = Infinity;
      let read = Infinity;
      for (let r = 0; r < ROUNDS; r++) {
        await sql.unsafe("truncate bulk_type");
        load = Math.min(load, await psqlCopy(psql, "from", "bulk_type", file));
        read = Math.min(read, await psqlCopy(psql, "to", "bulk_type", "/dev/null"));
      }
      loadNs = (Math.max(0, load - overhead) * 1e6) / TYPE_ROWS;
      readNs = (Math.max(0, read - overhead) * 1e6) / TYPE_ROWS;
    }
    const share = (client: number, server: number) =>
      Number.isFinite(server) && server > 0 ? `${fmt((100 * client) / server)}%` : "-";
    rows.push([
      type,
      fmt(cost.encodeNs),
      fmt(loadNs),
      share(cost.encodeNs, loadNs),
      fmt(cost.decodeNs),
      fmt(readNs),
      share(cost.decodeNs, readNs),
    ]);
  }
  await sql.unsafe("drop table if exists bulk_type");
  tables.push({
    title: `Per type: the client's binary codec cost per value beside the server's (${
      fmt(TYPE_ROWS)
    } rows of a one-column table)`,
    head: [
      "type",
      "encode ns",
      "server load ns",
      "encode / server",
      "decode ns",
      "server read ns",
      "decode / server",
    ],
    rows,
  });
  notes.push(
    "Per type: encode and decode ns are the best of 15 rounds over 20,000 values in a fresh process (no server); server ns are psql's binary \\copy of the one-column table in and out (to /dev/null), less a \\copy of no rows (psql's start and connect), per value. A codec at a large share of the server's time is the one that would hold a load or a read below the server's pace.",
  );
}

try {
  await bulkTable(BULK_TABLES.events);
  await bulkTable(BULK_TABLES.mixed);
  await perType();
} finally {
  await sql.end();
  for (const file of temp) await Deno.remove(file).catch(() => {});
}
for (const peer of peers.filter((p) => NO_COPY[p])) {
  for (const what of ["load", "read"]) {
    ratios.push({
      suite: "bulk",
      label: `${what}, binary COPY`,
      peer,
      value: NaN,
      cannot: NO_COPY[peer],
    });
  }
}

await emitReport({
  suite: "bulk",
  tables,
  ratios,
  measures,
  notes: [
    `Each method runs in a fresh process, once per round, ${ROUNDS} round(s) with the methods rotated; the best time is shown, peak RSS is the highest of the process's high-water marks (VmHWM), rows generated included.`,
    "Where the peak RSS goes: Deno alone is a process that imports nothing (probes/idle.ts); + modules is the probe's RSS once its modules (pgpipe, node:stream) are loaded, + connected once its connection is up; young gen, old gen, other heap (code, trusted and large-object spaces) and external (ArrayBuffers) are V8's at the end of the run (V8 grows its young generation, up to two 32 MiB semi-spaces, while objects keep surviving its scavenges: here the batch the consumer holds and the one being decoded, or the rows being encoded; the old generation holds what incremental marking found reachable while rows passed through). Peak RSS is a little above their sum: allocator and thread stacks.",
    "Rows are made one at a time by a generator as the method asks for them (except for the array case), with the same values for every driver; each load is checked (count and sums), each read checks its row count and last row. Multi-row inserts and asyncpg run on the events table only.",
    ...notes,
    ...versions,
  ],
});
