// Suite 2: queries per second for a tiny query (`select $1::int`) with a window of queries in
// flight, on one and on four connections, then strictly serial latency. With a tiny query the
// driver's per-query cost dominates, so this shows client overhead rather than server work.
// When pgbench is installed, libpq's own pipeline mode runs the same query as the physical limit.
// Serial latency is also taken with one core kept busy (spinner.ts explains why).
import postgres from "../mod.ts";
import { type Adapter, type Driver, suiteDrivers } from "./drivers.ts";
import { benchUrl, isQuick } from "./env.ts";
import { pgbenchPipeline } from "./pgbench.ts";
import { buildLibpqPipeline, libpqPipeline } from "./libpq_pipeline.ts";
import {
  emitReport,
  fmt,
  formatRatio,
  type Ratio,
  type SuiteReport,
  type Table,
} from "./report.ts";
import { startSpinner } from "./spinner.ts";
import { mean, percentile } from "./stats.ts";

const quick = isQuick();
const url = benchUrl();
const TOTAL = quick ? 10_000 : 100_000;
const WINDOW = 1_000;
const SERIAL = quick ? 1_000 : 10_000;
/** Wall-clock cap for one measurement: past it no new query is issued and the rate is what was done. */
const DEADLINE_MS = quick ? 15_000 : 60_000;

/** Result of one pipelined run. */
interface Rate {
  queries: number;
  ms: number;
  qps: number;
}

/**
 * Issues `total` queries keeping `window` in flight: `window` lanes each await their query
 * before taking the next number, so exactly `window` are outstanding until the tail.
 */
async function pipelined(a: Adapter, total: number, window: number): Promise<Rate> {
  let next = 0;
  let done = 0;
  const stop = performance.now() + DEADLINE_MS;
  const lane = async () => {
    while (next < total && performance.now() < stop) {
      const v = next++;
      const x = await a.selectInt(v);
      if (x !== v) throw new Error(`wrong answer: select ${v}::int returned ${x}`);
      done++;
    }
  };
  const t0 = performance.now();
  await Promise.all(Array.from({ length: Math.min(window, total) }, lane));
  const ms = performance.now() - t0;
  return { queries: done, ms, qps: done / (ms / 1000) };
}

/** Latency of `count` queries issued strictly one after another, in microseconds. */
async function serial(a: Adapter, count: number): Promise<number[]> {
  const samples: number[] = [];
  const stop = performance.now() + DEADLINE_MS;
  for (let v = 0; v < count && performance.now() < stop; v++) {
    const t0 = performance.now();
    const x = await a.selectInt(v);
    samples.push((performance.now() - t0) * 1000);
    if (x !== v) throw new Error(`wrong answer: select ${v}::int returned ${x}`);
  }
  return samples;
}

/** Backends currently connected with this application_name (checks the pool really opened them). */
async function backends(applicationName: string): Promise<number> {
  const sql = postgres(url, { max: 1, ssl: false });
  try {
    const [{ n }] = await sql`select count(*)::int as n from pg_stat_activity
      where application_name = ${applicationName}`;
    return n as number;
  } finally {
    await sql.end();
  }
}

interface DriverResult {
  name: string;
  one: Rate;
  four: Rate;
  fourBackends: number;
  latency: number[];
  /** The same serial run with one core kept busy (see spinner.ts). */
  latencyBusy: number[];
}

async function measure(driver: Driver): Promise<DriverResult> {
  const log = (s: string) => console.log(`throughput: ${driver.name}: ${s}`);
  const one = await driver.connect(url);
  let result: DriverResult;
  try {
    await pipelined(one, WINDOW * 2, WINDOW); // warm-up: prepares the statement, grows buffers
    const r1 = await pipelined(one, TOTAL, WINDOW);
    log(`1 connection: ${fmt(r1.qps)} q/s`);
    await serial(one, 100);
    const latency = await serial(one, SERIAL);
    log(`serial: mean ${fmt(mean(latency), 1)} µs`);
    const spinner = await startSpinner(DEADLINE_MS);
    let latencyBusy: number[];
    try {
      await serial(one, 100);
      latencyBusy = await serial(one, SERIAL);
    } finally {
      await spinner.stop();
    }
    log(`serial, one core kept busy: mean ${fmt(mean(latencyBusy), 1)} µs`);
    const app = `pgpipe_bench_${driver.name.replace(/\W/g, "_")}_4`;
    const four = await driver.connect(url, { connections: 4, applicationName: app });
    try {
      await pipelined(four, WINDOW * 4, WINDOW);
      const r4 = await pipelined(four, TOTAL, WINDOW);
      const n = await backends(app);
      log(`4 connections (${n} open): ${fmt(r4.qps)} q/s`);
      result = { name: driver.name, one: r1, four: r4, fourBackends: n, latency, latencyBusy };
    } finally {
      await four.close();
    }
  } finally {
    await one.close();
  }
  return result;
}

