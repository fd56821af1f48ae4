// Suite 2: queries per second for a tiny query (`select $1::int`) with a window of queries in
// flight, on one and on four connections, then strictly serial latency. With a tiny query the
// driver's per-query cost dominates, so this shows client overhead rather than server work.
// When pgbench is installed, libpq's own pipeline mode runs the same query as the physical limit.
// Serial latency is also taken with one core kept busy (spinner.ts explains why). Last, serial
// `select 1` beside a raw socket ping-pong of the very bytes pgpipe sends for it (pingpong.ts):
// the difference is what the driver costs per query over the physical limit.
import postgres from "../../mod.ts";
import { type Adapter, type Driver, suiteDrivers } from "../peers/drivers.ts";
import { benchUrl, isQuick } from "../shared/env.ts";
import { pgbenchPipeline } from "../peers/pgbench.ts";
import { captureSession, PingPong, type WireSession } from "../peers/pingpong.ts";
import { buildLibpqPipeline, libpqPipeline } from "../peers/libpq_pipeline.ts";
import {
  emitReport,
  fmt,
  formatRatio,
  type Measure,
  type Ratio,
  type SuiteReport,
  type Table,
} from "../shared/report.ts";
import { startSpinner } from "../shared/spinner.ts";
import { mean, percentile } from "../shared/stats.ts";

