// End to end over HTTP. A server answers `GET /users` with 100 rows of a seeded table
// as JSON (http_app.ts: the same handler code for every driver), and a load generator in its
// own process (wrk, else http_load.ts) keeps 50 keep-alive connections busy. Each driver's
// server runs with a pool of 1 and of 4 connections, in several rounds with the starting driver
// rotated; the medians are compared. Drivers: pgpipe and postgres.js under Deno.serve, and
// Bun.sql under Bun.serve where a bun binary is found (bun.ts). One more pgpipe round per pool
// size runs under `deno run --cpu-prof` to show how much of the server's CPU the driver takes.
import { join } from "node:path";
import postgres from "../../mod.ts";
import { findBun } from "../peers/bun.ts";
import { suiteDrivers } from "../peers/drivers.ts";
import { cpuMs } from "../shared/cpu.ts";
import { type CpuProfile, summarizeProfile } from "../shared/cpu_profile.ts";
import { benchUrl, isQuick } from "../shared/env.ts";
import { expectedPage, PAGE, SEED_SQL, USERS_TABLE } from "../shared/http_app.ts";
import { chooseLoadTool, describeTool, type LoadTool } from "../shared/loadgen.ts";
import { denoArgs, inRepo, probePath, tempDir } from "../shared/probe.ts";
import { loadServer } from "../shared/server.ts";
import { fmt, formatRatio, pct, Report } from "../shared/report.ts";
import { median, rotated } from "../shared/stats.ts";

const quick = isQuick();
const url = benchUrl();
const [ROUNDS, WARMUP_SECONDS, MEASURE_SECONDS] = quick ? [1, 1, 2] : [3, 3, 10];
const plural = ROUNDS === 1 ? "" : "s";
const [LOAD_CONNECTIONS, WRK_THREADS, POOLS, PROFILE_INTERVAL_US] = [50, 1, [1, 4], 500];
const root = new URL("../..", import.meta.url).href;
const log = (s: string) => console.log(`http: ${s}`);
const report = new Report("http");

/** How to start a driver's server: its command for a pool of `max`, under `--cpu-prof` into dir. */
type Server = { name: string; runtime: string; command(max: number, dir?: string): string[] };

const denoServer = (name: string): Server => ({
  name,
  runtime: `Deno ${Deno.version.deno}`,
  command: (max, dir) => {
    const interval = `--cpu-prof-interval=${PROFILE_INTERVAL_US}`;
    const prof = dir ? ["--cpu-prof", `--cpu-prof-dir=${dir}`, interval] : [];
    return [Deno.execPath(), ...denoArgs("http_server.ts", [name, max, url], prof)];
  },
});

/** The client the suite itself uses: seeding, the expected answer, counting backends. */
const admin = postgres(url, { max: 1, onnotice: () => {} });

/** Backends whose last query is the handler's: the connections the server really uses. */
async function handlerBackends(): Promise<number[]> {
  const rows = await admin`select pid from pg_stat_activity
    where pid <> pg_backend_pid() and query like ${"%from " + USERS_TABLE + "%"}`;
  return rows.map((r) => r.pid as number);
}

/** CPU seconds a process used so far (NaN where /proc does not show it: a remote server). */
const cpuSeconds = (pid: number) => (cpuMs(pid) ?? NaN) / 1000;
const backendsCpuSeconds = (pids: number[]) => pids.reduce((n, pid) => n + cpuSeconds(pid), 0);

/**
 * One measured run of one server: its rate and latencies, and CPU per wall second (1 = one core)
 * of the server, the PostgreSQL backends serving it (NaN where not measurable) and the load
 * generator; the server's CPU µs per request (what contention for the cores does not change);
 * and the CPU seconds the server used from its start to the end of the window.
 */
type Run = Awaited<ReturnType<typeof measure>>;

async function measure(tool: LoadTool, server: Server, max: number, page: unknown, dir?: string) {
  let pids: number[] | undefined;
  const read = async (pid: number) => {
    pids ??= await handlerBackends(); // every connection has served the handler by now
    const [cpu, pg] = [cpuSeconds(pid), backendsCpuSeconds(pids)];
    return { cpu, pg, backends: (await handlerBackends()).length };
  };
  const plan = {
    tool,
    connections: LOAD_CONNECTIONS,
    threads: WRK_THREADS,
    warmupSeconds: WARMUP_SECONDS,
    seconds: MEASURE_SECONDS,
  };
  const command = server.command(max, dir);
  const { load, before, after } = await loadServer(server.name, command, page, plan, read);
  return {
    rps: load.requests / load.seconds,
    p50Ms: load.p50Ms,
    p99Ms: load.p99Ms,
    serverCpu: (after.cpu - before.cpu) / load.seconds,
    cpuPerRequestUs: ((after.cpu - before.cpu) * 1e6) / load.requests,
    postgresCpu: (after.pg - before.pg) / load.seconds,
    loadCpu: load.cpuSeconds / load.seconds,
    errors: load.errors,
    backends: after.backends,
    cpuSinceStart: after.cpu,
  };
}

