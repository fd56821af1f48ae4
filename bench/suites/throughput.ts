// Suite 2: queries per second for a tiny query (`select $1::int`) with a window of queries in
// flight, on one and on four connections, then strictly serial latency. With a tiny query the
// driver's per-query cost dominates, so this shows client overhead rather than server work.
// When pgbench is installed, libpq's own pipeline mode runs the same query as the physical limit.
// Serial latency is also taken with one core kept busy (spinner.ts explains why). Last, serial
// `select 1` beside a raw socket ping-pong of the very bytes pgpipe sends for it (pingpong.ts):
// the difference is what the driver costs per query over the physical limit.
import postgres from "../../mod.ts";
import {
  type Adapter,
  type Driver,
  PGPIPE_NATIVE,
  settleNative,
  suiteDrivers,
} from "../peers/drivers.ts";
import { benchCa, benchUrl, isQuick, isTls, plainBenchUrl } from "../shared/env.ts";
import { pgbenchPipeline } from "../peers/pgbench.ts";
import { captureSession, NodeTlsPingPong, PingPong, type WireSession } from "../peers/pingpong.ts";
import { findBun } from "../peers/bun.ts";
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
import { type CpuPerQuery, cpuPerQuery, localPostmaster } from "../shared/cpu.ts";
import { mean, median, percentile } from "../shared/stats.ts";

