// Queries per second for a tiny query (`select $1::int`) with a window in flight, on one
// and four connections, then strictly serial latency: the driver's per-query cost dominates, so
// this shows client overhead rather than server work. libpq's pipeline mode runs the same query
// as the physical limit (bench/peers/libpq.ts). Serial latency is also taken with one core kept
// busy (spinner.ts says why). Then serial `select 1` beside a raw socket ping-pong of the very
// bytes pgpipe sends for it (pingpong.ts): the difference is what the driver costs per query over
// the physical limit; and pgpipe against Bun.sql on Bun, default pools. The TLS twin adds each
// runtime's raw TLS floor and pipelined TLS as a share of plain TCP, with the CPU each side spent.
import postgres from "../../mod.ts";
import { type Adapter, type Driver, suiteDrivers } from "../peers/drivers.ts";
import { PGPIPE_NATIVE, settleNative } from "../peers/drivers.ts";
import { findBun } from "../peers/bun.ts";
import { libpqPipeline, type LibpqRate, pgbenchPipeline } from "../peers/libpq.ts";
import { captureSession, openRaws, type RawKind, type Replay } from "../peers/pingpong.ts";
import { serialFloor, type WireSession } from "../peers/pingpong.ts";
import { ask } from "../shared/ask.ts";
import { type CpuPerQuery, cpuPerQuery, localPostmaster } from "../shared/cpu.ts";
import { benchCa, benchUrl, isQuick, isTls, plainBenchUrl } from "../shared/env.ts";
import { probe, tempDir } from "../shared/probe.ts";
import { fmt, formatRatio, Report } from "../shared/report.ts";
import { startSpinner } from "../shared/spinner.ts";
import { mean, median, percentile, rotated, Samples, serial } from "../shared/stats.ts";

const quick = isQuick();
const url = benchUrl();
const tls = isTls();
/** In a TLS variant, what pgpipe over plain TCP does on the same machine, for the TLS cost. */
const PLAIN_PGPIPE = "pgpipe (plaintext)";
const ping = (kind: RawKind) => `raw ${kind} ping-pong`;
const rawPipeline = (kind: RawKind) => `raw ${kind} pipeline`;
/** The TLS path of a pgpipe row (postgres.js is on node:tls too). */
const tlsPath = (name: string): RawKind => name === PGPIPE_NATIVE ? "native TLS" : "node:tls";
// DEADLINE_MS caps one measurement: past it no new query is issued and the rate is what was done.
// PING_QUERIES: serial `select 1` per client beside the raw ping-pong, in rotated rounds.
const [TOTAL, SERIAL, DEADLINE_MS] = quick ? [10_000, 1_000, 15_000] : [100_000, 10_000, 60_000];
const [WINDOW, PING_ROUNDS, BUN_WINDOW] = [1_000, 4, 500];
const [PING_QUERIES, BUN_SERIAL] = quick ? [2_000, 2_000] : [20_000, 10_000];
const [BUN_TOTAL, BUN_ROUNDS] = quick ? [20_000, 1] : [100_000, 3];
/** What a table shows for a driver that does not pipeline (Driver.pipelines). */
const CANNOT = "cannot (no pipelining)";
const log = (s: string) => console.log(`throughput: ${s}`);
const report = new Report("throughput");

/** A serial round trip's floor on a raw replay (bench/peers/pingpong.ts): mean and median µs. */
type Floor = Awaited<ReturnType<typeof serialFloor>>;
/** Result of one pipelined run. */
type Rate = { queries: number; ms: number; qps: number };
const rate = (queries: number, ms: number): Rate => ({ queries, ms, qps: queries / (ms / 1000) });
/** A client some table compares: its name, one run (a round trip, a pipelined run), its end. */
type Client<T> = { name: string; run(): Promise<T>; close(): unknown };
type Queries = Pick<Adapter, "selectInt" | "selectOne">;

const checked = (what: string, got: unknown, want: unknown) => {
  if (got !== want) throw new Error(`wrong answer: ${what} gave ${got}, not ${want}`);
};
const closeAll = (clients: Client<unknown>[]) =>
  Promise.allSettled(clients.map(async (c) => await c.close()));