// ------------------------------------------------------------------ the CPU profile

const DRIVER = "driver (src/, mod.ts)";

function classify(fileUrl: string, functionName: string): string {
  if (fileUrl.startsWith(root + "src/") || fileUrl === root + "mod.ts") return DRIVER;
  if (fileUrl.startsWith(root + "bench/")) return "handler and server (bench/)";
  if (/^(ext|node):/.test(fileUrl)) return "Deno runtime JS (ext:, node:)";
  if (fileUrl !== "") return "other";
  if (functionName === "(garbage collector)") return "garbage collector";
  if (functionName === "(program)") return "(program): native code, no JS frame";
  if (functionName.startsWith("op_")) return "Deno ops (native op_*: text decoding, sockets, HTTP)";
  return "other native frames";
}

/** A frame's file as the report names it: its path in the repository, never this machine's. */
const shorten = (u: string) =>
  u.startsWith("file:") && !u.startsWith(root) ? "(outside the repository)" : inRepo(u);

/** One extra pgpipe round under --cpu-prof, reported apart (profiling slows it): two tables. */
async function profiled(tool: LoadTool, pgpipe: Server, max: number, page: unknown) {
  await using dir = await tempDir("pgpipe-http-prof-");
  const run = await measure(tool, pgpipe, max, page, dir.path);
  const files = [...Deno.readDirSync(dir.path)].filter((e) => e.name.endsWith(".cpuprofile"));
  if (files.length !== 1) throw new Error(`expected one .cpuprofile, found ${files.length}`);
  const profile = JSON.parse(await Deno.readTextFile(join(dir.path, files[0].name))) as CpuProfile;
  const s = summarizeProfile(profile, classify, { inclusiveCategory: DRIVER, top: 10, shorten });
  const share = (ms: number) => pct(ms, s.busyMs);
  const row = (what: string, ms: number) => [what, fmt(ms), share(ms)];
  const [rps, busy, total] = [run.rps, s.busyMs, s.totalMs].map((x) => fmt(x));
  const used = fmt(run.cpuSinceStart * 1000);
  const driver = share(s.categories.find((c) => c.category === DRIVER)?.ms ?? 0);
  log(`pgpipe, pool ${max}, --cpu-prof: ${rps} req/s; driver ${driver} of the busy main thread`);
  report.table(
    `Where the pgpipe server's CPU went, pool ${max} (deno run --cpu-prof: main thread busy ${busy} ms of ${total} ms sampled; the process used ${used} ms of CPU on all threads; ${rps} req/s while profiled)`,
    "self time in | ms | share of busy time",
    [
      ...s.categories.map((c) => row(c.category, c.ms)),
      row("driver incl. the runtime calls it makes (inclusive)", s.inclusiveMs),
    ],
  );
  report.table(
    `Top ${s.top.length} functions by self time, pgpipe server, pool ${max}`,
    "function | where | self ms | share of busy time",
    s.top.map((f) => [f.name, f.location || "(native)", fmt(f.ms), share(f.ms)]),
  );
}

// ------------------------------------------------------------------ the suite

/** Every server with each pool size, ROUNDS rounds rotating which starts; runs by server/pool. */
async function rounds(tool: LoadTool, servers: Server[], expected: unknown) {
  const runs = new Map<string, Run[]>();
  for (const max of POOLS) {
    await rotated(ROUNDS, servers, async (server, r) => {
      const run = await measure(tool, server, max, expected);
      const [rps, p50, p99] = [fmt(run.rps), fmt(run.p50Ms, 2), fmt(run.p99Ms, 2)];
      const perRequest = fmt(run.cpuPerRequestUs);
      const [ours, pg, load] = [run.serverCpu, run.postgresCpu, run.loadCpu].map((x) => pct(x));
      const round = `${server.name}, pool ${max}, round ${r + 1}`;
      log(
        `${round}: ${rps} req/s, p50 ${p50} ms, p99 ${p99} ms, server CPU ${ours} (${perRequest} µs/req), PostgreSQL CPU ${pg}, load generator CPU ${load}`,
      );
      const key = `${server.name}/${max}`;
      runs.set(key, [...runs.get(key) ?? [], run]);
    });
  }
  return runs;
}