const quick = isQuick();
const url = benchUrl();
const TOTAL = quick ? 10_000 : 100_000;
const WINDOW = 1_000;
const SERIAL = quick ? 1_000 : 10_000;
/** Wall-clock cap for one measurement: past it no new query is issued and the rate is what was done. */
const DEADLINE_MS = quick ? 15_000 : 60_000;
/** Serial `select 1` per client beside the raw ping-pong, in rounds with the order rotated. */
const PING_QUERIES = quick ? 2_000 : 20_000;
const PING_ROUNDS = 4;

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
async function pipelined(
  a: Pick<Adapter, "selectInt">,
  total: number,
  window: number,
): Promise<Rate> {
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

/** What a table shows for a driver that does not pipeline (Driver.pipelines). */
const CANNOT = "cannot (no pipelining)";

interface DriverResult {
  name: string;
  /** The pipelined runs; null for a driver that sends one query at a time. */
  pipelined: {
    one: Rate;
    /** The same on one connection inside a transaction (where pgpipe shares one Sync per batch). */
    inTx: Rate;
    four: Rate;
    fourBackends: number;
  } | null;
  latency: number[];
  /** The same serial run with one core kept busy (see spinner.ts). */
  latencyBusy: number[];
}

async function measure(driver: Driver): Promise<DriverResult> {
  const log = (s: string) => console.log(`throughput: ${driver.name}: ${s}`);
  const one = await driver.connect(url);
  try {
    let r1: Rate | undefined;
    let inTx: Rate | undefined;
    if (driver.pipelines) {
      await pipelined(one, WINDOW * 2, WINDOW); // warm-up: prepares the statement, grows buffers
      r1 = await pipelined(one, TOTAL, WINDOW);
      log(`1 connection: ${fmt(r1.qps)} q/s`);
      await one.rolledBack(async (tx) => {
        await pipelined(tx, WINDOW * 2, WINDOW);
        inTx = await pipelined(tx, TOTAL, WINDOW);
      });
      log(`1 connection, in a transaction: ${fmt(inTx!.qps)} q/s`);
    } else log(`pipelined runs: ${CANNOT}`);
    await serial(one, 100);
    const latency = await serial(one, SERIAL);
    log(`serial: mean ${fmt(mean(latency), 1)} µs`);
    // Long enough for a driver whose warm-up and run both take long (deno-postgres).
    const spinner = await startSpinner(DEADLINE_MS * 2);
    let latencyBusy: number[];
    try {
      await serial(one, 100);
      latencyBusy = await serial(one, SERIAL);
    } finally {
      await spinner.stop();
    }
    log(`serial, one core kept busy: mean ${fmt(mean(latencyBusy), 1)} µs`);
    if (!r1 || !inTx) return { name: driver.name, pipelined: null, latency, latencyBusy };
    const app = `pgpipe_bench_${driver.name.replace(/\W/g, "_")}_4`;
    const four = await driver.connect(url, { connections: 4, applicationName: app });
    try {
      await pipelined(four, WINDOW * 4, WINDOW);
      const r4 = await pipelined(four, TOTAL, WINDOW);
      const n = await backends(app);
      log(`4 connections (${n} open): ${fmt(r4.qps)} q/s`);
      return {
        name: driver.name,
        pipelined: { one: r1, inTx, four: r4, fourBackends: n },
        latency,
        latencyBusy,
      };
    } finally {
      await four.close();
    }
  } finally {
    await one.close();
  }
}

/** One client of the ping-pong comparison: the raw socket or a driver. */
interface PingClient {
  name: string;
  /** One strictly serial `select 1` round trip. */
  once(): Promise<void>;
  close(): Promise<void>;
}

/**
 * Captures pgpipe's session while it runs serial `select 1`s: the last request is the steady
 * state every later `select 1` sends. Checks it repeats byte for byte.
 */
async function captureSelectOne(pgpipe: Driver): Promise<WireSession> {
  const session = await captureSession(url, async (via) => {
    const a = await pgpipe.connect(via);
    try {
      for (let i = 0; i < 3; i++) {
        const x = await a.selectOne();
        if (x !== 1) throw new Error(`wrong answer: select 1 returned ${x}`);
      }
    } finally {
      await a.close();
    }
  });
  const [before, last] = session.requests.slice(-2);
  const same = before && last && before.bytes.length === last.bytes.length &&
    before.bytes.every((b, i) => b === last.bytes[i]);
  if (!same) {
    throw new Error(
      `pgpipe's serial select 1 did not repeat its bytes: ${
        session.requests.map((r) => r.types).join(" ")
      }`,
    );
  }
  return session;
}

async function pingClients(drivers: Driver[], session: WireSession): Promise<PingClient[]> {
  const u = new URL(url);
  const raw = await PingPong.open(u.hostname, Number(u.port || 5432), session);
  const bytes = session.requests[session.requests.length - 1].bytes;
  const clients: PingClient[] = [{
    name: "raw socket ping-pong",
    once: () => raw.roundTrip(bytes),
    close: () => Promise.resolve(raw.close()),
  }];
  try {
    for (const d of drivers) {
      const a = await d.connect(url);
      clients.push({
        name: d.name,
        async once() {
          const x = await a.selectOne();
          if (x !== 1) throw new Error(`wrong answer: ${d.name}: select 1 returned ${x}`);
        },
        close: () => a.close(),
      });
    }
  } catch (e) {
    await Promise.allSettled(clients.map((c) => c.close()));
    throw e;
  }
  return clients;
}

/** Latencies (µs) of `count` serial round trips, stopping early at `stop` (performance.now()). */
async function serialOnce(c: PingClient, count: number, stop: number): Promise<number[]> {
  const samples: number[] = [];
  for (let i = 0; i < count && performance.now() < stop; i++) {
    const t0 = performance.now();
    await c.once();
    samples.push((performance.now() - t0) * 1000);
  }
  return samples;
}

/** Per client, the samples of PING_QUERIES serial round trips in rounds, order rotated. */
async function pingRounds(clients: PingClient[]): Promise<Map<string, number[]>> {
  const out = new Map(clients.map((c) => [c.name, [] as number[]]));
  const stop = performance.now() + DEADLINE_MS;
  for (const c of clients) await serialOnce(c, 500, stop); // warm-up (JIT, buffers)
  const perRound = Math.ceil(PING_QUERIES / PING_ROUNDS);
  for (let r = 0; r < PING_ROUNDS; r++) {
    for (let k = 0; k < clients.length; k++) {
      const c = clients[(k + r) % clients.length];
      out.get(c.name)!.push(...await serialOnce(c, perRound, stop));
    }
  }
  return out;
}

interface PingResult {
  asIs: Map<string, number[]>;
  busy: Map<string, number[]>;
  session: WireSession;
}

/** Serial `select 1` for the raw ping-pong and each driver, as is and with one core kept busy. */
async function pingPong(drivers: Driver[]): Promise<PingResult> {
  const pgpipe = drivers.find((d) => d.name === "pgpipe");
  if (!pgpipe) throw new Error("the ping-pong needs pgpipe to capture its bytes");
  const session = await captureSelectOne(pgpipe);
  const clients = await pingClients(drivers, session);
  try {
    const asIs = await pingRounds(clients);
    const spinner = await startSpinner(DEADLINE_MS * 2);
    let busy: Map<string, number[]>;
    try {
      busy = await pingRounds(clients);
    } finally {
      await spinner.stop();
    }
    for (const [name, samples] of asIs) {
      console.log(
        `throughput: serial select 1, ${name}: mean ${fmt(mean(samples), 1)} µs, ` +
          `one core kept busy ${fmt(mean(busy.get(name)!), 1)} µs`,
      );
    }
    return { asIs, busy, session };
  } finally {
    await Promise.allSettled(clients.map((c) => c.close()));
  }
}

/** The ping-pong table, pgpipe's overheads as measures, and notes. */
function pingReport(
  p: PingResult,
): { table: Table; measures: Measure[]; notes: string[] } {
  const RAW = "raw socket ping-pong";
  const rows: string[][] = [];
  const measures: Measure[] = [];
  for (const [cores, samples] of [["as is", p.asIs], ["one kept busy", p.busy]] as const) {
    const raw = samples.get(RAW)!;
    for (const [name, s] of samples) {
      const overMean = mean(s) - mean(raw);
      const overP50 = percentile(s, 50) - percentile(raw, 50);
      rows.push([
        name,
        cores,
        fmt(mean(s), 1),
        fmt(percentile(s, 50), 1),
        fmt(percentile(s, 99), 1),
        name === RAW ? "" : `+${fmt(overMean, 1)}`,
        name === RAW ? "" : `+${fmt(overP50, 1)}`,
        String(s.length),
      ]);
      if (name === "pgpipe") {
        const busy = cores === "as is" ? "" : ", one core kept busy";
        const label = "serial select 1: pgpipe overhead over the raw ping-pong";
        measures.push(
          {
            suite: "throughput",
            label: `${label}${busy} (mean)`,
            against: RAW,
            value: overMean,
            unit: "µs",
          },
          {
            suite: "throughput",
            label: `${label}${busy} (p50)`,
            against: RAW,
            value: overP50,
            unit: "µs",
          },
        );
      }
    }
  }
  const steady = p.session.requests[p.session.requests.length - 1];
  const short = [...p.asIs, ...p.busy].filter(([, s]) => s.length < PING_QUERIES);
  const capped = short.length
    ? [`${short.map(([n]) => n).join(", ")} hit the ${DEADLINE_MS / 1000} s cap in the ping-pong.`]
    : [];
  return {
    table: {
      title: `Serial select 1 beside a raw socket ping-pong of pgpipe's bytes (µs; ${
        fmt(PING_QUERIES)
      } each, ${PING_ROUNDS} rounds, order rotated)`,
      head: [
        "client",
        "cores",
        "mean",
        "p50",
        "p99",
        "over raw (mean)",
        "over raw (p50)",
        "queries",
      ],
      rows,
    },
    measures,
    notes: [
      `Raw socket ping-pong: a plain Deno.connect socket replays pgpipe's own session (captured ` +
      `through a recording proxy: startup and ${p.session.requests.length - 1} set-up ` +
      `requests once), then sends the ${steady.bytes.length} bytes pgpipe writes for each ` +
      `serial \`select 1\` (${steady.types.split("").join(" ")}: Bind Execute Sync of its ` +
      `prepared statement) and reads until ReadyForQuery, decoding nothing. Its time is the ` +
      `floor (loopback, the server, Deno's socket ops); "over raw" is what each driver adds.`,
      ...capped,
    ],
  };
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
  const ping = pingReport(await pingPong(drivers));

  const base = results[0];
  const ours = base.pipelined;
  if (!ours) throw new Error("pgpipe must pipeline: it is the baseline");
  const peers = results.slice(1);
  const ratios: Ratio[] = [];
  const ratio = (label: string, value: (r: DriverResult) => number, higherIsBetter: boolean) => {
    for (const p of peers) {
      const v = higherIsBetter ? value(base) / value(p) : value(p) / value(base);
      const cannot = Number.isFinite(v) ? undefined : CANNOT;
      ratios.push({
        suite: "throughput",
        label,
        peer: p.name,
        value: v,
        ...(cannot && { cannot }),
      });
    }
  };
  ratio("pipelined q/s, 1 connection", (r) => r.pipelined?.one.qps ?? NaN, true);
  ratio("pipelined q/s, 4 connections", (r) => r.pipelined?.four.qps ?? NaN, true);
  ratio("pipelined q/s in a transaction, 1 connection", (r) => r.pipelined?.inTx.qps ?? NaN, true);
  if (limit.qps) {
    ratios.push({
      suite: "throughput",
      label: "pipelined q/s in a transaction, share of libpq's pipeline",
      peer: "pgbench",
      value: ours.inTx.qps / limit.qps,
    });
  }
  ratio("serial latency (mean)", (r) => mean(r.latency), false);
  ratio("serial latency (p99)", (r) => percentile(r.latency, 99), false);
  ratio("serial latency, one core kept busy (mean)", (r) => mean(r.latencyBusy), false);

  const rates: Table = {
    title: `Throughput: select $1::int, ${fmt(TOTAL)} queries, ${fmt(WINDOW)} in flight`,
    head: [
      "driver",
      "1 conn q/s",
      "pgpipe vs it",
      "in a transaction q/s",
      "pgpipe vs it",
      "4 conns q/s",
      "backends",
      "pgpipe vs it",
    ],
    rows: results.map(({ name, pipelined: p }) =>
      p
        ? [
          name,
          fmt(p.one.qps),
          formatRatio(ours.one.qps / p.one.qps),
          fmt(p.inTx.qps),
          formatRatio(ours.inTx.qps / p.inTx.qps),
          fmt(p.four.qps),
          String(p.fourBackends),
          formatRatio(ours.four.qps / p.four.qps),
        ]
        : [name, CANNOT, "", CANNOT, "", CANNOT, "", ""]
    ),
  };
  if (limit.qps) {
    rates.rows.push([
      `libpq pipeline (pgbench, ${limit.lines} per pipeline)`,
      fmt(limit.qps),
      `pgpipe at ${fmt((100 * ours.one.qps) / limit.qps)}%`,
      "",
      `pgpipe at ${fmt((100 * ours.inTx.qps) / limit.qps)}%`,
      "",
      "",
      "",
    ]);
  }
  if (same.qps) {
    rates.rows.push([
      "libpq pipeline (1 Sync per query, pgpipe's shape)",
      fmt(same.qps),
      `pgpipe at ${fmt((100 * ours.one.qps) / same.qps)}%`,
      "",
      "",
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
    "per pipeline; outside a transaction pgpipe sends one Sync per query (each query its own " +
    "implicit transaction, so a failure never aborts its neighbours), which costs the server a " +
    "flush per query. The second libpq row has that same shape. Inside a transaction (sql.begin) " +
    "a failure aborts the block anyway, so pgpipe's queries written together share one Sync: " +
    "the 'in a transaction' column is pgbench's shape.",
    "Serial latency is measured twice: as is, and with one core kept busy by a spinning " +
    "thread, because on an idle virtual machine each round trip also waits for cores to wake " +
    "from idle, which can dwarf the drivers' own costs.",
  ];
  for (const r of results) {
    if (
      (r.pipelined && (r.pipelined.one.queries < TOTAL || r.pipelined.four.queries < TOTAL)) ||
      Math.min(r.latency.length, r.latencyBusy.length) < SERIAL
    ) {
      notes.push(`${r.name} hit the ${DEADLINE_MS / 1000} s cap; its rates cover what it did.`);
    }
    if (!r.pipelined) {
      notes.push(
        `${r.name} ${CANNOT}: a client sends its next query only once the last is answered, ` +
          "so it has no pipelined rate; its serial latency is measured as everyone's.",
      );
    }
  }
  const report: SuiteReport = {
    suite: "throughput",
    tables: [rates, lat, ping.table],
    ratios,
    measures: ping.measures,
    notes: [...notes, ...ping.notes],
  };
  await emitReport(report);
}

await main();
