// Suite 2: queries per second for a tiny query (`select $1::int`) with a window of queries in
// flight, on one and on four connections, then strictly serial latency. With a tiny query the
// driver's per-query cost dominates, so this shows client overhead rather than server work.
// libpq's own pipeline mode runs the same query as the physical limit (bench/peers/libpq.ts).
// Serial latency is also taken with one core kept busy (spinner.ts explains why). Then serial
// `select 1` beside a raw socket ping-pong of the very bytes pgpipe sends for it (pingpong.ts):
// the difference is what the driver costs per query over the physical limit; and pgpipe against
// Bun.sql on Bun, default pools. The TLS twin adds each runtime's raw TLS floor and pipelined
// TLS as a share of plain TCP, with the CPU each side spent (bench/shared/cpu.ts).
import postgres from "../../mod.ts";
import {
  type Adapter,
  ask,
  type Driver,
  PGPIPE_NATIVE,
  settleNative,
  suiteDrivers,
} from "../peers/drivers.ts";
import { findBun } from "../peers/bun.ts";
import { libpqPipeline, pgbenchPipeline } from "../peers/libpq.ts";
import { captureSession, openRaws, type RawKind, type WireSession } from "../peers/pingpong.ts";
import { type CpuPerQuery, cpuPerQuery, localPostmaster } from "../shared/cpu.ts";
import { benchCa, benchUrl, isQuick, isTls, plainBenchUrl } from "../shared/env.ts";
import { probe } from "../shared/probe.ts";
import { fmt, formatRatio, Report } from "../shared/report.ts";
import { startSpinner } from "../shared/spinner.ts";
import { mean, median, percentile, rotated, Samples } from "../shared/stats.ts";

const quick = isQuick();
const url = benchUrl();
const tls = isTls();
/** In a TLS variant, what pgpipe over plain TCP does on the same machine, for the TLS cost. */
const PLAIN_PGPIPE = "pgpipe (plaintext)";
const ping = (kind: RawKind) => `raw ${kind} ping-pong`;
const rawPipeline = (kind: RawKind) => `raw ${kind} pipeline`;
const TOTAL = quick ? 10_000 : 100_000;
const WINDOW = 1_000;
const SERIAL = quick ? 1_000 : 10_000;
/** Wall-clock cap for one measurement: past it no new query is issued and the rate is what was done. */
const DEADLINE_MS = quick ? 15_000 : 60_000;
/** Serial `select 1` per client beside the raw ping-pong, in rounds with the order rotated. */
const PING_QUERIES = quick ? 2_000 : 20_000;
const PING_ROUNDS = 4;
const BUN_SERIAL = quick ? 2_000 : 10_000;
const BUN_TOTAL = quick ? 20_000 : 100_000;
const BUN_WINDOW = 500;
const BUN_ROUNDS = quick ? 1 : 3;
/** What a table shows for a driver that does not pipeline (Driver.pipelines). */
const CANNOT = "cannot (no pipelining)";
const log = (s: string) => console.log(`throughput: ${s}`);
const report = new Report("throughput");

/** Result of one pipelined run. */
type Rate = { queries: number; ms: number; qps: number };
/** A client some table compares: its name, one run (a round trip, a pipelined run), its end. */
type Client<T> = { name: string; run(): Promise<T>; close(): Promise<unknown> };

/**
 * Issues `total` queries keeping `window` in flight: `window` lanes each await their query
 * before taking the next number, so exactly `window` are outstanding until the tail.
 */
