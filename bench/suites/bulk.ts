// Suite 6: bulk load and bulk read. 1,000,000 rows of (int8, text, timestamptz, float8, bool,
// jsonb) into an unlogged table and back, each method in a fresh process (bulk_probe.ts) so its
// peak RSS is its own: pgpipe's binary COPY (sql.copyFrom / sql.copyTo), multi-row inserts of
// 1,000 rows with pgpipe and postgres.js, postgres.js writing COPY text to its writable(), and,
// when installed, asyncpg's copy_records_to_table (Python) and psql's \copy of a pre-encoded
// binary file, which costs the client nothing and so shows the server's own pace.
import { join } from "node:path";
import postgres from "../../mod.ts";
import { findPgBin } from "../../test/harness/cluster.ts";
import { suiteDrivers } from "../peers/drivers.ts";
import { benchUrl, isQuick } from "../shared/env.ts";
import { emitReport, fmt, formatRatio, type Ratio, type Table } from "../shared/report.ts";

const url = benchUrl();
const quick = isQuick();
const ROWS = quick ? 100_000 : 1_000_000;
const RUNS = quick ? 1 : 2;
const probes = new URL("../probes/", import.meta.url).pathname;
const SOURCE_TABLE = "bulk_source";
const COLUMNS = "id int8, name text, at timestamptz, score float8, flag bool, meta jsonb";
const peers = (await suiteDrivers()).map((d) => d.name);
const haveJs = peers.includes("postgres.js");
/** Peers that have no COPY at all: a row says so rather than leaving them out. */
const NO_COPY: Record<string, string> = {
  "deno-postgres": "cannot: no COPY (binary or text) in its API",
};

/** One measured method. */
interface Measure {
  method: string;
  driver: string;
  ms: number;
  peakRss: number | null;
}

interface ProbeOut {
  ms: number;
  peakRss: number;
  version?: string;
}

async function command(cmd: string, args: string[]): Promise<string> {
  const out = await new Deno.Command(cmd, { args, stdout: "piped", stderr: "piped" }).output();
  const err = new TextDecoder().decode(out.stderr);
  if (out.code !== 0) throw new Error(`${cmd} ${args[0]} failed: ${err.trim()}`);
  return new TextDecoder().decode(out.stdout);
}

/** Runs a probe for ROWS rows and RUNS runs on url; its last output line is its JSON. */
async function runProbe(cmd: string, args: string[]): Promise<ProbeOut> {
  const out = await command(cmd, [...args, url, String(ROWS), String(RUNS)]);
  const lines = out.trim().split("\n");
  return JSON.parse(lines[lines.length - 1]);
}

function probe(method: string): Promise<ProbeOut> {
  return runProbe(Deno.execPath(), ["run", "-A", "--no-lock", join(probes, "bulk.ts"), method]);
}

/** asyncpg's figures, or why they are missing (one line in the notes). */
async function asyncpg(mode: "load" | "read"): Promise<ProbeOut | string> {
  try {
    await command("python3", ["-c", "import asyncpg"]);
  } catch {
    return "asyncpg skipped: python3 or its asyncpg package is missing (pip3 install asyncpg)";
  }
  return await runProbe("python3", [join(probes, "bulk_asyncpg.py"), mode]);
}

/** psql's \copy of a binary file, timed around the whole psql process. */
async function psqlCopy(psql: string, direction: "from" | "to", table: string, file: string) {
  const t0 = performance.now();
  await command(psql, [
    "-X",
    "-q",
    "-d",
    url,
    "-c",
    `\\copy ${table} ${direction} '${file}' (format binary)`,
  ]);
  return performance.now() - t0;
}