/**
 * Issues `total` queries keeping `window` in flight: `window` lanes each await their query
 * before taking the next number, so exactly `window` are outstanding until the tail.
 */
async function pipelined(a: Pick<Adapter, "selectInt">, total: number, window: number) {
  let [next, done] = [0, 0];
  const stop = performance.now() + DEADLINE_MS;
  const lane = async () => {
    while (next < total && performance.now() < stop) {
      const v = next++;
      checked("select $1::int", await a.selectInt(v), v);
      done++;
    }
  };
  const t0 = performance.now();
  await Promise.all(Array.from({ length: Math.min(window, total) }, lane));
  return rate(done, performance.now() - t0);
}

/** `count` serial `select $1::int` (µs each, answers checked) within DEADLINE_MS, after 100. */
async function serialInts(a: Adapter, count: number): Promise<number[]> {
  let v = 0;
  const once = async () => checked("select $1::int", await a.selectInt(v), v++);
  await serial(once, 100, performance.now() + DEADLINE_MS);
  return serial(once, count, performance.now() + DEADLINE_MS);
}

/** Runs `fn` with one core kept busy (long enough for deno-postgres's warm-up and run). */
async function busy<T>(fn: () => Promise<T>): Promise<T> {
  await using _spinner = await startSpinner(DEADLINE_MS * 2);
  return await fn();
}

/** A pgpipe client of the suite's own (not a driver's adapter), by default 1 plaintext link. */
function pgpipe(target: string, options: Record<string, unknown> = { max: 1, ssl: false }) {
  const sql = postgres(target, { onnotice: () => {}, ...options });
  const first = async (q: PromiseLike<Record<string, unknown>[]>) => Object.values((await q)[0])[0];
  return {
    sql,
    selectOne: () => first(sql`select 1`) as Promise<number>,
    selectInt: (v: number) => first(sql`select ${v}::int as x`) as Promise<number>,
    [Symbol.asyncDispose]: () => sql.end(),
  };
}

/** Median CPU per query on each side over rounds (NaN where a side could not be read). */
const middleCpu = (xs: CpuPerQuery[]) => {
  const [client, server] = [median(xs.map((x) => x.client)), median(xs.map((x) => x.server))];
  return { client, server };
};

// ------------------------------------------------------------ clients and rounds

/** Opens each group of clients in turn (`await using` closes them all; a failure, those open). */
async function openClients<T>(...groups: (() => Promise<Client<T>[]>)[]) {
  const clients: Client<T>[] & AsyncDisposable = Object.assign([], {
    [Symbol.asyncDispose]: async () => void await closeAll(clients),
  });
  try {
    for (const group of groups) clients.push(...await group());
    return clients;
  } catch (e) {
    await closeAll(clients);
    throw e;
  }
}

/** A driver's client on one connection to the bench's server; a run is one `use` of it. */
const ofDriver = <T>(d: Driver, use: (a: Adapter) => Promise<T>) => async () => {
  const a = await d.connect(url);
  return [{ name: d.name, run: () => use(a), close: () => a.close() }];
};

/** pgpipe over plain TCP, the TLS cost's baseline. */
const ofPlain = <T>(use: (a: Queries) => Promise<T>) => async () => {
  const p = pgpipe(plainBenchUrl());
  await p.selectOne();
  return [{ name: PLAIN_PGPIPE, run: () => use(p), close: () => p.sql.end() }];
};

/** Raw replays of pgpipe's session, one per kind, named by `name`; a run is one `use` of it. */
function ofRaws<T>(kinds: RawKind[], name: typeof ping, use: (r: Replay) => Promise<T>) {
  return async () =>
    (await openRaws(url, session, kinds, benchCa())).map(({ kind, replay }) => ({
      name: name(kind),
      run: () => use(replay),
      close: () => replay.close(),
    }));
}