/** The results table (medians per driver and pool) and pgpipe's ratios to each peer. */
function results(servers: Server[], runs: Map<string, Run[]>): void {
  const rows: string[][] = [];
  for (const max of POOLS) {
    const conns = `${max} connection${max === 1 ? "" : "s"}`;
    const med = (name: string, k: keyof Run) =>
      median(runs.get(`${name}/${max}`)?.map((r) => r[k]) ?? []);
    const [base, baseCpu] = [med("pgpipe", "rps"), med("pgpipe", "cpuPerRequestUs")];
    for (const { name, runtime } of servers) {
      const [rps, cpu] = [med(name, "rps"), med(name, "cpuPerRequestUs")];
      const pg = med(name, "postgresCpu");
      if (name !== "pgpipe") {
        report.ratio(`req/s, ${conns}`, name, base / rps);
        report.ratio(`server CPU per request (lower is better), ${conns}`, name, cpu / baseCpu);
      }
      const all = runs.get(`${name}/${max}`)!;
      rows.push([
        name,
        runtime,
        String(max),
        fmt(rps),
        formatRatio(base / rps),
        fmt(med(name, "p50Ms"), 2),
        fmt(med(name, "p99Ms"), 2),
        pct(med(name, "serverCpu")),
        fmt(cpu),
        formatRatio(cpu / baseCpu),
        Number.isFinite(pg) ? pct(pg) : "-",
        pct(med(name, "loadCpu")),
        all.map((r) => r.backends).join("/"),
        String(all.reduce((n, r) => n + r.errors, 0)),
      ]);
    }
  }
  report.table(
    `HTTP: GET /users (${PAGE} rows as JSON per request), ${LOAD_CONNECTIONS} keep-alive connections, ${MEASURE_SECONDS} s per run, median of ${ROUNDS} round${plural}`,
    "driver | runtime | pool | req/s | pgpipe vs it | p50 ms | p99 ms | server CPU | server CPU µs/req | pgpipe vs it (CPU/req) | PostgreSQL CPU | load gen CPU | backends | errors",
    rows,
  );
}

const notesOf = (tool: string) => [
  `Load generator: ${tool}, ${LOAD_CONNECTIONS} connections, ${WARMUP_SECONDS} s warm-up then ${MEASURE_SECONDS} s measured, against a fresh server process per run; rounds rotate which driver starts. Server, load generator and PostgreSQL share the machine's ${navigator.hardwareConcurrency} cores.`,
  "Every server runs the same handler (bench/shared/http_app.ts): select 100 users (int, text, timestamptz, bool, numeric, jsonb) by primary key, build an object per row (timestamp to an ISO string, numeric to a number) and answer Response.json. Each server's first answer is checked against the page PostgreSQL itself builds as JSON.",
  "Server CPU, PostgreSQL CPU (the backends serving the handler) and load gen CPU: CPU time per wall second of each during the measured window (100% = one core). Server CPU µs/req is the server process's CPU time per request: on a shared machine it moves less than req/s, which also depends on how much CPU the server got. Backends: connections running the handler's query at the end of each round (the pool really opened).",
  "Bun.sql runs in a bun process (Bun.serve, the same handler module); its row compares runtime and driver together. pgpipe and postgres.js run under Deno.serve.",
  `CPU profile: one more pgpipe round per pool size under deno run --cpu-prof (sampled every ${PROFILE_INTERVAL_US} µs; not counted in the medians). It covers the main thread, in samples of wall time while the thread was not idle (so time it waited for a core counts too, and busy time can exceed the process's CPU time). "(program)" is native code with no JS frame on the stack; built-ins such as JSON.parse, JSON.stringify and Date#toISOString are charged to the JS function calling them; GC is not charged to whoever allocated. "Inclusive" counts every sample with a driver frame on its stack.`,
  "The machine is shared with other work: compare ratios within one run.",
];

const servers = (await suiteDrivers(["pgpipe", "postgres.js"])).map((d) => denoServer(d.name));
const bun = await findBun(log);
const notes = "skip" in bun ? [bun.skip] : [];
if ("path" in bun) {
  const command = (max: number) => [bun.path, probePath("http_server_bun.ts"), String(max), url];
  servers.push({ name: "Bun.sql", runtime: `Bun ${bun.version}`, command });
  log(`Bun ${bun.version} (${bun.path})`);
} else log(bun.skip);
const tool = chooseLoadTool();
log(`load generator: ${describeTool(tool, WRK_THREADS)}`);
try {
  for (const q of SEED_SQL) await admin.unsafe(q);
  const expected = await expectedPage(admin, "score");
  const runs = await rounds(tool, servers, expected);
  const pgpipe = servers.find((s) => s.name === "pgpipe");
  results(servers, runs);
  for (const max of pgpipe ? POOLS : []) await profiled(tool, pgpipe!, max, expected);
  report.note(...notes, ...notesOf(describeTool(tool, WRK_THREADS)));
  await report.emit();
} finally {
  await admin.unsafe(`drop table if exists ${USERS_TABLE}`).catch(() => {});
  await admin.end();
}