const sql = postgres(url, { max: 1, onnotice: () => {} });
const loads: Measure[] = [];
const reads: Measure[] = [];
const notes: string[] = [];
const versions: string[] = [];
let asyncpgLoad: Measure | undefined;
let asyncpgRead: Measure | undefined;
let tmp: string | undefined;
try {
  // The table the read methods read, loaded once with pgpipe (not timed here).
  await sql.unsafe(
    `drop table if exists ${SOURCE_TABLE}; create unlogged table ${SOURCE_TABLE} (${COLUMNS})`,
  );
  const base = Date.UTC(2024, 0, 1);
  await sql.copyFrom(
    SOURCE_TABLE,
    (function* () {
      for (let i = 0; i < ROWS; i++) {
        yield [i, `name ${i}`, new Date(base + i * 1000), i / 4, i % 2 === 0, { n: i, tag: "x" }];
      }
    })(),
  );
  await sql.unsafe(`vacuum analyze ${SOURCE_TABLE}`);

  const methods: [string, string, string][] = [
    ["pgpipe-copy-generator", "pgpipe", "binary COPY, sql.copyFrom(table, asyncGenerator)"],
    [
      "pgpipe-copy-array",
      "pgpipe",
      "binary COPY, sql.copyFrom(table, array) (rows built first, not timed)",
    ],
    ["pgpipe-insert", "pgpipe", "insert ${sql(rows)}, batches of 1,000"],
  ];
  if (haveJs) {
    methods.push(
      ["postgresjs-insert", "postgres.js", "insert ${sql(rows)}, batches of 1,000"],
      ["postgresjs-copy-text", "postgres.js", "COPY text to .writable(), 64 KiB chunks"],
    );
  }
  for (const [method, driver, label] of methods) {
    console.error(`bulk: load ${method}...`);
    const r = await probe(method);
    loads.push({ method: label, driver, ms: r.ms, peakRss: r.peakRss });
  }
  const pyLoad = await asyncpg("load");
  if (typeof pyLoad === "string") notes.push(pyLoad);
  else {
    asyncpgLoad = {
      method: "copy_records_to_table(generator) (Python)",
      driver: "asyncpg",
      ms: pyLoad.ms,
      peakRss: pyLoad.peakRss,
    };
    loads.push(asyncpgLoad);
    versions.push(
      `asyncpg ${pyLoad.version} on ${(await command("python3", ["--version"])).trim()}`,
    );
  }

  const readMethods: [string, string, string][] = [
    ["pgpipe-copyto", "pgpipe", "binary COPY, sql.copyTo(table), batches of 1,000"],
    ["pgpipe-cursor", "pgpipe", "select * ... .cursor(1000)"],
  ];
  if (haveJs) readMethods.push(["postgresjs-cursor", "postgres.js", "select * ... .cursor(1000)"]);
  for (const [method, driver, label] of readMethods) {
    console.error(`bulk: read ${method}...`);
    const r = await probe(method);
    reads.push({ method: label, driver, ms: r.ms, peakRss: r.peakRss });
  }
  const pyRead = await asyncpg("read");
  if (typeof pyRead !== "string") {
    asyncpgRead = {
      method: "cursor(prefetch=1000) in a transaction (Python)",
      driver: "asyncpg",
      ms: pyRead.ms,
      peakRss: pyRead.peakRss,
    };
    reads.push(asyncpgRead);
  }

  const bin = findPgBin();
  const psql = bin === null ? null : join(bin, "psql");
  if (psql === null) notes.push("psql skipped: no PostgreSQL client binaries found");
  else {
    tmp = await Deno.makeTempFile({ prefix: "pgpipe-bulk-", suffix: ".bin" });
    await psqlCopy(psql, "to", SOURCE_TABLE, tmp); // the pre-encoded file (not timed)
    await sql.unsafe(
      `drop table if exists bulk_psql; create unlogged table bulk_psql (${COLUMNS})`,
    );
    let loadMs = Infinity;
    let readMs = Infinity;
    for (let r = 0; r < RUNS; r++) {
      await sql.unsafe("truncate bulk_psql");
      loadMs = Math.min(loadMs, await psqlCopy(psql, "from", "bulk_psql", tmp));
      readMs = Math.min(readMs, await psqlCopy(psql, "to", SOURCE_TABLE, "/dev/null"));
    }
    const [{ n }] = await sql`select count(*)::int as n from bulk_psql`;
    if (n !== ROWS) throw new Error(`psql stored ${n} rows`);
    await sql`drop table bulk_psql`;
    const label = "\\copy of a pre-encoded binary file (no client work: the server's pace)";
    loads.push({ method: label, driver: "psql (libpq)", ms: loadMs, peakRss: null });
    reads.push({
      method: "\\copy to /dev/null, binary (nothing decoded: the server's pace)",
      driver: "psql (libpq)",
      ms: readMs,
      peakRss: null,
    });
  }
} finally {
  await sql.unsafe(`drop table if exists ${SOURCE_TABLE}`).catch(() => {});
  await sql.end();
  if (tmp) await Deno.remove(tmp).catch(() => {});
}