/** Each client's results of `rounds` rounds with the order rotated, by name. */
async function roundsOf<T, R>(n: number, clients: Client<T>[], each: (c: Client<T>) => Promise<R>) {
  const got = new Map(clients.map((c) => [c.name, [] as R[]]));
  await rotated(n, clients, async (c) => void got.get(c.name)!.push(await each(c)));
  return got;
}

// ------------------------------------------------------------ rates and serial latency

/** A driver's pipelined runs (null: one query at a time), serial µs as is and one core busy. */
type DriverResult = {
  name: string;
  pipelined: { one: Rate; inTx: Rate; four: Rate; fourBackends: number } | null;
  latency: number[];
  latencyBusy: number[];
};

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
  const result: DriverResult = { name: driver.name, pipelined: null, latency: [], latencyBusy: [] };
  let r1: Rate | undefined;
  let inTx: Rate | undefined;
  {
    await using one = await driver.connect(url);
    if (driver.pipelines) {
      r1 = await warmRate(one, WINDOW * 2);
      say(`1 connection: ${fmt(r1.qps)} q/s`);
      await one.rolledBack(async (tx) => void (inTx = await warmRate(tx, WINDOW * 2)));
      say(`1 connection, in a transaction: ${fmt(inTx!.qps)} q/s`);
    } else say(`pipelined runs: ${CANNOT}`);
    result.latency = await serialInts(one, SERIAL);
    say(`serial: mean ${fmt(mean(result.latency), 1)} µs`);
    result.latencyBusy = await busy(() => serialInts(one, SERIAL));
    say(`serial, one core kept busy: mean ${fmt(mean(result.latencyBusy), 1)} µs`);
  }
  if (!r1 || !inTx) return result;
  const app = `pgpipe_bench_${driver.name.replace(/\W/g, "_")}_4`;
  await using four = await driver.connect(url, { connections: 4, applicationName: app });
  const r4 = await warmRate(four, WINDOW * 4);
  const open = `select count(*)::int from pg_stat_activity where application_name = '${app}'`;
  const n = await ask(url, open) as number;
  say(`4 connections (${n} open): ${fmt(r4.qps)} q/s`);
  return { ...result, pipelined: { one: r1, inTx, four: r4, fourBackends: n } };
}

/**
 * The rates table (libpq's rows last), the serial latency table, the drivers' ratios to pgpipe
 * (the first result) with pgbench's share, and the notes: libpq's, why two Sync shapes, and any
 * driver capped or unable.
 */
function rates(results: DriverResult[], limit: LibpqRate, same: LibpqRate) {
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
  if (limit.qps) {
    const label = "pipelined q/s in a transaction, share of libpq's pipeline";
    report.ratio(label, "pgbench", base.pipelined!.inTx.qps / limit.qps);
  }
  ratio("serial latency (mean)", (r) => mean(r.latency), false);
  ratio("serial latency (p99)", (r) => percentile(r.latency, 99), false);
  ratio("serial latency, one core kept busy (mean)", (r) => mean(r.latencyBusy), false);
  const ours = base.pipelined!;
  const rows = results.map(({ name, pipelined: p }) => {
    if (!p) return [name, CANNOT, "", CANNOT, "", CANNOT, "", ""];
    const vs = (k: "one" | "inTx" | "four") => formatRatio(ours[k].qps / p[k].qps);
    const four = [fmt(p.four.qps), String(p.fourBackends), vs("four")];
    return [name, fmt(p.one.qps), vs("one"), fmt(p.inTx.qps), vs("inTx"), ...four];
  });
  const at = (qps: number, libpq: number) => `pgpipe at ${fmt((100 * qps) / libpq)}%`;
  const libpq = (name: string, qps: number, inTx = "") => {
    return [name, fmt(qps), at(ours.one.qps, qps), "", inTx];
  };
  if (limit.qps) {
    const name = `libpq pipeline (pgbench, ${WINDOW} per pipeline)`;
    rows.push(libpq(name, limit.qps, at(ours.inTx.qps, limit.qps)));
  }
  if (same.qps) rows.push(libpq("libpq pipeline (1 Sync per query, pgpipe's shape)", same.qps));
  report.table(
    `Throughput: select $1::int, ${fmt(TOTAL)} queries, ${fmt(WINDOW)} in flight`,
    "driver | 1 conn q/s | pgpipe vs it | in a transaction q/s | pgpipe vs it | 4 conns q/s | backends | pgpipe vs it",
    rows.map((r) => [...r, ...Array(8 - r.length).fill("")]),
  );
  const latencyRows = (kept: boolean) =>
    results.map((r) => {
      const of = (x: DriverResult) => kept ? x.latencyBusy : x.latency;
      const figures = [mean(of(r)), percentile(of(r), 50), percentile(of(r), 99)];
      const ratio = formatRatio(mean(of(r)) / mean(of(base)));
      return [r.name, kept ? "one kept busy" : "as is", ...figures.map((x) => fmt(x, 1)), ratio];
    });
  report.table(
    `Serial latency: select $1::int, ${fmt(SERIAL)} queries one at a time (µs)`,
    "driver | cores | mean | p50 | p99 | pgpipe vs it (mean)",
    [...latencyRows(false), ...latencyRows(true)],
  );
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
        `${name} ${CANNOT}: a client sends its next query only once the last is answered, so it has no pipelined rate; its serial latency is measured as everyone's.`,
      );
    }
  }
}

