// An ORM's cost end to end over HTTP: the orm suite's Drizzle program (drizzle-orm/postgres-js)
// as a Deno.serve handler answering 100 rows as JSON (bench/probes/http_server.ts), under
// load (wrk, else http_load.ts), over postgres.js, over pgpipe and over pgpipe with
// `force_prepare`, with one connection and with postgres.js's default pool of 10, in rounds with
// the starting driver rotated; each server's first answer is checked, and the rates come with
// the CPU each request cost the server process and PostgreSQL.
import postgres from "../../mod.ts";
import { ask } from "../shared/ask.ts";
import { cpuMs, localPostmaster, serverCpuMs } from "../shared/cpu.ts";
import { benchUrl, isQuick, plainBenchUrl, sslOf } from "../shared/env.ts";
import { expectedPage, PAGE, SEED_SQL, USERS_TABLE } from "../shared/http_app.ts";
import { chooseLoadTool, describeTool } from "../shared/loadgen.ts";
import { denoArgs } from "../shared/probe.ts";
import { fmt, formatRatio, Report } from "../shared/report.ts";
import { loadServer } from "../shared/server.ts";
import { conns } from "../shared/stacks.ts";
import { median, rotated } from "../shared/stats.ts";

const url = benchUrl();
/** The pool sizes: one connection (the case), and postgres.js's default. */
const POOLS = [1, 10];
const [ROUNDS, WARMUP_SECONDS, SECONDS] = isQuick() ? [1, 1, 2] : [3, 3, 8];
const LOAD_CONNECTIONS = 50;
const PG = "postgres.js";
const log = (s: string) => console.log(`orm_http: ${s}`);
const admin = postgres(url, { max: 1, ssl: sslOf(url), onnotice: () => {} });
const postmaster = await ask(plainBenchUrl(), "select pg_backend_pid()", localPostmaster);
const tool = chooseLoadTool();
const plan = {
  tool,
  connections: LOAD_CONNECTIONS,
  threads: 1,
  warmupSeconds: WARMUP_SECONDS,
  seconds: SECONDS,
};

/** One HTTP server variant: the driver under Drizzle, and the extra flag. */
type Variant = { name: string; driver: "pgpipe" | "postgres.js"; flag?: "force_prepare" };
const VARIANTS: Variant[] = [
  { name: PG, driver: "postgres.js" },
  { name: "pgpipe", driver: "pgpipe" },
  { name: "pgpipe, force_prepare", driver: "pgpipe", flag: "force_prepare" },
];

/** One run: req/s, latencies, and CPU µs per request of the server process and PostgreSQL's. */
async function measure(v: Variant, max: number, expected: unknown) {
  const handler = v.flag ? `drizzle-${v.flag}` : "drizzle";
  const command = [Deno.execPath(), ...denoArgs("http_server.ts", [v.driver, max, url, handler])];
  const pg = () => postmaster === undefined ? NaN : serverCpuMs(postmaster);
  const read = (pid: number) => ({ server: cpuMs(pid) ?? NaN, postgres: pg() });
  const { load, before, after } = await loadServer(v.name, command, expected, plan, read);
  const us = 1000 / load.requests;
  return {
    rps: load.requests / load.seconds,
    p50Ms: load.p50Ms,
    p99Ms: load.p99Ms,
    serverUs: (after.server - before.server) * us,
    postgresUs: (after.postgres - before.postgres) * us,
    errors: load.errors,
  };
}
type Run = Awaited<ReturnType<typeof measure>>;

const report = new Report("orm_http");
const runs = new Map<string, Run[]>();
log(`load generator: ${describeTool(tool, 1)}`);
try {
  for (const q of SEED_SQL) await admin.unsafe(q);
  const expected = await expectedPage(admin, "score::text");
  for (const max of POOLS) {
    await rotated(ROUNDS, VARIANTS, async (v, round) => {
      const run = await measure(v, max, expected);
      log(
        `HTTP ${v.name}, pool ${max}, round ${round + 1}: ${fmt(run.rps)} req/s, ` +
          `server ${fmt(run.serverUs)} µs/req, PostgreSQL ${fmt(run.postgresUs)} µs/req`,
      );
      runs.set(`${max}/${v.name}`, [...runs.get(`${max}/${v.name}`) ?? [], run]);
    });
  }
} finally {
  await admin.unsafe(`drop table if exists ${USERS_TABLE}`).catch(() => {});
  await admin.end();
}
const rows: string[][] = [];
for (const max of POOLS) {
  const med = (name: string, f: (r: Run) => number) => median(runs.get(`${max}/${name}`)!.map(f));
  const base = med(PG, (r) => r.rps);
  for (const v of VARIANTS) {
    const rps = med(v.name, (r) => r.rps);
    if (v.name !== PG) {
      const label = v.flag ? "Drizzle HTTP with force_prepare" : "Drizzle HTTP";
      report.ratio(`${label}: req/s, ${conns(max)}`, PG, rps / base);
    }
    rows.push([
      v.name,
      String(max),
      fmt(rps),
      v.name === PG ? "1.00x" : formatRatio(rps / base),
      fmt(med(v.name, (r) => r.p50Ms), 2),
      fmt(med(v.name, (r) => r.p99Ms), 2),
      fmt(med(v.name, (r) => r.serverUs)),
      fmt(med(v.name, (r) => r.postgresUs)),
      String(runs.get(`${max}/${v.name}`)!.reduce((n, r) => n + r.errors, 0)),
    ]);
  }
}
report.table(
  `Drizzle under Deno.serve: GET /users (${PAGE} rows as JSON), ${LOAD_CONNECTIONS} ` +
    `keep-alive connections, ${SECONDS} s per run, median of ${ROUNDS} rotated ` +
    `round${ROUNDS === 1 ? "" : "s"}`,
  "driver under Drizzle | pool | req/s | vs postgres.js | p50 ms | p99 ms | server CPU µs/req | PostgreSQL CPU µs/req | errors",
  rows,
);
report.note(
  `HTTP: ${describeTool(tool, 1)}, ${WARMUP_SECONDS} s warm-up then ${SECONDS} s ` +
    `measured, a fresh server process per run (bench/probes/http_server.ts: ` +
    `db.select().from(users).where(gt(users.id, after)).orderBy(users.id).limit(${PAGE}), ` +
    `answered with Response.json); each server's first answer is checked against the page ` +
    `PostgreSQL builds. Server, load generator and PostgreSQL share the machine's ` +
    `${navigator.hardwareConcurrency} cores; CPU µs/req moves less than req/s with contention.`,
  "The machine is shared: compare ratios within one run.",
);
await report.emit();