async function pipelined(a: Pick<Adapter, "selectInt">, total: number, window: number) {
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

/** Latencies (µs) of `count` round trips one after another, stopping early at `stop`. */
async function serial(once: () => Promise<void>, count: number, stop = Infinity) {
  const samples: number[] = [];
  for (let i = 0; i < count && performance.now() < stop; i++) {
    const t0 = performance.now();
    await once();
    samples.push((performance.now() - t0) * 1000);
  }
  return samples;
}

/** `count` serial `select $1::int` within DEADLINE_MS, each answer checked (µs each). */
function serialInts(a: Adapter, count: number): Promise<number[]> {
  let v = 0;
  return serial(
    async () => {
      const x = await a.selectInt(v);
      if (x !== v++) throw new Error(`wrong answer: select ${v - 1}::int returned ${x}`);
    },
    count,
    performance.now() + DEADLINE_MS,
  );
}

/** Runs `fn` with one core kept busy (long enough for deno-postgres's warm-up and run). */
async function busy<T>(fn: () => Promise<T>): Promise<T> {
  const spinner = await startSpinner(DEADLINE_MS * 2);
  try {
    return await fn();
  } finally {
    await spinner.stop();
  }
}

/** `select 1` on a pgpipe client, its answer checked. */
async function selectOne(sql: ReturnType<typeof postgres>): Promise<void> {
  const x = Object.values((await sql`select 1`)[0])[0];
  if (x !== 1) throw new Error(`wrong answer: select 1 returned ${x}`);
}

/** Median CPU per query on each side over rounds (NaN where a side could not be read). */
const middleCpu = (xs: CpuPerQuery[]) => ({
  client: median(xs.map((x) => x.client)),
  server: median(xs.map((x) => x.server)),
});

/** A CPU figure in µs, "-" when it could not be read. */
const fmtCpu = (us: number) => Number.isFinite(us) ? fmt(us, 2) : "-";

// ------------------------------------------------------------ rates and serial latency

interface DriverResult {
  name: string;
  /** The pipelined runs; null for a driver that sends one query at a time. */
  pipelined: { one: Rate; inTx: Rate; four: Rate; fourBackends: number } | null;
  latency: number[];
  /** The same serial run with one core kept busy. */
  latencyBusy: number[];
}

/** One pipelined run after a warm-up (statements prepared, buffers grown). */
async function warmRate(a: Pick<Adapter, "selectInt">, warmup: number): Promise<Rate> {
  await pipelined(a, warmup, WINDOW);
  return await pipelined(a, TOTAL, WINDOW);
}

/**
 * On one connection: pipelined, pipelined in a transaction (where pgpipe shares one Sync per
 * batch), serial as is and with a core kept busy; then pipelined on four connections.
 */
async function measure(driver: Driver): Promise<DriverResult> {
  const say = (s: string) => log(`${driver.name}: ${s}`);
  const one = await driver.connect(url);
  let r1: Rate | undefined;
  let inTx: Rate | undefined;
  let latency: number[];
  let latencyBusy: number[];
  try {
    if (driver.pipelines) {
      r1 = await warmRate(one, WINDOW * 2);
      say(`1 connection: ${fmt(r1.qps)} q/s`);
      await one.rolledBack(async (tx) => void (inTx = await warmRate(tx, WINDOW * 2)));
      say(`1 connection, in a transaction: ${fmt(inTx!.qps)} q/s`);
    } else say(`pipelined runs: ${CANNOT}`);
    await serialInts(one, 100);
    latency = await serialInts(one, SERIAL);
    say(`serial: mean ${fmt(mean(latency), 1)} µs`);
    latencyBusy = await busy(() => serialInts(one, 100).then(() => serialInts(one, SERIAL)));
    say(`serial, one core kept busy: mean ${fmt(mean(latencyBusy), 1)} µs`);
  } finally {
    await one.close();
  }
  if (!r1 || !inTx) return { name: driver.name, pipelined: null, latency, latencyBusy };
  const app = `pgpipe_bench_${driver.name.replace(/\W/g, "_")}_4`;
  const four = await driver.connect(url, { connections: 4, applicationName: app });
  try {
    const r4 = await warmRate(four, WINDOW * 4);
    const open = "select count(*)::int from pg_stat_activity where application_name = $1";
    const n = await ask(url, open, [app]) as number;
    say(`4 connections (${n} open): ${fmt(r4.qps)} q/s`);
    const pipelined = { one: r1, inTx, four: r4, fourBackends: n };
    return { name: driver.name, pipelined, latency, latencyBusy };
  } finally {
    await four.close();
  }
}

/** The drivers' ratios to pgpipe (the first result), with pgbench's share where it ran. */
function rateRatios(results: DriverResult[], pgbench: number | undefined): void {
  const [base, ...peers] = results;
  const ratio = (label: string, value: (r: DriverResult) => number, higherIsBetter: boolean) => {
    for (const p of peers) {
      const v = higherIsBetter ? value(base) / value(p) : value(p) / value(base);
      report.ratio(label, p.name, v, Number.isFinite(v) ? undefined : CANNOT);
    }
  };
  ratio("pipelined q/s, 1 connection", (r) => r.pipelined?.one.qps ?? NaN, true);
  ratio("pipelined q/s, 4 connections", (r) => r.pipelined?.four.qps ?? NaN, true);
  ratio("pipelined q/s in a transaction, 1 connection", (r) => r.pipelined?.inTx.qps ?? NaN, true);
  if (pgbench) {
    const label = "pipelined q/s in a transaction, share of libpq's pipeline";
    report.ratio(label, "pgbench", base.pipelined!.inTx.qps / pgbench);
  }
  ratio("serial latency (mean)", (r) => mean(r.latency), false);
  ratio("serial latency (p99)", (r) => percentile(r.latency, 99), false);
  ratio("serial latency, one core kept busy (mean)", (r) => mean(r.latencyBusy), false);
}

/** The rates table (libpq's rows last) and the serial latency table. */
function rateTables(results: DriverResult[], limit: { qps?: number }, same: { qps?: number }) {
  const ours = results[0].pipelined!;
  const at = (qps: number, libpq: number) => `pgpipe at ${fmt((100 * qps) / libpq)}%`;
  const rows = results.map(({ name, pipelined: p }) =>
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
  );
  if (limit.qps) {
    const name = `libpq pipeline (pgbench, ${WINDOW} per pipeline)`;
    const inTx = at(ours.inTx.qps, limit.qps);
    rows.push([name, fmt(limit.qps), at(ours.one.qps, limit.qps), "", inTx, "", "", ""]);
  }
  if (same.qps) {
    const name = "libpq pipeline (1 Sync per query, pgpipe's shape)";
    rows.push([name, fmt(same.qps), at(ours.one.qps, same.qps), "", "", "", "", ""]);
  }
  report.table(
    `Throughput: select $1::int, ${fmt(TOTAL)} queries, ${fmt(WINDOW)} in flight`,
    "driver | 1 conn q/s | pgpipe vs it | in a transaction q/s | pgpipe vs it | 4 conns q/s | backends | pgpipe vs it",
    rows,
  );
  const latencyRows = (kept: boolean) =>
    results.map((r) => {
      const samples = kept ? r.latencyBusy : r.latency;
      const base = kept ? results[0].latencyBusy : results[0].latency;
      const figures = [mean(samples), percentile(samples, 50), percentile(samples, 99)];
      const ratio = formatRatio(mean(samples) / mean(base));
      return [r.name, kept ? "one kept busy" : "as is", ...figures.map((x) => fmt(x, 1)), ratio];
    });
  report.table(
    `Serial latency: select $1::int, ${fmt(SERIAL)} queries one at a time (µs)`,
    "driver | cores | mean | p50 | p99 | pgpipe vs it (mean)",
    [...latencyRows(false), ...latencyRows(true)],
  );
}

/** The notes under the rates: libpq's, why two Sync shapes, and any driver capped or unable. */
function rateNotes(results: DriverResult[], limit: { note: string }, same: { note: string }) {
  report.note(
    limit.note,
    same.note,
    "pgbench sends one Sync per 1,000 queries, so the server flushes and ends a transaction once per pipeline; outside a transaction pgpipe sends one Sync per query (each query its own implicit transaction, so a failure never aborts its neighbours), which costs the server a flush per query. The second libpq row has that same shape. Inside a transaction (sql.begin) a failure aborts the block anyway, so pgpipe's queries written together share one Sync: the 'in a transaction' column is pgbench's shape.",
    "Serial latency is measured twice: as is, and with one core kept busy by a spinning thread, because on an idle virtual machine each round trip also waits for cores to wake from idle, which can dwarf the drivers' own costs.",
  );
  for (const { name, pipelined: p, latency, latencyBusy } of results) {
    const short = p && (p.one.queries < TOTAL || p.four.queries < TOTAL);
    if (short || Math.min(latency.length, latencyBusy.length) < SERIAL) {
      report.note(`${name} hit the ${DEADLINE_MS / 1000} s cap; its rates cover what it did.`);
    }
    if (!p) {
      report.note(
        `${name} ${CANNOT}: a client sends its next query only once the last is answered, ` +
          "so it has no pipelined rate; its serial latency is measured as everyone's.",
      );
    }
  }
}

// ------------------------------------------------------------ the raw ping-pong

/** The steady request of a captured session: what every later serial `select 1` sends. */
const steadyOf = (session: WireSession) => session.requests[session.requests.length - 1];

/** Captures pgpipe's session while it runs serial `select 1`s; checks its last request repeats. */
async function captureSelectOne(): Promise<WireSession> {
  // Over plain TCP (the proxy must read the bytes): TLS changes how they travel, not what they are.
  const session = await captureSession(plainBenchUrl(), async (via) => {
    const sql = postgres(via, { max: 1, ssl: false, onnotice: () => {} });
    try {
      for (let i = 0; i < 3; i++) await selectOne(sql);
    } finally {
      await sql.end();
    }
  });
  const [before, last] = session.requests.slice(-2);
  if (!before || !last || before.bytes.join() !== last.bytes.join()) {
    const shapes = session.requests.map((r) => r.types).join(" ");
    throw new Error(`pgpipe's serial select 1 did not repeat its bytes: ${shapes}`);
  }
  return session;
}

/** The raw replays (in a TLS variant both TLS paths too, and pgpipe over plain TCP), drivers. */
async function pingClients(drivers: Driver[], session: WireSession): Promise<Client<void>[]> {
  const bytes = steadyOf(session).bytes;
  const kinds: RawKind[] = tls ? ["socket", "native TLS", "node:tls"] : ["socket"];
  const clients: Client<void>[] = (await openRaws(url, session, kinds, benchCa())).map((r) => ({
    name: ping(r.kind),
    run: () => r.replay.roundTrip(bytes),
    close: () => Promise.resolve(r.replay.close()),
  }));
  try {
    if (tls) {
      const plain = postgres(plainBenchUrl(), { max: 1, ssl: false, onnotice: () => {} });
      await plain`select 1`;
      clients.push({ name: PLAIN_PGPIPE, run: () => selectOne(plain), close: () => plain.end() });
    }
    for (const d of drivers) {
      const a = await d.connect(url);
      const run = async () => {
        const x = await a.selectOne();
        if (x !== 1) throw new Error(`wrong answer: ${d.name}: select 1 returned ${x}`);
      };
      clients.push({ name: d.name, run, close: () => a.close() });
    }
  } catch (e) {
    await Promise.allSettled(clients.map((c) => c.close()));
    throw e;
  }
  return clients;
}

/** Per client, the samples of PING_QUERIES serial round trips in rounds, order rotated. */
async function pingRounds(clients: Client<void>[]): Promise<Samples> {
  const out = new Samples(clients.map((c) => [c.name, []]));
  const stop = performance.now() + DEADLINE_MS;
  for (const c of clients) await serial(c.run, 500, stop); // warm-up (JIT, buffers)
  const perRound = Math.ceil(PING_QUERIES / PING_ROUNDS);
  await rotated(PING_ROUNDS, clients, async (c) => {
    out.add(c.name, ...await serial(c.run, perRound, stop));
  });
  return out;
}

/** What a client's serial round trip is compared with: the raw replay over the same transport. */
function floorOf(name: string): string | undefined {
  if (name.startsWith("raw ")) return undefined;
  if (!tls || name === PLAIN_PGPIPE) return ping("socket");
  return ping(name === PGPIPE_NATIVE ? "native TLS" : "node:tls"); // postgres.js is on node:tls
}

/**
 * Serial `select 1` for the raw ping-pong and each driver, as is and with one core kept busy:
 * the table, and pgpipe's overheads (in a TLS variant, TLS's cost) as measures.
 */
async function pingPong(drivers: Driver[], session: WireSession): Promise<void> {
  const clients = await pingClients(drivers, session);
  let asIs: Samples;
  let kept: Samples;
  try {
    asIs = await pingRounds(clients);
    kept = await busy(() => pingRounds(clients));
  } finally {
    await Promise.allSettled(clients.map((c) => c.close()));
  }
  const rows: string[][] = [];
  for (const [cores, samples] of [["as is", asIs], ["one kept busy", kept]] as const) {
    const busyLabel = cores === "as is" ? "" : ", one core kept busy";
    for (const [name, s] of samples) {
      if (cores === "as is") {
        const busyMean = fmt(mean(kept.get(name)!), 1);
        log(
          `serial select 1, ${name}: mean ${fmt(mean(s), 1)} µs, one core kept busy ${busyMean} µs`,
        );
      }
      const floor = floorOf(name);
      const raw = floor === undefined ? undefined : samples.get(floor);
      const overMean = raw ? mean(s) - mean(raw) : NaN;
      const overP50 = raw ? percentile(s, 50) - percentile(raw, 50) : NaN;
      const figures = [mean(s), percentile(s, 50), percentile(s, 99)].map((x) => fmt(x, 1));
      const over = raw ? [`+${fmt(overMean, 1)} (${floor})`, `+${fmt(overP50, 1)}`] : ["", ""];
      rows.push([name, cores, ...figures, ...over, String(s.length)]);
      if (!raw) continue;
      if (!tls && name === "pgpipe") {
        const label = "serial select 1: pgpipe overhead over the raw ping-pong";
        report.measure(`${label}${busyLabel} (mean)`, floor!, overMean, "µs");
        report.measure(`${label}${busyLabel} (p50)`, floor!, overP50, "µs");
      }
      if (tls && (name === "pgpipe" || name === PGPIPE_NATIVE)) {
        const path = name === "pgpipe" ? "node:tls" : "native TLS";
        const over = `serial select 1: pgpipe on ${path}, overhead over the ${floor}`;
        report.measure(`${over}${busyLabel} (mean)`, floor!, overMean, "µs");
        const cost = `serial select 1: TLS cost per round trip, pgpipe on ${path} minus over ` +
          `plain TCP${busyLabel} (mean)`;
        report.measure(cost, PLAIN_PGPIPE, mean(s) - mean(samples.get(PLAIN_PGPIPE)!), "µs");
      }
    }
  }
  report.table(
    `Serial select 1 beside a raw socket ping-pong of pgpipe's bytes (µs; ${fmt(PING_QUERIES)} ` +
      `each, ${PING_ROUNDS} rounds, order rotated)`,
    "client | cores | mean | p50 | p99 | over its raw floor (mean) | over it (p50) | queries",
    rows,
  );
  const steady = steadyOf(session);
  report.note(
    `Raw socket ping-pong: a plain Deno.connect socket replays pgpipe's own session (captured ` +
      `through a recording proxy: startup and ${session.requests.length - 1} set-up ` +
      `requests once), then sends the ${steady.bytes.length} bytes pgpipe writes for each ` +
      `serial \`select 1\` (${steady.types.split("").join(" ")}: Bind Execute Sync of its ` +
      `prepared statement) and reads until ReadyForQuery, decoding nothing. Its time is the ` +
      `floor (loopback, the server, Deno's socket ops); "over raw" is what each driver adds.`,
  );
  const short = [...asIs, ...kept].filter(([, s]) => s.length < PING_QUERIES).map(([n]) => n);
  if (short.length) {
    report.note(`${short.join(", ")} hit the ${DEADLINE_MS / 1000} s cap in the ping-pong.`);
  }
}

// ------------------------------------------------------------ Bun.sql and the runtimes

/** What one default-pool round measured: serial µs, q/s in flight, and that run's CPU per query. */
interface PoolRound {
  serialUs: number;
  qps: number;
  cpu?: CpuPerQuery;
}

/** pgpipe with its default pool: serial `select 1` (µs each) and BUN_WINDOW in flight (q/s). */
async function pgpipeDefaultPool(ssl: unknown, postmaster: number | undefined): Promise<PoolRound> {
  const sql = postgres(url, { ssl: ssl as "require", onnotice: () => {} });
  try {
    await Promise.all(Array.from({ length: 100 }, (_, i) => sql`select ${i}::int as x`));
    for (let i = 0; i < 200; i++) await sql`select 1`;
    const path = (await sql`select 1`).state?.tls;
    if (typeof ssl === "object" && path !== "native") {
      throw new Error(`pgpipe given the CA ran on ${path}, not native TLS`);
    }
    // Timed as bench/probes/bun_sql.ts times Bun.sql: the whole loop, divided.
    const t0 = performance.now();
    for (let i = 0; i < BUN_SERIAL; i++) await selectOne(sql);
    const serialUs = (performance.now() - t0) * 1000 / BUN_SERIAL;
    const selectInt = async (v: number) => (await sql`select ${v}::int as x`)[0].x as number;
    const { result, cpu } = await cpuPerQuery(
      postmaster,
      () => pipelined({ selectInt }, BUN_TOTAL, BUN_WINDOW),
      (done) => done.queries,
    );
    return { serialUs, qps: result.qps, cpu };
  } finally {
    await sql.end();
  }
}

/** A client's default-pool rounds. */
class PoolRounds {
  serial: number[] = [];
  qps: number[] = [];
  cpu: CpuPerQuery[] = [];
  add(round: PoolRound): void {
    this.serial.push(round.serialUs);
    this.qps.push(round.qps);
    if (round.cpu) this.cpu.push(round.cpu);
  }
  /** Its table row: median serial µs, q/s, and where any side measured CPU, its CPU cells. */
  row(name: string, withCpu: boolean): string[] {
    const c = this.cpu.length ? middleCpu(this.cpu) : { client: NaN, server: NaN };
    const cpu = withCpu ? [fmtCpu(c.client), fmtCpu(c.server)] : [];
    return [name, fmt(median(this.serial), 1), fmt(median(this.qps)), ...cpu];
  }
}

/**
 * pgpipe against Bun.sql on Bun, each with its default pool (10 connections), in alternating
 * rounds: strictly serial `select 1`, and `select $1::int` with 500 in flight. In a TLS variant,
 * also pgpipe given the server's CA: what native TLS does beside Bun.
 */
async function versusBun(postmaster: number | undefined): Promise<void> {
  const bun = await findBun(log);
  if ("skip" in bun) return report.note(bun.skip);
  const [ours, theirs, native] = [new PoolRounds(), new PoolRounds(), new PoolRounds()];
  const ca = tls ? benchCa() : undefined;
  // The native row's pools must open on native TLS, not take the process's first turn.
  if (ca !== undefined) await settleNative(url, { mode: "require", ca });
  for (let r = 0; r < BUN_ROUNDS; r++) {
    const a = await pgpipeDefaultPool(tls ? "require" : false, postmaster);
    const args = [url, BUN_SERIAL, BUN_TOTAL, BUN_WINDOW, ...(postmaster ? [postmaster] : [])];
    const b = await probe<PoolRound>("bun_sql.ts", args, { runtime: bun.path });
    ours.add(a);
    theirs.add(b);
    if (ca !== undefined) native.add(await pgpipeDefaultPool({ mode: "require", ca }, postmaster));
    log(
      `vs Bun.sql round ${r + 1}: serial ${fmt(a.serialUs, 1)} / ${fmt(b.serialUs, 1)} µs, ` +
        `${BUN_WINDOW} in flight ${fmt(a.qps)} / ${fmt(b.qps)} q/s`,
    );
  }
  const withCpu = ours.cpu.length > 0;
  const hasNative = native.serial.length > 0;
  report.table(
    `pgpipe and Bun.sql (Bun ${bun.version}), default pools (median of ${BUN_ROUNDS} ` +
      "alternating rounds)",
    `driver | serial select 1 (µs) | select $1::int, ${BUN_WINDOW} in flight (q/s)` +
      (withCpu ? " | its client CPU (µs/query) | its server CPU (µs/query)" : ""),
    [
      ours.row("pgpipe", withCpu),
      ...(hasNative ? [native.row(PGPIPE_NATIVE, withCpu)] : []),
      theirs.row("Bun.sql", withCpu),
    ],
  );
  for (const [suffix, pgpipe] of [[`, ${PGPIPE_NATIVE}`, native], ["", ours]] as const) {
    if (pgpipe.serial.length === 0) continue;
    const serialRatio = median(theirs.serial) / median(pgpipe.serial);
    report.ratio(`serial select 1, default pool${suffix}`, "Bun.sql", serialRatio);
    const qpsRatio = median(pgpipe.qps) / median(theirs.qps);
    report.ratio(`${BUN_WINDOW} in flight, default pool${suffix}`, "Bun.sql", qpsRatio);
  }
  report.note(
    `Bun.sql runs in a bun process (bench/probes/bun_sql.ts) with the same URL${
      tls
        ? " (sslmode=require: Bun encrypts without verifying, as pgpipe's node:tls path does)"
        : ""
    }; each side warms its pool first.`,
  );
  if (withCpu) {
    report.note(
      `CPU per query of the ${BUN_WINDOW}-in-flight run: the run time Linux counts ` +
        "(/proc/<pid>/task/*/schedstat) for the client's process (this one for pgpipe, bun's for Bun.sql) and for every process the postmaster started, read around that run only.",
    );
  }
}

/**
 * In a TLS variant: the floor of a serial TLS round trip on each runtime, in alternating rounds:
 * pgpipe's `select 1` replayed on raw sockets over node:tls and native TLS in this process, and
 * over node:tls in a bun process (bench/probes/bun_pingpong.ts). Beside the drivers' serial
 * figures it says how much of a gap between Bun.sql and pgpipe is the runtimes' own.
 */
async function runtimeFloors(session: WireSession): Promise<void> {
  const bun = await findBun(log);
  if ("skip" in bun) return;
  const { hostname, port } = new URL(url);
  const steady = steadyOf(session).bytes;
  const dir = await Deno.makeTempDir({ prefix: "pgpipe-floors-" });
  const file = `${dir}/session.json`;
  const requests = session.requests.map((r) => ({ bytes: [...r.bytes], types: r.types }));
  await Deno.writeTextFile(file, JSON.stringify({ startup: [...session.startup], requests }));
  const raws = await openRaws(url, session, ["node:tls", "native TLS"], benchCa());
  const runs: [string, () => Promise<number[]>][] = raws.map((r) => [
    `${ping(r.kind)}, Deno ${Deno.version.deno}`,
    async () => {
      const once = () => r.replay.roundTrip(steady);
      for (let i = 0; i < 500; i++) await once(); // warm-up, as the Bun probe does
      const samples = await serial(once, BUN_SERIAL);
      return [mean(samples), percentile(samples, 50)];
    },
  ]);
  runs.push([`${ping("node:tls")}, Bun ${bun.version}`, async () => {
    const args = [file, hostname, port || 5432, BUN_SERIAL];
    type Floor = { meanUs: number; p50Us: number };
    const r = await probe<Floor>("bun_pingpong.ts", args, { runtime: bun.path });
    return [r.meanUs, r.p50Us];
  }]);
  const got = new Map(runs.map(([name]) => [name, [] as number[][]]));
  try {
    await rotated(BUN_ROUNDS, runs, async ([name, run]) => void got.get(name)!.push(await run()));
  } finally {
    for (const r of raws) r.replay.close();
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
  const middle = (xs: number[][], i: number) => fmt(median(xs.map((x) => x[i])), 1);
  report.table(
    `Serial TLS round trip on raw sockets, by runtime: pgpipe's select 1 replayed ` +
      `(µs; ${fmt(BUN_SERIAL)} each, median of ${BUN_ROUNDS} alternating rounds)`,
    "raw replay | mean | p50",
    [...got].map(([name, xs]) => [name, middle(xs, 0), middle(xs, 1)]),
  );
  report.note(
    "Raw TLS round trips by runtime: the same replay as the ping-pong table's, over node:tls in this Deno process and in a bun process (bench/probes/bun_pingpong.ts), and over Deno's native TLS. A driver's serial time minus its runtime's floor is the driver's own cost; the floors' difference is the runtimes'.",
  );
}

// ------------------------------------------------------------ TLS as a share of plain TCP

/** The share's clients: pgpipe over plain TCP and both TLS paths, and the raw pipelines. */
async function shareClients(drivers: Driver[], session: WireSession): Promise<Client<Rate>[]> {
  const half = TOTAL / 2;
  const plain = postgres(plainBenchUrl(), { max: 1, ssl: false, onnotice: () => {} });
  const selectInt = async (v: number) => (await plain`select ${v}::int as x`)[0].x as number;
  const run = () => pipelined({ selectInt }, half, WINDOW);
  const clients: Client<Rate>[] = [{ name: PLAIN_PGPIPE, run, close: () => plain.end() }];
  try {
    for (const d of drivers.filter((d) => d.name === "pgpipe" || d.name === PGPIPE_NATIVE)) {
      const a = await d.connect(url);
      clients.push({ name: d.name, run: () => pipelined(a, half, WINDOW), close: () => a.close() });
    }
    // pgpipe's steady serial request pipelined on raw sockets, each run timed like a driver's.
    const bytes = steadyOf(session).bytes;
    const kinds: RawKind[] = ["socket", "native TLS", "node:tls"];
    for (const r of await openRaws(url, session, kinds, benchCa())) {
      const run = async () => {
        const t0 = performance.now();
        await r.replay.pipeline(bytes, half, WINDOW);
        const ms = performance.now() - t0;
        return { queries: half, ms, qps: half / (ms / 1000) };
      };
      clients.push({
        name: rawPipeline(r.kind),
        run,
        close: () => Promise.resolve(r.replay.close()),
      });
    }
  } catch (e) {
    await Promise.allSettled(clients.map((c) => c.close()));
    throw e;
  }
  return clients;
}

/**
 * In a TLS variant: pipelined q/s on one connection over TLS as a share of the same over plain
 * TCP, both paths, in alternating rounds in this one process; and, where the server runs on this
 * machine, the CPU each query cost this process and the server's backends, which says which side
 * the encryption weighs on.
 */
async function tlsShare(
  drivers: Driver[],
  postmaster: number | undefined,
  session: WireSession,
): Promise<void> {
  const clients = await shareClients(drivers, session);
  const rates = new Samples(clients.map((c) => [c.name, []]));
  const cpus = new Map(clients.map((c) => [c.name, [] as CpuPerQuery[]]));
  try {
    await rotated(3, clients, async (c) => {
      const { result, cpu } = await cpuPerQuery(postmaster, c.run, (done) => done.queries);
      rates.add(c.name, result.qps);
      if (cpu) cpus.get(c.name)!.push(cpu);
    });
  } finally {
    await Promise.allSettled(clients.map((c) => c.close()));
  }
  const isRaw = (name: string) => name.startsWith("raw ");
  const plainOf = (name: string) => isRaw(name) ? rawPipeline("socket") : PLAIN_PGPIPE;
  const rows: string[][] = [];
  for (const name of rates.keys()) {
    const share = rates.median(name) / rates.median(plainOf(name));
    rows.push([name, fmt(rates.median(name)), formatRatio(share)]);
    if (name === PLAIN_PGPIPE || isRaw(name)) continue;
    const path = name === "pgpipe" ? "node:tls" : "native TLS";
    report.ratio(
      `pipelined q/s, 1 connection, share of plain TCP: pgpipe on ${path}`,
      PLAIN_PGPIPE,
      share,
    );
  }
  report.table(
    `Pipelined over TLS and over plain TCP: ${fmt(TOTAL / 2)} queries, ${fmt(WINDOW)} in ` +
      "flight, 1 connection (median of 3 alternating rounds)",
    "client | q/s | share of plain TCP",
    rows,
  );
  report.note(
    "Raw pipelines: the bytes pgpipe sends for a serial `select 1` (Bind Execute Sync of its " +
      "prepared statement, one Sync each, as pgpipe's select $1::int) replayed on a raw socket " +
      `with ${fmt(WINDOW)} in flight, each read answered by as many new copies in one write, ` +
      "decoding nothing: the rate and the TLS share the runtime and the server allow without a driver. Their share is of the raw plain-TCP pipeline.",
  );
  if (postmaster !== undefined) cpuTable(cpus, plainOf);
}

/** The CPU per query of the TLS share's runs, each TLS run against its plain twin. */
function cpuTable(cpus: Map<string, CpuPerQuery[]>, plainOf: (name: string) => string): void {
  const rows = [...cpus.keys()].map((name) => {
    const c = middleCpu(cpus.get(name)!);
    const total = c.client + c.server;
    if (name === plainOf(name)) {
      return [name, fmtCpu(c.client), fmtCpu(c.server), "", fmtCpu(total), "", ""];
    }
    const p = middleCpu(cpus.get(plainOf(name))!);
    const plainTotal = p.client + p.server;
    const extra = c.server - p.server;
    const shares = [plainTotal / total, plainTotal / (plainTotal + extra)].map(formatRatio);
    return [name, ...[c.client, c.server, extra, total].map(fmtCpu), ...shares];
  });
  report.table(
    "CPU per query of the same runs (µs, median of 3; this process, and the server's processes)",
    "client | client CPU | server CPU | server: TLS's extra | both | plaintext's total / this total | ceiling were the client's TLS free",
    rows,
  );
  report.note(
    "CPU per query: the run time Linux counts (/proc/<pid>/task/*/schedstat) for this process and for every process the postmaster started, read around each run, divided by its queries. With one Sync per query the server encrypts every answer and sends it as its own TLS record: its extra CPU per query is the part of TLS no client can remove (in a transaction, one Sync per batch, it shrinks). Where the client and the server share the machine's cores and use them all, the rate follows their total CPU per query; the last column is then the most TLS could reach of plain TCP's rate with a client whose own TLS cost nothing (against the plain run of the same kind: pgpipe's, or the raw pipeline's).",
  );
}

// ------------------------------------------------------------ the suite

const drivers = await suiteDrivers();
const results: DriverResult[] = [];
for (const d of drivers) results.push(await measure(d));
if (!results[0].pipelined) throw new Error("pgpipe must pipeline: it is the baseline");
const limit = await pgbenchPipeline(url, quick ? 2 : 5, WINDOW);
if (limit.qps) log(`libpq pipeline (pgbench): ${fmt(limit.qps)} q/s`);
const same = await libpqPipeline(url, TOTAL, WINDOW);
rateTables(results, limit, same);
rateRatios(results, limit.qps);
rateNotes(results, limit, same);
const session = await captureSelectOne();
await pingPong(drivers, session);
// The server's postmaster, found from a backend while that backend lives (undefined if remote).
const postmaster = await ask(plainBenchUrl(), "select pg_backend_pid()", [], localPostmaster);
await versusBun(postmaster);
if (tls) {
  await runtimeFloors(session);
  await tlsShare(drivers, postmaster, session);
}
await report.emit();