// ------------------------------------------------------------ the raw ping-pong

/** Captures pgpipe's session while it runs serial `select 1`s; checks its last request repeats. */
async function captureSelectOne(): Promise<WireSession> {
  // Over plain TCP (the proxy must read the bytes): TLS changes how they travel, not what they are.
  const session = await captureSession(plainBenchUrl(), async (via) => {
    await using p = pgpipe(via);
    // Four: the second may still bind text results while fetch_types' catalog query, sent
    // behind the first, is pending; from the third on each request is the same.
    for (let i = 0; i < 4; i++) checked("select 1", await p.selectOne(), 1);
  });
  const [before, last] = session.requests.slice(-2);
  if (!before || !last || before.bytes.join() !== last.bytes.join()) {
    const shapes = session.requests.map((r) => r.types).join(" ");
    throw new Error(`pgpipe's serial select 1 did not repeat its bytes: ${shapes}`);
  }
  return session;
}

/** Per client, the samples of PING_QUERIES serial round trips in rounds, order rotated. */
async function pingRounds(clients: Client<unknown>[]): Promise<Samples> {
  const stop = performance.now() + DEADLINE_MS;
  for (const c of clients) await serial(c.run, 500, stop); // warm-up (JIT, buffers)
  const perRound = Math.ceil(PING_QUERIES / PING_ROUNDS);
  const got = await roundsOf(PING_ROUNDS, clients, (c) => serial(c.run, perRound, stop));
  return new Samples([...got].map(([name, rounds]) => [name, rounds.flat()]));
}

/** What a client's serial round trip is compared with: the raw replay over the same transport. */
function floorOf(name: string): string | undefined {
  if (name.startsWith("raw ")) return undefined;
  return ping(!tls || name === PLAIN_PGPIPE ? "socket" : tlsPath(name));
}

/**
 * Serial `select 1` for the raw ping-pong (TLS: both paths, and pgpipe over plain TCP) and each
 * driver, as is and one core busy: the table, pgpipe's overheads (TLS: its cost) as measures.
 */
