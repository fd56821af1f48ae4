// Suite 6: end to end over HTTP. A server answers `GET /users` with 100 rows of a seeded table
// as JSON (http_app.ts: the same handler code for every driver), and a load generator in its
// own process (wrk, else http_load.ts) keeps 50 keep-alive connections busy. Each driver's
// server runs with a pool of 1 and of 4 connections, in several rounds with the starting driver
// rotated; the medians are compared. Drivers: pgpipe and postgres.js under Deno.serve, and
// Bun.sql under Bun.serve where a bun binary is found (bun.ts). One more pgpipe round per pool
// size runs under `deno run --cpu-prof` to show how much of the server's CPU the driver takes.
import { deepStrictEqual } from "node:assert/strict";
import { join } from "node:path";
import postgres from "../../mod.ts";
import { findBun } from "../peers/bun.ts";
import { type CpuProfile, type ProfileSummary, summarizeProfile } from "../shared/cpu_profile.ts";
import { suiteDrivers } from "../peers/drivers.ts";
import { benchUrl, isQuick } from "../shared/env.ts";
import { PAGE, SEED_SQL, USERS_TABLE } from "../shared/http_app.ts";
import {
  chooseLoadTool,
  describeTool,
  type LoadRun,
  type LoadTool,
  processCpuSeconds,
  runLoad,
} from "../shared/loadgen.ts";
import { emitReport, fmt, formatRatio, type Ratio, type Table } from "../shared/report.ts";
import { median } from "../shared/stats.ts";

const quick = isQuick();
const url = benchUrl();
const ROUNDS = quick ? 1 : 3;
const WARMUP_SECONDS = quick ? 1 : 3;
const MEASURE_SECONDS = quick ? 2 : 10;
const LOAD_CONNECTIONS = 50;
const WRK_THREADS = 1;
const POOLS = [1, 4];
const PROFILE_INTERVAL_US = 500;
const probes = new URL("../probes/", import.meta.url).pathname;
const root = new URL("../..", import.meta.url).href;
const log = (s: string) => console.log(`http: ${s}`);

/** How to start one driver's server. */
interface ServerSpec {
  name: string;
  runtime: string;
  /** The command line for a pool of `max` connections, with `--cpu-prof` into profileDir. */
  command(max: number, profileDir?: string): string[];
}

function denoServer(name: string): ServerSpec {
  return {
    name,
    runtime: `Deno ${Deno.version.deno}`,
    command(max, profileDir) {
      const prof = profileDir
        ? [
          "--cpu-prof",
          `--cpu-prof-dir=${profileDir}`,
          `--cpu-prof-interval=${PROFILE_INTERVAL_US}`,
        ]
        : [];
      return [
        Deno.execPath(),
        "run",
        "-A",
        "--no-lock",
        "--quiet",
        ...prof,
        join(probes, "http_server.ts"),
        name,
        String(max),
        url,
      ];
    },
  };
}

function bunServer(path: string, version: string): ServerSpec {
  return {
    name: "Bun.sql",
    runtime: `Bun ${version}`,
    command: (max) => [path, join(probes, "http_server_bun.ts"), String(max), url],
  };
}

/** A running server process. */
interface Server {
  pid: number;
  port: number;
  /** Closes its standard input (it shuts down cleanly), killing it if it has not within 20 s. */
  stop(): Promise<void>;
}

/** Reads the first line of a stream, giving up after timeoutMs; the rest is drained. */
async function firstLine(stream: ReadableStream<Uint8Array>, timeoutMs: number): Promise<string> {
  const reader = stream.pipeThrough(new TextDecoderStream()).getReader();
  let text = "";
  const timer = setTimeout(() => reader.cancel().catch(() => {}), timeoutMs);
  try {
    while (!text.includes("\n")) {
      const { value, done } = await reader.read();
      if (done) break;
      text += value;
    }
  } finally {
    clearTimeout(timer);
  }
  // Keep reading so a chatty server never blocks on a full pipe.
  (async () => {
    try {
      while (!(await reader.read()).done) { /* drain */ }
    } catch { /* cancelled */ }
  })();
  return text.split("\n")[0];
}

