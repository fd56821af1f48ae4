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
import { chooseLoadTool, describeTool, type LoadTool } from "../shared/loadgen.ts";
import { denoArgs } from "../shared/probe.ts";
import { fmt, formatRatio, Report } from "../shared/report.ts";
import { loadServer } from "../shared/server.ts";
import { conns } from "../shared/stacks.ts";
import { percentile, rotated } from "../shared/stats.ts";

const quick = isQuick();
const url = benchUrl();
/** The pool sizes: one connection (the case), and postgres.js's default. */
const POOLS = [1, 10];
const HTTP_ROUNDS = quick ? 1 : 3;
const HTTP_WARMUP_SECONDS = quick ? 1 : 3;
const HTTP_SECONDS = quick ? 2 : 8;
const LOAD_CONNECTIONS = 50;
const PG = "postgres.js";
const PGPIPE = "pgpipe";
const FORCED = "pgpipe, force_prepare";
const log = (s: string) => console.log(`orm_http: ${s}`);
const admin = postgres(url, { max: 1, ssl: sslOf(url), onnotice: () => {} });

/** One HTTP server variant: the driver under Drizzle, and the extra flag. */
interface HttpVariant {
  name: string;
  driver: "pgpipe" | "postgres.js";
  flag?: "force_prepare";
}
const HTTP_VARIANTS: HttpVariant[] = [
  { name: PG, driver: "postgres.js" },
  { name: PGPIPE, driver: "pgpipe" },
  { name: FORCED, driver: "pgpipe", flag: "force_prepare" },
];

interface HttpRun {
  rps: number;
  p50Ms: number;
  p99Ms: number;
  /** CPU µs per request: the server process, and PostgreSQL's processes. */
  serverUs: number;
  postgresUs: number;
  errors: number;
}

async function measureHttp(
  tool: LoadTool,
  v: HttpVariant,
  max: number,
  expected: unknown,
  postmaster: number | undefined,
): Promise<HttpRun> {
  const handler = v.flag ? `drizzle-${v.flag}` : "drizzle";
  const command = [Deno.execPath(), ...denoArgs("http_server.ts", [v.driver, max, url, handler])];
  const plan = {
    tool,
    connections: LOAD_CONNECTIONS,
    threads: 1,
    warmupSeconds: HTTP_WARMUP_SECONDS,
    seconds: HTTP_SECONDS,
  };
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

async function http(report: Report, postmaster: number | undefined): Promise<void> {
  const tool = chooseLoadTool();
  log(`load generator: ${describeTool(tool, 1)}`);
  const expected = await expectedPage(admin, "score::text");
  const runs = new Map<string, HttpRun[]>();
  for (const max of POOLS) {
    await rotated(HTTP_ROUNDS, HTTP_VARIANTS, async (v, round) => {
      const run = await measureHttp(tool, v, max, expected, postmaster);
      log(
        `HTTP ${v.name}, pool ${max}, round ${round + 1}: ${fmt(run.rps)} req/s, ` +
          `server ${fmt(run.serverUs)} µs/req, PostgreSQL ${fmt(run.postgresUs)} µs/req`,
      );
      runs.set(`${max}/${v.name}`, [...runs.get(`${max}/${v.name}`) ?? [], run]);
    });
  }
  const rows: string[][] = [];
  for (const max of POOLS) {
    const med = (name: string, f: (r: HttpRun) => number) =>
      percentile(runs.get(`${max}/${name}`)!.map(f), 50);
    const base = med(PG, (r) => r.rps);
    for (const v of HTTP_VARIANTS) {
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
      `keep-alive connections, ${HTTP_SECONDS} s per run, median of ${HTTP_ROUNDS} rotated ` +
      `round${HTTP_ROUNDS === 1 ? "" : "s"}`,
    "driver under Drizzle | pool | req/s | vs postgres.js | p50 ms | p99 ms | server CPU µs/req | PostgreSQL CPU µs/req | errors",
    rows,
  );
  report.note(
    `HTTP: ${describeTool(tool, 1)}, ${HTTP_WARMUP_SECONDS} s warm-up then ${HTTP_SECONDS} s ` +
      `measured, a fresh server process per run (bench/probes/http_server.ts: ` +
      `db.select().from(users).where(gt(users.id, after)).orderBy(users.id).limit(${PAGE}), ` +
      `answered with Response.json); each server's first answer is checked against the page ` +
      `PostgreSQL builds. Server, load generator and PostgreSQL share the machine's ` +
      `${navigator.hardwareConcurrency} cores; CPU µs/req moves less than req/s with contention.`,
  );
}

const postmaster = await ask(plainBenchUrl(), "select pg_backend_pid()", localPostmaster);
const report = new Report("orm_http");
try {
  for (const q of SEED_SQL) await admin.unsafe(q);
  await http(report, postmaster);
  report.note("The machine is shared: compare ratios within one run.");
} finally {
  await admin.unsafe(`drop table if exists ${USERS_TABLE}`).catch(() => {});
  await admin.end();
}
await report.emit();