async function pingPong(): Promise<void> {
  const selectOne = async (a: Queries) => checked("select 1", await a.selectOne(), 1);
  const kinds: RawKind[] = tls ? ["socket", "native TLS", "node:tls"] : ["socket"];
  await using clients = await openClients<unknown>(
    ofRaws(kinds, ping, (r) => r.roundTrip(steady)),
    ...(tls ? [ofPlain(selectOne)] : []),
    ...drivers.map((d) => ofDriver(d, selectOne)),
  );
  const runs = new Map<string, Samples>();
  runs.set("as is", await pingRounds(clients));
  runs.set("one kept busy", await busy(() => pingRounds(clients)));
  const rows: string[][] = [];
  for (const [cores, samples] of runs) {
    const busyLabel = cores === "as is" ? "" : ", one core kept busy";
    for (const [name, s] of samples) {
      if (!busyLabel) {
        const kept = fmt(mean(runs.get("one kept busy")!.get(name)!), 1);
        log(`serial select 1, ${name}: mean ${fmt(mean(s), 1)} µs, one core kept busy ${kept} µs`);
      }
      const figures = [mean(s), percentile(s, 50), percentile(s, 99)].map((x) => fmt(x, 1));
      const floor = floorOf(name);
      const raw = floor === undefined ? undefined : samples.get(floor);
      const overMean = raw ? mean(s) - mean(raw) : NaN;
      const overP50 = raw ? percentile(s, 50) - percentile(raw, 50) : NaN;
      const over = raw ? [`+${fmt(overMean, 1)} (${floor})`, `+${fmt(overP50, 1)}`] : ["", ""];
      rows.push([name, cores, ...figures, ...over, String(s.length)]);
      if (!raw) continue;
      if (!tls && name === "pgpipe") {
        const label = `serial select 1: pgpipe overhead over the raw ping-pong${busyLabel}`;
        report.measure(`${label} (mean)`, floor!, overMean, "µs");
        report.measure(`${label} (p50)`, floor!, overP50, "µs");
      } else if (tls && (name === "pgpipe" || name === PGPIPE_NATIVE)) {
        const path = tlsPath(name);
        const over = `serial select 1: pgpipe on ${path}, overhead over the ${floor}`;
        report.measure(`${over}${busyLabel} (mean)`, floor!, overMean, "µs");
        const cost =
          `serial select 1: TLS cost per round trip, pgpipe on ${path} minus over plain TCP${busyLabel} (mean)`;
        report.measure(cost, PLAIN_PGPIPE, mean(s) - mean(samples.get(PLAIN_PGPIPE)!), "µs");
      }
    }
  }
  const each = fmt(PING_QUERIES);
  report.table(
    `Serial select 1 beside a raw socket ping-pong of pgpipe's bytes (µs; ${each} each, ${PING_ROUNDS} rounds, order rotated)`,
    "client | cores | mean | p50 | p99 | over its raw floor (mean) | over it (p50) | queries",
    rows,
  );
  const setUp = session.requests.length - 1;
  const types = session.requests[setUp].types.split("").join(" ");
  report.note(
    `Raw socket ping-pong: a plain Deno.connect socket replays pgpipe's own session (captured through a recording proxy: startup and ${setUp} set-up requests once), then sends the ${steady.length} bytes pgpipe writes for each serial \`select 1\` (${types}: Bind Execute Sync of its prepared statement) and reads until ReadyForQuery, decoding nothing. Its time is the floor (loopback, the server, Deno's socket ops); "over raw" is what each driver adds.`,
  );
  const short = [...runs.values()].flatMap((samples) =>
    [...samples].filter(([, s]) => s.length < PING_QUERIES).map(([n]) => n)
  );
  if (short.length) {
    report.note(`${short.join(", ")} hit the ${DEADLINE_MS / 1000} s cap in the ping-pong.`);
  }
}

// ------------------------------------------------------------ Bun.sql and the runtimes

/** What a default-pool round measured: serial µs, q/s in flight, and that run's CPU per query. */
type PoolRound = { serialUs: number; qps: number; cpu?: CpuPerQuery };

/** pgpipe with its default pool: serial `select 1` (µs each) and BUN_WINDOW in flight (q/s). */
async function pgpipeDefaultPool(ssl: unknown): Promise<PoolRound> {
  await using p = pgpipe(url, { ssl });
  await Promise.all(Array.from({ length: 100 }, (_, i) => p.selectInt(i)));
  for (let i = 0; i < 200; i++) await p.selectOne();
  const path = (await p.sql`select 1`).state?.tls;
  if (typeof ssl === "object" && path !== "native") {
    throw new Error(`pgpipe given the CA ran on ${path}, not native TLS`);
  }
  // Timed as bench/probes/bun_sql.ts times Bun.sql: the whole loop, divided.
  const t0 = performance.now();
  for (let i = 0; i < BUN_SERIAL; i++) checked("select 1", await p.selectOne(), 1);
  const serialUs = (performance.now() - t0) * 1000 / BUN_SERIAL;
  const run = () => pipelined(p, BUN_TOTAL, BUN_WINDOW);
  const { result, cpu } = await cpuPerQuery(postmaster, run, (done) => done.queries);
  return { serialUs, qps: result.qps, cpu };
}