async function startServer(spec: ServerSpec, max: number, profileDir?: string): Promise<Server> {
  const [cmd, ...args] = spec.command(max, profileDir);
  const child = new Deno.Command(cmd, {
    args,
    stdin: "piped",
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const stdin = child.stdin.getWriter();
  const stop = async () => {
    await stdin.close().catch(() => {});
    const timer = setTimeout(() => {
      try {
        child.kill("SIGKILL");
      } catch { /* gone */ }
    }, 20_000);
    try {
      await child.status;
    } finally {
      clearTimeout(timer);
    }
  };
  try {
    const line = await firstLine(child.stdout, 60_000);
    const port = (JSON.parse(line) as { port?: number }).port;
    if (typeof port !== "number") throw new Error(`no port in ${line}`);
    return { pid: child.pid, port, stop };
  } catch (e) {
    await stop();
    throw new Error(`${spec.name}: the server did not start: ${(e as Error).message}`);
  }
}

/** The client the suite itself uses: seeding, the expected answer, counting backends. */
const admin = postgres(url, { max: 1, onnotice: () => {} });

async function seed(): Promise<void> {
  for (const q of SEED_SQL) await admin.unsafe(q);
}

/** The page after id 0 as the API must answer it, built by the server from the table. */
async function expectedPage(): Promise<unknown> {
  const [{ page }] = await admin.unsafe(`
    select json_agg(json_build_object(
      'id', id, 'name', name, 'email', email,
      'createdAt', to_char(created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
      'active', active, 'score', score, 'data', data) order by id)::text as page
    from (select * from ${USERS_TABLE} where id > 0 order by id limit ${PAGE}) t`);
  return JSON.parse(page as string);
}

/** Checks the server answers the first page exactly as expected. */
async function checkAnswer(spec: ServerSpec, port: number, expected: unknown): Promise<void> {
  const res = await fetch(`http://127.0.0.1:${port}/users?after=0`);
  const body = await res.text();
  if (res.status !== 200) throw new Error(`${spec.name}: status ${res.status}: ${body}`);
  try {
    deepStrictEqual(JSON.parse(body), expected);
  } catch (e) {
    throw new Error(`${spec.name}: wrong answer: ${(e as Error).message.slice(0, 500)}`);
  }
}

/** Backends whose last query is the handler's: the connections the server really uses. */
async function handlerBackends(): Promise<number[]> {
  const rows = await admin`select pid from pg_stat_activity
    where pid <> pg_backend_pid() and query like ${"%from " + USERS_TABLE + "%"}`;
  return rows.map((r) => r.pid as number);
}

/** CPU seconds these backends used so far; NaN where /proc does not show them (remote server). */
async function backendsCpuSeconds(pids: number[]): Promise<number> {
  try {
    let sum = 0;
    for (const pid of pids) sum += await processCpuSeconds(pid);
    return sum;
  } catch {
    return NaN;
  }
}

/** One measured run of one server. */
interface Run {
  rps: number;
  p50Ms: number;
  p99Ms: number;
  /** CPU used per wall second (1 = one core busy). */
  serverCpu: number;
  /** The server's CPU time per request, in µs: what contention for the cores does not change. */
  serverCpuPerRequestUs: number;
  /** The PostgreSQL backends serving it, CPU per wall second (NaN when not measurable). */
  postgresCpu: number;
  loadCpu: number;
  errors: number;
  backends: number;
  /** CPU seconds the server process used from its start to the end of the measured window. */
  cpuSinceStart: number;
}

async function measure(
  tool: LoadTool,
  spec: ServerSpec,
  max: number,
  expected: unknown,
  profileDir?: string,
): Promise<Run> {
  const server = await startServer(spec, max, profileDir);
  try {
    await checkAnswer(spec, server.port, expected);
    const target = `http://127.0.0.1:${server.port}/users`;
    const opts = { connections: LOAD_CONNECTIONS, threads: WRK_THREADS };
    await runLoad(tool, target, { ...opts, seconds: WARMUP_SECONDS });
    const pids = await handlerBackends(); // every connection has served the handler by now
    const [cpu0, pg0] = [await processCpuSeconds(server.pid), await backendsCpuSeconds(pids)];
    const load: LoadRun = await runLoad(tool, target, { ...opts, seconds: MEASURE_SECONDS });
    const [cpu1, pg1] = [await processCpuSeconds(server.pid), await backendsCpuSeconds(pids)];
    const backends = (await handlerBackends()).length;
    const cpuSinceStart = await processCpuSeconds(server.pid);
    return {
      rps: load.requests / load.seconds,
      p50Ms: load.p50Ms,
      p99Ms: load.p99Ms,
      serverCpu: (cpu1 - cpu0) / load.seconds,
      serverCpuPerRequestUs: ((cpu1 - cpu0) * 1e6) / load.requests,
      postgresCpu: (pg1 - pg0) / load.seconds,
      loadCpu: load.cpuSeconds / load.seconds,
      errors: load.errors,
      backends,
      cpuSinceStart,
    };
  } finally {
    await server.stop();
  }
}

// ------------------------------------------------------------------ the CPU profile

const DRIVER = "driver (src/, mod.ts)";
const BENCH = "handler and server (bench/)";
const RUNTIME = "Deno runtime JS (ext:, node:)";
const GC = "garbage collector";
const PROGRAM = "(program): native code, no JS frame";
const OPS = "Deno ops (native op_*: text decoding, sockets, HTTP)";
const NATIVE = "other native frames";
const OTHER = "other";

function classify(fileUrl: string, functionName: string): string {
  if (fileUrl.startsWith(root + "src/") || fileUrl === root + "mod.ts") return DRIVER;
  if (fileUrl.startsWith(root + "bench/")) return BENCH;
  if (fileUrl.startsWith("ext:") || fileUrl.startsWith("node:")) return RUNTIME;
  if (fileUrl === "") {
    if (functionName === "(garbage collector)") return GC;
    if (functionName === "(program)") return PROGRAM;
    if (functionName.startsWith("op_")) return OPS;
    return NATIVE;
  }
  return OTHER;
}

const shorten = (u: string) => u.startsWith(root) ? u.slice(root.length) : u;

/** One extra pgpipe round under --cpu-prof; its rate is reported apart (profiling slows it). */
async function profiled(
  tool: LoadTool,
  spec: ServerSpec,
  max: number,
  expected: unknown,
): Promise<{ run: Run; summary: ProfileSummary }> {
  const dir = await Deno.makeTempDir({ prefix: "pgpipe-http-prof-" });
  try {
    const run = await measure(tool, spec, max, expected, dir);
    const files = [...Deno.readDirSync(dir)].filter((e) => e.name.endsWith(".cpuprofile"));
    if (files.length !== 1) {
      throw new Error(`expected one .cpuprofile in ${dir}, found ${files.length}`);
    }
    const profile = JSON.parse(await Deno.readTextFile(join(dir, files[0].name))) as CpuProfile;
    return {
      run,
      summary: summarizeProfile(profile, classify, { inclusiveCategory: DRIVER, top: 10, shorten }),
    };
  } finally {
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
}

// ------------------------------------------------------------------ the suite

const pct = (part: number, whole: number) => `${fmt((100 * part) / whole, 1)}%`;

async function main(): Promise<void> {
  const names = (await suiteDrivers()).map((d) => d.name)
    .filter((n) => n === "pgpipe" || n === "postgres.js");
  const specs = names.map(denoServer);
  const notes: string[] = [];
  const bun = await findBun(log);
  if ("path" in bun) {
    specs.push(bunServer(bun.path, bun.version));
    log(`Bun ${bun.version} (${bun.source})`);
  } else {
    const line = `skipped Bun.sql: no bun binary (${bun.reason})`;
    log(line);
    notes.push(line);
  }
  const tool = chooseLoadTool();
  log(`load generator: ${describeTool(tool, WRK_THREADS)}`);

  try {
    await seed();
    const expected = await expectedPage();
    const runs = new Map<string, Run[]>();
    const key = (spec: ServerSpec, max: number) => `${spec.name}/${max}`;
    for (const max of POOLS) {
      for (let r = 0; r < ROUNDS; r++) {
        for (let k = 0; k < specs.length; k++) {
          const spec = specs[(k + r) % specs.length];
          const run = await measure(tool, spec, max, expected);
          log(
            `${spec.name}, pool ${max}, round ${r + 1}: ${fmt(run.rps)} req/s, ` +
              `p50 ${fmt(run.p50Ms, 2)} ms, p99 ${fmt(run.p99Ms, 2)} ms, ` +
              `server CPU ${pct(run.serverCpu, 1)} (${fmt(run.serverCpuPerRequestUs)} µs/req), ` +
              `PostgreSQL CPU ${pct(run.postgresCpu, 1)}, load generator CPU ${
                pct(run.loadCpu, 1)
              }`,
          );
          if (!runs.has(key(spec, max))) runs.set(key(spec, max), []);
          runs.get(key(spec, max))!.push(run);
        }
      }
    }

    const pgpipe = specs.find((s) => s.name === "pgpipe");
    const profiles: { max: number; run: Run; summary: ProfileSummary }[] = [];
    if (pgpipe) {
      for (const max of POOLS) {
        const p = await profiled(tool, pgpipe, max, expected);
        profiles.push({ max, ...p });
        log(
          `pgpipe, pool ${max}, under --cpu-prof: ${fmt(p.run.rps)} req/s; driver ` +
            `${
              pct(
                p.summary.categories.find((c) => c.category === DRIVER)?.ms ?? 0,
                p.summary.busyMs,
              )
            } ` +
            `of the busy main thread`,
        );
      }
    }

    // Medians per driver and pool.
    const med = (spec: ServerSpec, max: number, f: (r: Run) => number) =>
      median(runs.get(key(spec, max))!.map(f));
    const ratios: Ratio[] = [];
    const rows: string[][] = [];
    for (const max of POOLS) {
      const conns = `${max} connection${max === 1 ? "" : "s"}`;
      const base = pgpipe ? med(pgpipe, max, (r) => r.rps) : NaN;
      const baseCpu = pgpipe ? med(pgpipe, max, (r) => r.serverCpuPerRequestUs) : NaN;
      for (const spec of specs) {
        const rps = med(spec, max, (r) => r.rps);
        const cpu = med(spec, max, (r) => r.serverCpuPerRequestUs);
        const all = runs.get(key(spec, max))!;
        if (spec !== pgpipe) {
          ratios.push({
            suite: "http",
            label: `req/s, ${conns}`,
            peer: spec.name,
            value: base / rps,
          });
          ratios.push({
            suite: "http",
            label: `server CPU per request (lower is better), ${conns}`,
            peer: spec.name,
            value: cpu / baseCpu,
          });
        }
        const pg = med(spec, max, (r) => r.postgresCpu);
        rows.push([
          spec.name,
          spec.runtime,
          String(max),
          fmt(rps),
          spec === pgpipe ? "1.00x" : formatRatio(base / rps),
          fmt(med(spec, max, (r) => r.p50Ms), 2),
          fmt(med(spec, max, (r) => r.p99Ms), 2),
          pct(med(spec, max, (r) => r.serverCpu), 1),
          fmt(cpu),
          spec === pgpipe ? "1.00x" : formatRatio(cpu / baseCpu),
          Number.isFinite(pg) ? pct(pg, 1) : "-",
          pct(med(spec, max, (r) => r.loadCpu), 1),
          all.map((r) => r.backends).join("/"),
          String(all.reduce((n, r) => n + r.errors, 0)),
        ]);
      }
    }
    const tables: Table[] = [{
      title: `HTTP: GET /users (${PAGE} rows as JSON per request), ${LOAD_CONNECTIONS} ` +
        `keep-alive connections, ${MEASURE_SECONDS} s per run, median of ${ROUNDS} round${
          ROUNDS === 1 ? "" : "s"
        }`,
      head: [
        "driver",
        "runtime",
        "pool",
        "req/s",
        "pgpipe vs it",
        "p50 ms",
        "p99 ms",
        "server CPU",
        "server CPU µs/req",
        "pgpipe vs it (CPU/req)",
        "PostgreSQL CPU",
        "load gen CPU",
        "backends",
        "errors",
      ],
      rows,
    }];

    for (const p of profiles) {
      const s = p.summary;
      tables.push({
        title: `Where the pgpipe server's CPU went, pool ${p.max} (deno run --cpu-prof: main ` +
          `thread busy ${fmt(s.busyMs)} ms of ${fmt(s.totalMs)} ms sampled; the process used ` +
          `${fmt(p.run.cpuSinceStart * 1000)} ms of CPU on all threads; ${fmt(p.run.rps)} req/s ` +
          `while profiled)`,
        head: ["self time in", "ms", "share of busy time"],
        rows: [
          ...s.categories.map((c) => [c.category, fmt(c.ms), pct(c.ms, s.busyMs)]),
          [
            "driver incl. the runtime calls it makes (inclusive)",
            fmt(s.inclusiveMs),
            pct(s.inclusiveMs, s.busyMs),
          ],
        ],
      });
      tables.push({
        title: `Top ${s.top.length} functions by self time, pgpipe server, pool ${p.max}`,
        head: ["function", "where", "self ms", "share of busy time"],
        rows: s.top.map((f) => [f.name, f.location || "(native)", fmt(f.ms), pct(f.ms, s.busyMs)]),
      });
    }

    notes.push(
      `Load generator: ${describeTool(tool, WRK_THREADS)}, ${LOAD_CONNECTIONS} connections, ` +
        `${WARMUP_SECONDS} s warm-up then ${MEASURE_SECONDS} s measured, against a fresh server ` +
        `process per run; rounds rotate which driver starts. Server, load generator and ` +
        `PostgreSQL share the machine's ${navigator.hardwareConcurrency} cores.`,
      "Every server runs the same handler (bench/shared/http_app.ts): select 100 users (int, text, " +
        "timestamptz, bool, numeric, jsonb) by primary key, build an object per row " +
        "(timestamp to an ISO string, numeric to a number) and answer Response.json. Each " +
        "server's first answer is checked against the page PostgreSQL itself builds as JSON.",
      "Server CPU, PostgreSQL CPU (the backends serving the handler) and load gen CPU: CPU " +
        "time per wall second of each during the measured window (100% = one core). Server " +
        "CPU µs/req is the server process's CPU time per request: on a shared machine it " +
        "moves less than req/s, which also depends on how much CPU the server got. Backends: " +
        "connections running the handler's query at the end of each round (the pool really " +
        "opened).",
      "Bun.sql runs in a bun process (Bun.serve, the same handler module); its row compares " +
        "runtime and driver together. pgpipe and postgres.js run under Deno.serve.",
      `CPU profile: one more pgpipe round per pool size under deno run --cpu-prof (sampled ` +
        `every ${PROFILE_INTERVAL_US} µs; not counted in the medians). It covers the main ` +
        `thread, in samples of wall time while the thread was not idle (so time it waited for a ` +
        `core counts too, and busy time can exceed the process's CPU time). "(program)" is ` +
        `native code with no JS frame on the stack; built-ins such as JSON.parse, ` +
        `JSON.stringify and Date#toISOString are charged to the JS function calling them; GC is ` +
        `not charged to whoever allocated. "Inclusive" counts every sample with a driver frame ` +
        `on its stack.`,
      "The machine is shared with other work: compare ratios within one run.",
    );
    await emitReport({ suite: "http", tables, ratios, notes });
  } finally {
    await admin.unsafe(`drop table if exists ${USERS_TABLE}`).catch(() => {});
    await admin.end();
  }
}

await main();