/** libpq with pgpipe's protocol shape, when cc and libpq-dev are available. */
async function sameShapeLimit(): Promise<{ qps?: number; note: string }> {
  const dir = await Deno.makeTempDir({ prefix: "pgpipe-libpq-" });
  try {
    const exe = await buildLibpqPipeline(dir);
    if (typeof exe !== "string") return exe;
    return await libpqPipeline(exe, url, TOTAL, WINDOW, 1);
  } finally {
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
}

async function main(): Promise<void> {
  const drivers = await suiteDrivers();
  const results: DriverResult[] = [];
  for (const d of drivers) results.push(await measure(d));
  const limit = await pgbenchPipeline(url, { seconds: quick ? 2 : 5, lines: WINDOW });
  if (limit.qps) console.log(`throughput: libpq pipeline (pgbench): ${fmt(limit.qps)} q/s`);
  const same = await sameShapeLimit();

  const base = results[0];
  const peers = results.slice(1);
  const ratios: Ratio[] = [];
  const ratio = (label: string, value: (r: DriverResult) => number, higherIsBetter: boolean) => {
    for (const p of peers) {
      const v = higherIsBetter ? value(base) / value(p) : value(p) / value(base);
      ratios.push({ suite: "throughput", label, peer: p.name, value: v });
    }
  };
  ratio("pipelined q/s, 1 connection", (r) => r.one.qps, true);
  ratio("pipelined q/s, 4 connections", (r) => r.four.qps, true);
  ratio("serial latency (mean)", (r) => mean(r.latency), false);
  ratio("serial latency (p99)", (r) => percentile(r.latency, 99), false);
  ratio("serial latency, one core kept busy (mean)", (r) => mean(r.latencyBusy), false);

  const rates: Table = {
    title: `Throughput: select $1::int, ${fmt(TOTAL)} queries, ${fmt(WINDOW)} in flight`,
    head: ["driver", "1 conn q/s", "pgpipe vs it", "4 conns q/s", "backends", "pgpipe vs it"],
    rows: results.map((r) => [
      r.name,
      fmt(r.one.qps),
      formatRatio(base.one.qps / r.one.qps),
      fmt(r.four.qps),
      String(r.fourBackends),
      formatRatio(base.four.qps / r.four.qps),
    ]),
  };
  if (limit.qps) {
    rates.rows.push([
      `libpq pipeline (pgbench, ${limit.lines} per pipeline)`,
      fmt(limit.qps),
      `pgpipe at ${fmt((100 * base.one.qps) / limit.qps)}%`,
      "",
      "",
      "",
    ]);
  }
  if (same.qps) {
    rates.rows.push([
      "libpq pipeline (1 Sync per query, pgpipe's shape)",
      fmt(same.qps),
      `pgpipe at ${fmt((100 * base.one.qps) / same.qps)}%`,
      "",
      "",
      "",
    ]);
  }
  const latencyRows = (busy: boolean) =>
    results.map((r) => {
      const samples = busy ? r.latencyBusy : r.latency;
      const baseSamples = busy ? base.latencyBusy : base.latency;
      return [
        r.name,
        busy ? "one kept busy" : "as is",
        fmt(mean(samples), 1),
        fmt(percentile(samples, 50), 1),
        fmt(percentile(samples, 99), 1),
        formatRatio(mean(samples) / mean(baseSamples)),
      ];
    });
  const lat: Table = {
    title: `Serial latency: select $1::int, ${fmt(SERIAL)} queries one at a time (µs)`,
    head: ["driver", "cores", "mean", "p50", "p99", "pgpipe vs it (mean)"],
    rows: [...latencyRows(false), ...latencyRows(true)],
  };
  const notes = [
    limit.note,
    same.note,
    "pgbench sends one Sync per 1,000 queries, so the server flushes and ends a transaction once " +
    "per pipeline; pgpipe sends one Sync per query (each query its own implicit transaction, so " +
    "a failure never aborts its neighbours), which costs the server a flush per query. The " +
    "second libpq row has that same shape.",
    "Serial latency is measured twice: as is, and with one core kept busy by a spinning " +
    "thread, because on an idle virtual machine each round trip also waits for cores to wake " +
    "from idle, which can dwarf the drivers' own costs.",
  ];
  for (const r of results) {
    if (
      r.one.queries < TOTAL || r.four.queries < TOTAL ||
      Math.min(r.latency.length, r.latencyBusy.length) < SERIAL
    ) {
      notes.push(`${r.name} hit the ${DEADLINE_MS / 1000} s cap; its rates cover what it did.`);
    }
  }
  const report: SuiteReport = { suite: "throughput", tables: [rates, lat], ratios, notes };
  await emitReport(report);
}

await main();