const medianOf = (rs: PoolRound[], k: "serialUs" | "qps") => median(rs.map((r) => r[k]));

/** A row of rounds: median serial µs and q/s, and where any side measured CPU, its CPU cells. */
function poolRow(name: string, rounds: PoolRound[], withCpu: boolean): string[] {
  const c = middleCpu(rounds.flatMap((r) => r.cpu ? [r.cpu] : []));
  const cpu = withCpu ? [fmt(c.client, 2), fmt(c.server, 2)] : [];
  return [name, fmt(medianOf(rounds, "serialUs"), 1), fmt(medianOf(rounds, "qps")), ...cpu];
}

/**
 * pgpipe against Bun.sql on Bun, each with its default pool (10 connections), in alternating
 * rounds: strictly serial `select 1`, and `select $1::int` with 500 in flight. In a TLS variant,
 * also pgpipe given the server's CA: what native TLS does beside Bun.
 */
async function versusBun(): Promise<void> {
  if ("skip" in bun) return report.note(bun.skip);
  const rounds: Record<string, PoolRound[]> = { pgpipe: [], [PGPIPE_NATIVE]: [], "Bun.sql": [] };
  const ca = tls ? benchCa() : undefined;
  // The native row's pools must open on native TLS, not take the process's first turn.
  if (ca !== undefined) await settleNative(url, { mode: "require", ca });
  for (let r = 0; r < BUN_ROUNDS; r++) {
    const a = await pgpipeDefaultPool(tls ? "require" : false);
    const args = [url, BUN_SERIAL, BUN_TOTAL, BUN_WINDOW, ...(postmaster ? [postmaster] : [])];
    const b = await probe<PoolRound>("bun_sql.ts", args, { runtime: bun.path });
    rounds.pgpipe.push(a);
    rounds["Bun.sql"].push(b);
    if (ca !== undefined) {
      rounds[PGPIPE_NATIVE].push(await pgpipeDefaultPool({ mode: "require", ca }));
    }
    log(
      `vs Bun.sql round ${r + 1}: serial ${fmt(a.serialUs, 1)} / ${fmt(b.serialUs, 1)} µs, ` +
        `${BUN_WINDOW} in flight ${fmt(a.qps)} / ${fmt(b.qps)} q/s`,
    );
  }
  const withCpu = rounds.pgpipe.some((r) => r.cpu);
  report.table(
    `pgpipe and Bun.sql (Bun ${bun.version}), default pools (median of ${BUN_ROUNDS} alternating rounds)`,
    `driver | serial select 1 (µs) | select $1::int, ${BUN_WINDOW} in flight (q/s)` +
      (withCpu ? " | its client CPU (µs/query) | its server CPU (µs/query)" : ""),
    Object.entries(rounds).filter(([, rs]) => rs.length).map(([n, rs]) => poolRow(n, rs, withCpu)),
  );
  const [theirs, native] = [rounds["Bun.sql"], rounds[PGPIPE_NATIVE]];
  for (const [suffix, ours] of [[`, ${PGPIPE_NATIVE}`, native], ["", rounds.pgpipe]] as const) {
    if (ours.length === 0) continue;
    const serialRatio = medianOf(theirs, "serialUs") / medianOf(ours, "serialUs");
    report.ratio(`serial select 1, default pool${suffix}`, "Bun.sql", serialRatio);
    const qpsRatio = medianOf(ours, "qps") / medianOf(theirs, "qps");
    report.ratio(`${BUN_WINDOW} in flight, default pool${suffix}`, "Bun.sql", qpsRatio);
  }
  const how = tls
    ? " (sslmode=require: Bun encrypts without verifying, as pgpipe's node:tls path does)"
    : "";
  const cpu =
    `CPU per query of the ${BUN_WINDOW}-in-flight run: the run time Linux counts (/proc/<pid>/task/*/schedstat) for the client's process (this one for pgpipe, bun's for Bun.sql) and for every process the postmaster started, read around that run only.`;
  report.note(
    `Bun.sql runs in a bun process (bench/probes/bun_sql.ts) with the same URL${how}; each side warms its pool first.`,
    ...(withCpu ? [cpu] : []),
  );
}