const quick = isQuick();
const url = benchUrl();
const tls = isTls();
/** In a TLS variant, what pgpipe over plain TCP does on the same machine, for the TLS cost. */
const PLAIN_PGPIPE = "pgpipe (plaintext)";
const RAW = "raw socket ping-pong";
const RAW_NATIVE = "raw native TLS ping-pong";
const RAW_NODE = "raw node:tls ping-pong";
/** In a TLS variant, pgpipe's bytes pipelined on raw sockets: the floor of a pipelined rate. */
const RAW_PIPELINE = "raw socket pipeline";
const RAW_NATIVE_PIPELINE = "raw native TLS pipeline";
const RAW_NODE_PIPELINE = "raw node:tls pipeline";
const RAW_PIPELINES = [RAW_PIPELINE, RAW_NATIVE_PIPELINE, RAW_NODE_PIPELINE];
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
async function captureSelectOne(): Promise<WireSession> {
  // Over plain TCP (the proxy must read the bytes): TLS changes how they travel, not what they are.
  const session = await captureSession(plainBenchUrl(), async (via) => {
    const sql = postgres(via, { max: 1, ssl: false, onnotice: () => {} });
    try {
      for (let i = 0; i < 3; i++) {
        const [row] = await sql`select 1`;
        const x = Object.values(row)[0];
        if (x !== 1) throw new Error(`wrong answer: select 1 returned ${x}`);
      }
    } finally {
      await sql.end();
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
  const host = u.hostname;
  const port = Number(u.port || 5432);
  const raw = await PingPong.open(host, port, session);
  const bytes = session.requests[session.requests.length - 1].bytes;
  const clients: PingClient[] = [{
    name: RAW,
    once: () => raw.roundTrip(bytes),
    close: () => Promise.resolve(raw.close()),
  }];
  try {
    if (tls) {
      // The floors of the two TLS paths, and pgpipe over plain TCP for the TLS cost.
      const ca = benchCa();
      if (ca !== undefined) {
        const native = await PingPong.open(host, port, session, ca);
        clients.push({
          name: RAW_NATIVE,
          once: () => native.roundTrip(bytes),
          close: () => Promise.resolve(native.close()),
        });
      }
      const node = await NodeTlsPingPong.open(host, port, session);
      clients.push({
        name: RAW_NODE,
        once: () => node.roundTrip(bytes),
        close: () => Promise.resolve(node.close()),
      });
      const plain = postgres(plainBenchUrl(), { max: 1, ssl: false, onnotice: () => {} });
      await plain`select 1`;
      clients.push({
        name: PLAIN_PGPIPE,
        async once() {
          const [row] = await plain`select 1`;
          if (Object.values(row)[0] !== 1) throw new Error("wrong answer: select 1");
        },
        close: () => plain.end(),
      });
    }
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
  const session = await captureSelectOne();
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

/** What a client's serial round trip is compared with: the raw replay over the same transport. */
function floorOf(name: string): string | undefined {
  if (name === RAW || name === RAW_NATIVE || name === RAW_NODE) return undefined;
  if (!tls || name === PLAIN_PGPIPE) return RAW;
  return name === PGPIPE_NATIVE ? RAW_NATIVE : RAW_NODE; // postgres.js runs on node:tls too
}

/** The ping-pong table, pgpipe's overheads (and in a TLS variant, TLS's cost) as measures. */
function pingReport(
  p: PingResult,
): { table: Table; measures: Measure[]; notes: string[] } {
  const rows: string[][] = [];
  const measures: Measure[] = [];
  const measure = (label: string, against: string, value: number) =>
    measures.push({ suite: "throughput", label, against, value, unit: "µs" });
  for (const [cores, samples] of [["as is", p.asIs], ["one kept busy", p.busy]] as const) {
    const busy = cores === "as is" ? "" : ", one core kept busy";
    for (const [name, s] of samples) {
      const floor = floorOf(name);
      const raw = floor === undefined ? undefined : samples.get(floor);
      const overMean = raw ? mean(s) - mean(raw) : NaN;
      const overP50 = raw ? percentile(s, 50) - percentile(raw, 50) : NaN;
      rows.push([
        name,
        cores,
        fmt(mean(s), 1),
        fmt(percentile(s, 50), 1),
        fmt(percentile(s, 99), 1),
        raw ? `+${fmt(overMean, 1)} (${floor})` : "",
        raw ? `+${fmt(overP50, 1)}` : "",
        String(s.length),
      ]);
      if (!raw) continue;
      if (!tls && name === "pgpipe") {
        const label = "serial select 1: pgpipe overhead over the raw ping-pong";
        measure(`${label}${busy} (mean)`, RAW, overMean);
        measure(`${label}${busy} (p50)`, RAW, overP50);
      }
      if (tls && (name === "pgpipe" || name === PGPIPE_NATIVE)) {
        const path = name === "pgpipe" ? "node:tls" : "native TLS";
        measure(
          `serial select 1: pgpipe on ${path}, overhead over the ${floor}${busy} (mean)`,
          floor!,
          overMean,
        );
        const plain = samples.get(PLAIN_PGPIPE)!;
        measure(
          `serial select 1: TLS cost per round trip, pgpipe on ${path} minus over plain TCP${busy} (mean)`,
          PLAIN_PGPIPE,
          mean(s) - mean(plain),
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
        "over its raw floor (mean)",
        "over it (p50)",
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

const BUN_SERIAL = quick ? 2_000 : 10_000;
const BUN_TOTAL = quick ? 20_000 : 100_000;
const BUN_WINDOW = 500;
const BUN_ROUNDS = quick ? 1 : 3;

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
    const t0 = performance.now();
    for (let i = 0; i < BUN_SERIAL; i++) {
      const [row] = await sql`select 1`;
      if (Object.values(row)[0] !== 1) throw new Error("wrong answer: select 1");
    }
    const serialUs = (performance.now() - t0) * 1000 / BUN_SERIAL;
    const { result: rate, cpu } = await cpuPerQuery(
      postmaster,
      () =>
        pipelined(
          { selectInt: async (v) => (await sql`select ${v}::int as x`)[0].x as number },
          BUN_TOTAL,
          BUN_WINDOW,
        ),
      (done) => done.queries,
    );
    return { serialUs, qps: rate.qps, cpu };
  } finally {
    await sql.end();
  }
}

/**
 * In a TLS variant: the floor of a serial TLS round trip on each runtime, in alternating rounds:
 * pgpipe's `select 1` replayed on raw sockets over node:tls and native TLS in this process, and
 * over node:tls in a bun process (bench/probes/bun_pingpong.ts). Beside the drivers' serial
 * figures it says how much of a gap between Bun.sql and pgpipe is the runtimes' own.
 */
async function runtimeFloors(session: WireSession): Promise<{ table?: Table; notes: string[] }> {
  const bun = await findBun((line) => console.log(`throughput: ${line}`));
  if (!("path" in bun)) return { notes: [] };
  const u = new URL(url);
  const host = u.hostname;
  const port = Number(u.port || 5432);
  const steady = session.requests[session.requests.length - 1].bytes;
  const dir = await Deno.makeTempDir({ prefix: "pgpipe-floors-" });
  const file = `${dir}/session.json`;
  await Deno.writeTextFile(
    file,
    JSON.stringify({
      startup: [...session.startup],
      requests: session.requests.map((r) => ({ bytes: [...r.bytes], types: r.types })),
    }),
  );
  const probe = new URL("../probes/bun_pingpong.ts", import.meta.url).pathname;
  const inBun = async (): Promise<number[]> => {
    const out = await new Deno.Command(bun.path, {
      args: [probe, file, host, String(port), String(BUN_SERIAL)],
      stdout: "piped",
      stderr: "piped",
    }).output();
    if (!out.success) throw new Error(`Bun ping-pong: ${new TextDecoder().decode(out.stderr)}`);
    const r = JSON.parse(new TextDecoder().decode(out.stdout).trim().split("\n").pop()!) as {
      meanUs: number;
      p50Us: number;
    };
    return [r.meanUs, r.p50Us];
  };
  const inDeno = (once: () => Promise<void>) => async (): Promise<number[]> => {
    for (let i = 0; i < 500; i++) await once(); // warm-up, as the Bun probe does
    const samples = await serialOnce(
      { name: "", once, close: () => Promise.resolve() },
      BUN_SERIAL,
      Infinity,
    );
    return [mean(samples), percentile(samples, 50)];
  };
  const node = await NodeTlsPingPong.open(host, port, session);
  const ca = benchCa();
  const native = ca === undefined ? undefined : await PingPong.open(host, port, session, ca);
  const runs: [string, () => Promise<number[]>][] = [
    [`${RAW_NODE}, Deno ${Deno.version.deno}`, inDeno(() => node.roundTrip(steady))],
    ...(native
      ? [[`${RAW_NATIVE}, Deno ${Deno.version.deno}`, inDeno(() => native.roundTrip(steady))] as [
        string,
        () => Promise<number[]>,
      ]]
      : []),
    [`${RAW_NODE}, Bun ${bun.version}`, inBun],
  ];
  const got = new Map(runs.map(([name]) => [name, [] as number[][]]));
  try {
    for (let r = 0; r < BUN_ROUNDS; r++) {
      for (let k = 0; k < runs.length; k++) {
        const [name, run] = runs[(k + r) % runs.length];
        got.get(name)!.push(await run());
      }
    }
  } finally {
    node.close();
    native?.close();
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
  return {
    table: {
      title: `Serial TLS round trip on raw sockets, by runtime: pgpipe's select 1 replayed ` +
        `(µs; ${fmt(BUN_SERIAL)} each, median of ${BUN_ROUNDS} alternating rounds)`,
      head: ["raw replay", "mean", "p50"],
      rows: [...got].map(([name, xs]) => [
        name,
        fmt(median(xs.map((x) => x[0])), 1),
        fmt(median(xs.map((x) => x[1])), 1),
      ]),
    },
    notes: [
      "Raw TLS round trips by runtime: the same replay as the ping-pong table's, over node:tls " +
      "in this Deno process and in a bun process (bench/probes/bun_pingpong.ts), and over " +
      "Deno's native TLS. A driver's serial time minus its runtime's floor is the driver's own " +
      "cost; the floors' difference is the runtimes'.",
    ],
  };
}

/**
 * pgpipe against Bun.sql on Bun, each with its default pool (10 connections), in alternating
 * rounds: strictly serial `select 1`, and `select $1::int` with 500 in flight.
 */
async function versusBun(
  postmaster: number | undefined,
): Promise<{ table?: Table; ratios: Ratio[]; notes: string[] }> {
  const bun = await findBun((line) => console.log(`throughput: ${line}`));
  if (!("path" in bun)) {
    return { ratios: [], notes: [`skipped Bun.sql: no bun binary (${bun.reason})`] };
  }
  const probe = new URL("../probes/bun_sql.ts", import.meta.url).pathname;
  const runBun = async () => {
    const out = await new Deno.Command(bun.path, {
      args: [
        probe,
        url,
        String(BUN_SERIAL),
        String(BUN_TOTAL),
        String(BUN_WINDOW),
        ...(postmaster === undefined ? [] : [String(postmaster)]),
      ],
      stdout: "piped",
      stderr: "piped",
    }).output();
    if (!out.success) throw new Error(`Bun.sql probe: ${new TextDecoder().decode(out.stderr)}`);
    return JSON.parse(
      new TextDecoder().decode(out.stdout).trim().split("\n").pop()!,
    ) as PoolRound;
  };
  const ours = { serial: [] as number[], qps: [] as number[], cpu: [] as CpuPerQuery[] };
  const theirs = { serial: [] as number[], qps: [] as number[], cpu: [] as CpuPerQuery[] };
  // In a TLS variant, also pgpipe given the server's CA: what native TLS does beside Bun.
  const ca = tls ? benchCa() : undefined;
  const native = { serial: [] as number[], qps: [] as number[], cpu: [] as CpuPerQuery[] };
  // The native row's pools must open on native TLS, not take the process's first turn.
  if (ca !== undefined) await settleNative(url, { mode: "require", ca });
  const add = (to: typeof ours, round: PoolRound) => {
    to.serial.push(round.serialUs);
    to.qps.push(round.qps);
    if (round.cpu) to.cpu.push(round.cpu);
  };
  for (let r = 0; r < BUN_ROUNDS; r++) {
    const a = await pgpipeDefaultPool(tls ? "require" : false, postmaster);
    const b = await runBun();
    add(ours, a);
    add(theirs, b);
    if (ca !== undefined) add(native, await pgpipeDefaultPool({ mode: "require", ca }, postmaster));
    console.log(
      `throughput: vs Bun.sql round ${r + 1}: serial ${fmt(a.serialUs, 1)} / ${
        fmt(b.serialUs, 1)
      } µs, ` +
        `${BUN_WINDOW} in flight ${fmt(a.qps)} / ${fmt(b.qps)} q/s`,
    );
  }
  const serial = { pgpipe: median(ours.serial), bun: median(theirs.serial) };
  const qps = { pgpipe: median(ours.qps), bun: median(theirs.qps) };
  const withCpu = ours.cpu.length > 0;
  const cpuCells = (xs: CpuPerQuery[]) => {
    if (!withCpu) return [];
    const c = xs.length ? middleCpu(xs) : { client: NaN, server: NaN };
    return [fmtCpu(c.client), fmtCpu(c.server)];
  };
  return {
    table: {
      title:
        `pgpipe and Bun.sql (Bun ${bun.version}), default pools (median of ${BUN_ROUNDS} alternating rounds)`,
      head: [
        "driver",
        "serial select 1 (µs)",
        `select $1::int, ${BUN_WINDOW} in flight (q/s)`,
        ...(withCpu ? ["its client CPU (µs/query)", "its server CPU (µs/query)"] : []),
      ],
      rows: [
        ["pgpipe", fmt(serial.pgpipe, 1), fmt(qps.pgpipe), ...cpuCells(ours.cpu)],
        ...(native.serial.length
          ? [[
            PGPIPE_NATIVE,
            fmt(median(native.serial), 1),
            fmt(median(native.qps)),
            ...cpuCells(native.cpu),
          ]]
          : []),
        ["Bun.sql", fmt(serial.bun, 1), fmt(qps.bun), ...cpuCells(theirs.cpu)],
      ],
    },
    ratios: [
      ...(native.serial.length
        ? [
          {
            suite: "throughput",
            label: `serial select 1, default pool, ${PGPIPE_NATIVE}`,
            peer: "Bun.sql",
            value: serial.bun / median(native.serial),
          },
          {
            suite: "throughput",
            label: `${BUN_WINDOW} in flight, default pool, ${PGPIPE_NATIVE}`,
            peer: "Bun.sql",
            value: median(native.qps) / qps.bun,
          },
        ]
        : []),
      {
        suite: "throughput",
        label: "serial select 1, default pool",
        peer: "Bun.sql",
        value: serial.bun / serial.pgpipe,
      },
      {
        suite: "throughput",
        label: `${BUN_WINDOW} in flight, default pool`,
        peer: "Bun.sql",
        value: qps.pgpipe / qps.bun,
      },
    ],
    notes: [
      `Bun.sql runs in a bun process (bench/probes/bun_sql.ts) with the same URL${
        tls
          ? " (sslmode=require: Bun encrypts without verifying, as pgpipe's node:tls path does)"
          : ""
      }; each side warms its pool first.`,
      ...(withCpu
        ? [
          `CPU per query of the ${BUN_WINDOW}-in-flight run: the run time Linux counts ` +
          "(/proc/<pid>/task/*/schedstat) for the client's process (this one for pgpipe, " +
          "bun's for Bun.sql) and for every process the postmaster started, read around that " +
          "run only.",
        ]
        : []),
    ],
  };
}

/** The local postmaster's pid (for CPU accounting), or undefined when the server is elsewhere. */
async function postmasterPid(): Promise<number | undefined> {
  const sql = postgres(plainBenchUrl(), { max: 1, ssl: false, onnotice: () => {} });
  try {
    const [{ pid }] = await sql`select pg_backend_pid() as pid`;
    return localPostmaster(pid as number);
  } finally {
    await sql.end();
  }
}

/**
 * pgpipe's steady serial request pipelined on raw sockets (plain TCP, native TLS when the CA is
 * known, node:tls), each run timed like a driver's.
 */
async function rawPipelines(
  session: WireSession,
): Promise<{ name: string; run(): Promise<Rate>; close(): Promise<void> }[]> {
  const u = new URL(url);
  const host = u.hostname;
  const port = Number(u.port || 5432);
  const bytes = session.requests[session.requests.length - 1].bytes;
  const half = TOTAL / 2;
  const timed = (pipeline: () => Promise<void>) => async (): Promise<Rate> => {
    const t0 = performance.now();
    await pipeline();
    const ms = performance.now() - t0;
    return { queries: half, ms, qps: half / (ms / 1000) };
  };
  const out = [];
  try {
    const plain = await PingPong.open(host, port, session);
    out.push({
      name: RAW_PIPELINE,
      run: timed(() => plain.pipeline(bytes, half, WINDOW)),
      close: () => Promise.resolve(plain.close()),
    });
    const ca = benchCa();
    if (ca !== undefined) {
      const native = await PingPong.open(host, port, session, ca);
      out.push({
        name: RAW_NATIVE_PIPELINE,
        run: timed(() => native.pipeline(bytes, half, WINDOW)),
        close: () => Promise.resolve(native.close()),
      });
    }
    const node = await NodeTlsPingPong.open(host, port, session);
    out.push({
      name: RAW_NODE_PIPELINE,
      run: timed(() => node.pipeline(bytes, half, WINDOW)),
      close: () => Promise.resolve(node.close()),
    });
  } catch (e) {
    await Promise.allSettled(out.map((c) => c.close()));
    throw e;
  }
  return out;
}

/** Median CPU per query on each side over rounds (NaN where a side could not be read). */
function middleCpu(xs: CpuPerQuery[]): CpuPerQuery {
  return { client: median(xs.map((x) => x.client)), server: median(xs.map((x) => x.server)) };
}

/** A CPU figure in µs, "-" when it could not be read. */
function fmtCpu(us: number): string {
  return Number.isFinite(us) ? fmt(us, 2) : "-";
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
): Promise<{ tables: Table[]; ratios: Ratio[]; notes: string[] }> {
  const half = TOTAL / 2;
  const plain = postgres(plainBenchUrl(), { max: 1, ssl: false, onnotice: () => {} });
  const viaDriver = (a: Pick<Adapter, "selectInt">) => () => pipelined(a, half, WINDOW);
  const clients: { name: string; run(): Promise<Rate>; close(): Promise<void> }[] = [{
    name: PLAIN_PGPIPE,
    run: viaDriver({
      selectInt: async (v) => (await plain`select ${v}::int as x`)[0].x as number,
    }),
    close: () => plain.end(),
  }];
  try {
    for (const d of drivers.filter((d) => d.name === "pgpipe" || d.name === PGPIPE_NATIVE)) {
      const a = await d.connect(url);
      clients.push({ name: d.name, run: viaDriver(a), close: () => a.close() });
    }
    clients.push(...await rawPipelines(session));
  } catch (e) {
    await Promise.allSettled(clients.map((c) => c.close()));
    throw e;
  }
  const rates = new Map(clients.map((c) => [c.name, [] as number[]]));
  const cpus = new Map(clients.map((c) => [c.name, [] as CpuPerQuery[]]));
  try {
    for (let r = 0; r < 3; r++) {
      for (let k = 0; k < clients.length; k++) {
        const c = clients[(k + r) % clients.length];
        const { result: rate, cpu } = await cpuPerQuery(
          postmaster,
          () => c.run(),
          (done) => done.queries,
        );
        rates.get(c.name)!.push(rate.qps);
        if (cpu) cpus.get(c.name)!.push(cpu);
      }
    }
  } finally {
    await Promise.allSettled(clients.map((c) => c.close()));
  }
  const plainOf = (name: string) => RAW_PIPELINES.includes(name) ? RAW_PIPELINE : PLAIN_PGPIPE;
  const ratios: Ratio[] = [];
  const rows: string[][] = [];
  for (const [name, xs] of rates) {
    const qps = median(xs);
    const base = median(rates.get(plainOf(name))!);
    rows.push([name, fmt(qps), formatRatio(qps / base)]);
    if (name === PLAIN_PGPIPE || RAW_PIPELINES.includes(name)) continue;
    const path = name === "pgpipe" ? "node:tls" : "native TLS";
    ratios.push({
      suite: "throughput",
      label: `pipelined q/s, 1 connection, share of plain TCP: pgpipe on ${path}`,
      peer: PLAIN_PGPIPE,
      value: qps / base,
    });
  }
  const tables: Table[] = [{
    title: `Pipelined over TLS and over plain TCP: ${fmt(half)} queries, ${fmt(WINDOW)} in ` +
      "flight, 1 connection (median of 3 alternating rounds)",
    head: ["client", "q/s", "share of plain TCP"],
    rows,
  }];
  const notes = [
    "Raw pipelines: the bytes pgpipe sends for a serial `select 1` (Bind Execute Sync of its " +
    "prepared statement, one Sync each, as pgpipe's select $1::int) replayed on a raw socket " +
    `with ${fmt(WINDOW)} in flight, each read answered by as many new copies in one write, ` +
    "decoding nothing: the rate and the TLS share the runtime and the server allow without " +
    "a driver. Their share is of the raw plain-TCP pipeline.",
  ];
  if (postmaster !== undefined) {
    tables.push({
      title: "CPU per query of the same runs (µs, median of 3; this process, and the server's " +
        "processes)",
      head: [
        "client",
        "client CPU",
        "server CPU",
        "server: TLS's extra",
        "both",
        "plaintext's total / this total",
        "ceiling were the client's TLS free",
      ],
      rows: [...cpus.keys()].map((name) => {
        const c = middleCpu(cpus.get(name)!);
        if (name === plainOf(name)) {
          return [
            name,
            fmtCpu(c.client),
            fmtCpu(c.server),
            "",
            fmtCpu(c.client + c.server),
            "",
            "",
          ];
        }
        const p = middleCpu(cpus.get(plainOf(name))!);
        const plainTotal = p.client + p.server;
        const extra = c.server - p.server;
        return [
          name,
          fmtCpu(c.client),
          fmtCpu(c.server),
          fmtCpu(extra),
          fmtCpu(c.client + c.server),
          formatRatio(plainTotal / (c.client + c.server)),
          formatRatio(plainTotal / (plainTotal + extra)),
        ];
      }),
    });
    notes.push(
      "CPU per query: the run time Linux counts (/proc/<pid>/task/*/schedstat) for this " +
        "process and for every process the postmaster started, read around each run, divided " +
        "by its queries. With one Sync per " +
        "query the server encrypts every answer and sends it as its own TLS record: its extra " +
        "CPU per query is the part of TLS no client can remove (in a transaction, one Sync " +
        "per batch, it shrinks). Where the client and the server share the machine's cores " +
        "and use them all, the rate follows their total CPU per query; the last column is " +
        "then the most TLS could reach of plain TCP's rate with a client whose own TLS cost " +
        "nothing (against the plain run of the same kind: pgpipe's, or the raw pipeline's).",
    );
  }
  return { tables, ratios, notes };
}

async function main(): Promise<void> {
  const drivers = await suiteDrivers();
  const results: DriverResult[] = [];
  for (const d of drivers) results.push(await measure(d));
  const limit = await pgbenchPipeline(url, { seconds: quick ? 2 : 5, lines: WINDOW });
  if (limit.qps) console.log(`throughput: libpq pipeline (pgbench): ${fmt(limit.qps)} q/s`);
  const same = await sameShapeLimit();
  const pings = await pingPong(drivers);
  const ping = pingReport(pings);
  const postmaster = await postmasterPid();
  const bun = await versusBun(postmaster);
  const floors = tls ? await runtimeFloors(pings.session) : undefined;
  const share = tls ? await tlsShare(drivers, postmaster, pings.session) : undefined;

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
  ratios.push(...bun.ratios, ...(share?.ratios ?? []));
  const report: SuiteReport = {
    suite: "throughput",
    tables: [
      rates,
      lat,
      ping.table,
      ...(bun.table ? [bun.table] : []),
      ...(floors?.table ? [floors.table] : []),
      ...(share?.tables ?? []),
    ],
    ratios,
    measures: ping.measures,
    notes: [
      ...notes,
      ...ping.notes,
      ...bun.notes,
      ...(floors?.notes ?? []),
      ...(share?.notes ?? []),
    ],
  };
  await emitReport(report);
}

await main();