const rate = (m: Measure) => ROWS / (m.ms / 1000);
const mib = (b: number | null) => (b === null ? "-" : fmt(b / 1048576, 1));

function table(title: string, rows: Measure[], ours: Measure): Table {
  const cannot = peers.filter((p) => NO_COPY[p]).map((p) => [NO_COPY[p], p, "-", "-", "-", "-"]);
  return {
    title,
    head: ["method", "driver", "rows/s", "time", "peak RSS MiB", "pgpipe binary COPY speed-up"],
    rows: [
      ...rows.map((m) => [
        m.method,
        m.driver,
        fmt(rate(m)),
        `${fmt(m.ms / 1000, 2)} s`,
        mib(m.peakRss),
        m === ours ? "baseline" : formatRatio(m.ms / ours.ms),
      ]),
      ...cannot,
    ],
  };
}

const ourLoad = loads[0];
const ourRead = reads[0];
const ratios: Ratio[] = [];
const jsLoads = loads.filter((m) => m.driver === "postgres.js");
if (jsLoads.length > 0) {
  const best = jsLoads.reduce((a, b) => (a.ms <= b.ms ? a : b));
  ratios.push({
    suite: "bulk",
    label: `load ${fmt(ROWS)} rows, binary COPY vs the best other way (${
      best.method.split(",")[0]
    })`,
    peer: "postgres.js",
    value: best.ms / ourLoad.ms,
  });
}
if (asyncpgLoad) {
  ratios.push({
    suite: "bulk",
    label: `load ${fmt(ROWS)} rows, binary COPY vs copy_records_to_table`,
    peer: "asyncpg",
    value: asyncpgLoad.ms / ourLoad.ms,
  });
}
const jsRead = reads.find((m) => m.driver === "postgres.js");
if (jsRead) {
  ratios.push({
    suite: "bulk",
    label: `read ${fmt(ROWS)} rows, copyTo vs cursor(1000)`,
    peer: "postgres.js",
    value: jsRead.ms / ourRead.ms,
  });
}
if (asyncpgRead) {
  ratios.push({
    suite: "bulk",
    label: `read ${fmt(ROWS)} rows, copyTo vs cursor(prefetch=1000)`,
    peer: "asyncpg",
    value: asyncpgRead.ms / ourRead.ms,
  });
}

for (const peer of peers.filter((p) => NO_COPY[p])) {
  for (const what of ["load", "read"]) {
    ratios.push({
      suite: "bulk",
      label: `${what} ${fmt(ROWS)} rows, binary COPY`,
      peer,
      value: NaN,
      cannot: NO_COPY[peer],
    });
  }
}

const verdict = (ok: boolean) => (ok ? "met" : "not met");
const loadRate = rate(ourLoad);
const readRate = rate(ourRead);
const server = loads.find((m) => m.driver.startsWith("psql"));
await emitReport({
  suite: "bulk",
  tables: [
    table(
      `Bulk load: ${
        fmt(ROWS)
      } rows of (int8, text, timestamptz, float8, bool, jsonb) into an unlogged table`,
      loads,
      ourLoad,
    ),
    table(`Bulk read: the same ${fmt(ROWS)} rows back`, reads, ourRead),
  ],
  ratios,
  notes: [
    `Each method runs in a fresh process, ${RUNS} time(s); the best time is shown, peak RSS is the process's high-water mark (VmHWM) over all its runs, rows generated included.`,
    "Rows are made one at a time by a generator as the method asks for them (except for the array case), with the same values for every driver; each load is checked (count and sums), each read checks its row count and last row.",
    `Absolute targets: load >= 1,000,000 rows/s: ${fmt(loadRate)} (${
      verdict(loadRate >= 1e6)
    }); read >= 1,000,000 rows/s: ${fmt(readRate)} (${
      verdict(readRate >= 1e6)
    }); peak RSS loading from an async generator < 150 MiB: ${mib(ourLoad.peakRss)} MiB (${
      verdict((ourLoad.peakRss ?? Infinity) < 150 * 1048576)
    }).`,
    server
      ? `The server alone (psql's \\copy, no client work) loads ${
        fmt(rate(server))
      } rows/s here: binary COPY from pgpipe runs at ${
        fmt(100 * server.ms / ourLoad.ms)
      }% of that pace. Where that is below the targets, the server (parsing jsonb, one backend on a 2-core machine) is the limit, not the client.`
      : "",
    ...versions,
    ...notes,
  ],
});