/**
 * In a TLS variant: the floor of a serial TLS round trip on each runtime, in alternating rounds:
 * pgpipe's `select 1` replayed on raw sockets over node:tls and native TLS in this process, and
 * over node:tls in a bun process (bench/probes/bun_pingpong.ts). Beside the drivers' serial
 * figures it says how much of a gap between Bun.sql and pgpipe is the runtimes' own.
 */
async function runtimeFloors(): Promise<void> {
  if ("skip" in bun) return;
  const { hostname, port } = new URL(url);
  await using dir = await tempDir("pgpipe-floors-");
  const file = `${dir.path}/session.json`;
  const requests = session.requests.map((r) => ({ bytes: [...r.bytes], types: r.types }));
  await Deno.writeTextFile(file, JSON.stringify({ startup: [...session.startup], requests }));
  const inDeno = (kind: RawKind) => `${ping(kind)}, Deno ${Deno.version.deno}`;
  const args = [file, hostname, port || 5432, BUN_SERIAL];
  const inBun = () => probe<Floor>("bun_pingpong.ts", args, { runtime: bun.path });
  const bunName = `${ping("node:tls")}, Bun ${bun.version}`;
  await using clients = await openClients<Floor>(
    ofRaws(["node:tls", "native TLS"], inDeno, (r) => serialFloor(r, steady, BUN_SERIAL)),
    () => Promise.resolve([{ name: bunName, run: inBun, close: () => {} }]),
  );
  const got = await roundsOf(BUN_ROUNDS, clients, (c) => c.run());
  const middle = (xs: Floor[], k: keyof Floor) => fmt(median(xs.map((x) => x[k])), 1);
  report.table(
    `Serial TLS round trip on raw sockets, by runtime: pgpipe's select 1 replayed ` +
      `(µs; ${fmt(BUN_SERIAL)} each, median of ${BUN_ROUNDS} alternating rounds)`,
    "raw replay | mean | p50",
    [...got].map(([name, xs]) => [name, middle(xs, "meanUs"), middle(xs, "p50Us")]),
  );
  report.note(
    "Raw TLS round trips by runtime: the same replay as the ping-pong table's, over node:tls in this Deno process and in a bun process (bench/probes/bun_pingpong.ts), and over Deno's native TLS. A driver's serial time minus its runtime's floor is the driver's own cost; the floors' difference is the runtimes'.",
  );
}

// ------------------------------------------------------------ TLS as a share of plain TCP

/**
 * In a TLS variant: pipelined q/s on one connection over TLS as a share of the same over plain
 * TCP, both paths, in alternating rounds in this one process; and, where the server runs on this
 * machine, the CPU each query cost this process and the server's backends, which says which side
 * the encryption weighs on.
 */
async function tlsShare() {
  const half = TOTAL / 2;
  const ours = drivers.filter((d) => d.name === "pgpipe" || d.name === PGPIPE_NATIVE);
  await using clients = await openClients<Rate>(
    ofPlain((p) => pipelined(p, half, WINDOW)),
    ...ours.map((d) => ofDriver(d, (a) => pipelined(a, half, WINDOW))),
    // pgpipe's steady serial request pipelined on raw sockets, each run timed like a driver's.
    ofRaws(["socket", "native TLS", "node:tls"], rawPipeline, async (r) => {
      const t0 = performance.now();
      await r.pipeline(steady, half, WINDOW);
      return rate(half, performance.now() - t0);
    }),
  );
  const runs = await roundsOf(3, clients, (c) => cpuPerQuery(postmaster, c.run, (r) => r.queries));
  const isRaw = (name: string) => name.startsWith("raw ");
  const plainOf = (name: string) => isRaw(name) ? rawPipeline("socket") : PLAIN_PGPIPE;
  const qps = (name: string) => median(runs.get(name)!.map((r) => r.result.qps));
  const rows = [...runs.keys()].map((name) => {
    const share = qps(name) / qps(plainOf(name));
    if (name !== PLAIN_PGPIPE && !isRaw(name)) {
      const label = `pipelined q/s, 1 connection, share of plain TCP: pgpipe on ${tlsPath(name)}`;
      report.ratio(label, PLAIN_PGPIPE, share);
    }
    return [name, fmt(qps(name)), formatRatio(share)];
  });
  report.table(
    `Pipelined over TLS and over plain TCP: ${fmt(half)} queries, ${fmt(WINDOW)} in ` +
      "flight, 1 connection (median of 3 alternating rounds)",
    "client | q/s | share of plain TCP",
    rows,
  );
  const window = fmt(WINDOW);
  report.note(
    `Raw pipelines: the bytes pgpipe sends for a serial \`select 1\` (Bind Execute Sync of its prepared statement, one Sync each, as pgpipe's select $1::int) replayed on a raw socket with ${window} in flight, each read answered by as many new copies in one write, decoding nothing: the rate and the TLS share the runtime and the server allow without a driver. Their share is of the raw plain-TCP pipeline.`,
  );
  if (postmaster === undefined) return;
  // The CPU per query of the same runs, each TLS run against its plain twin.
  const cpu = (name: string) => middleCpu(runs.get(name)!.flatMap((r) => r.cpu ? [r.cpu] : []));
  const cpuRows = [...runs.keys()].map((name) => {
    const c = cpu(name);
    const total = c.client + c.server;
    if (name === plainOf(name)) {
      return [name, fmt(c.client, 2), fmt(c.server, 2), "", fmt(total, 2), "", ""];
    }
    const p = cpu(plainOf(name));
    const plainTotal = p.client + p.server;
    const extra = c.server - p.server;
    const shares = [plainTotal / total, plainTotal / (plainTotal + extra)].map(formatRatio);
    return [name, ...[c.client, c.server, extra, total].map((us) => fmt(us, 2)), ...shares];
  });
  report.table(
    "CPU per query of the same runs (µs, median of 3; this process, and the server's processes)",
    "client | client CPU | server CPU | server: TLS's extra | both | plaintext's total / this total | ceiling were the client's TLS free",
    cpuRows,
  );
  report.note(
    "CPU per query: the run time Linux counts (/proc/<pid>/task/*/schedstat) for this process and for every process the postmaster started, read around each run, divided by its queries. With one Sync per query the server encrypts every answer and sends it as its own TLS record: its extra CPU per query is the part of TLS no client can remove (in a transaction, one Sync per batch, it shrinks). Where the client and the server share the machine's cores and use them all, the rate follows their total CPU per query; the last column is then the most TLS could reach of plain TCP's rate with a client whose own TLS cost nothing (against the plain run of the same kind: pgpipe's, or the raw pipeline's).",
  );
}

// ------------------------------------------------------------ the suite

const drivers = await suiteDrivers(undefined, { against: true });
const results: DriverResult[] = [];
for (const d of drivers) results.push(await measure(d));
if (!results[0].pipelined) throw new Error("pgpipe must pipeline: it is the baseline");
const limit = await pgbenchPipeline(url, quick ? 2 : 5, WINDOW);
if (limit.qps) log(`libpq pipeline (pgbench): ${fmt(limit.qps)} q/s`);
const same = await libpqPipeline(url, TOTAL, WINDOW);
rates(results, limit, same);
const session = await captureSelectOne();
/** The steady request of the captured session: what every later serial `select 1` sends. */
const steady = session.requests[session.requests.length - 1].bytes;
await pingPong();
// The server's postmaster, found from a backend while that backend lives (undefined if remote).
const postmaster = await ask(plainBenchUrl(), "select pg_backend_pid()", localPostmaster);
const bun = await findBun(log);
await versusBun();
if (tls) {
  await runtimeFloors();
  await tlsShare();
}
await report.emit();
