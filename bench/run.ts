// `deno task bench [--quick] [--only=SUITE,...] [--delay=5] [--out=FILE]`: compares pgpipe with
// its peers in one run. Starts a throwaway PostgreSQL (or uses DATABASE_URL), runs each suite in
// its own process with the URL in PGPIPE_BENCH_URL, prints the tables and a summary of ratios,
// writes bench/RESULTS.md, and always stops the server.
//
// To add a suite: write bench/suites/NAME.ts, which runs its cases on the drivers from
// suiteDrivers() (bench/peers/drivers.ts), starts any fresh process through bench/shared/probe.ts,
// fills a Report (bench/shared/report.ts) and ends with its emit(); then add its line to SUITES.
import { parseArgs } from "node:util";
import { driverReport } from "./shared/bench_json.ts";
import { type Cluster, startCluster } from "./shared/harness.ts";
import { describeMachine } from "./shared/machine.ts";
import { via } from "./shared/env.ts";
import { kill, lastJson, run, running, spawn } from "./shared/probe.ts";
import { renderSuite, renderTable, type SuiteReport, summaryTable } from "./shared/report.ts";
import { resultsMarkdown, type Section } from "./shared/results_md.ts";
import { targetTexts } from "./shared/targets.ts";

/**
 * A suite: bench/suites/NAME.ts, its title in RESULTS.md, the minutes it may take (quick and
 * full: generous, so only a hang hits them; deno-postgres is slow), and whether it has a `-tls`
 * twin: the same file against the same server with `sslmode=require` (PGPIPE_BENCH_TLS=1), its
 * rows beside the plaintext ones. The latency suite has none (its subject is the link); the cold
 * suite measures TLS itself.
 */
const suite = (name: string, title: string, quick: number, full: number, tls = false) => ({
  name,
  title,
  minutes: [quick, full],
  tls,
});

/** Every suite, in the order they run; RESULTS.md numbers them in this order ("Suite 1: ..."). */
const SUITES = [
  suite("driver", "concurrent queries on one connection (deno bench)", 3, 10, true),
  suite("throughput", "throughput and serial latency", 3, 8, true),
  suite("latency", "through a delaying proxy", 3, 8),
  suite("memory", "memory", 2, 3, true),
  suite("cold", "cold start", 1, 3),
  suite("bulk", "bulk load and bulk read", 3, 8, true),
  suite("http", "end to end over HTTP", 4, 12, true),
  suite("telemetry", "what telemetry costs", 2, 5),
  suite("pglite", "PGlite in process, against its own query()", 3, 8),
  suite("orm", "Drizzle and Kysely over pgpipe and postgres.js", 3, 10, true),
  suite("orm_http", "Drizzle under Deno.serve, over pgpipe and postgres.js", 2, 8, true),
  suite("parsers", "what the live parser tables cost a workload without an ORM", 1, 3, true),
  suite("typegen", "typed SQL: the typegen command end to end, 100 to 500 queries", 4, 10),
].map((s, i) => ({ ...s, title: `Suite ${i + 1}: ${s.title}` }));

/** What `--only` names: every suite, each twin right after its plaintext run. */
const RUNS = SUITES.flatMap((s) => s.tls ? [s.name, `${s.name}-tls`] : [s.name]);
const suiteOf = (run: string) => SUITES.find((s) => s.name === run.replace(/-tls$/, ""))!;
const here = new URL(".", import.meta.url).pathname;

const NAMES = SUITES.map((s) => s.name);
const USAGE = `usage: deno task bench [--quick] [--only=${NAMES}] [--delay=MS] [--out=FILE]
  --quick   fewer iterations (smoke run, under 2 minutes)
  --only    run only these suites (comma-separated); a loopback suite's TLS twin is NAME-tls
  --delay   one-way delay of the latency suite's proxy, in ms (default 5)
  --out     where to write the results (default: bench/RESULTS.md after a full run of every
            suite; quick and partial runs write nothing unless --out is given)
DATABASE_URL: benchmark that server (with sslmode=disable) instead of a throwaway one.`;

/** The command line: quick, the runs in their order, the latency proxy's delay, where to write. */
function parseCommand(argv: string[]) {
  const options = {
    quick: { type: "boolean" },
    only: { type: "string" },
    delay: { type: "string", default: "5" },
    out: { type: "string" },
    help: { type: "boolean", short: "h" },
  } as const;
  const { values } = (() => {
    try {
      return parseArgs({ args: argv, options });
    } catch (e) {
      throw new Error(`${(e as Error).message}\n${USAGE}`);
    }
  })();
  if (values.help) {
    console.log(USAGE);
    Deno.exit(0);
  }
  const names = values.only?.split(",").filter(Boolean) ?? RUNS;
  const bad = names.filter((n) => !RUNS.includes(n));
  if (bad.length || !names.length) throw new Error(`--only: unknown suite ${bad}\n${USAGE}`);
  const delay = Number(values.delay);
  if (!(delay >= 0)) throw new Error(`--delay: not a number of ms: ${values.delay}`);
  const only = RUNS.filter((s) => names.includes(s));
  return { quick: values.quick ?? false, only, delay, out: values.out || undefined };
}

/** A TLS twin's report, its figures labelled so, to sit beside the plaintext ones. */
function labelTls(report: SuiteReport): SuiteReport {
  const tag = <T extends { label: string }>(x: T) => ({ ...x, label: `${x.label} (TLS)` });
  const tables = report.tables.map((t) => ({ ...t, title: `${t.title} — TLS, sslmode=require` }));
  return { ...report, tables, ratios: report.ratios.map(tag), measures: report.measures?.map(tag) };
}

/** After a signal no new suite starts: the handler is stopping the server under them. */
let interrupted = false;

/** Runs one suite in its own process and returns its report. */
async function runSuite(name: string, quick: boolean, env: Record<string, string>, dir: string) {
  if (interrupted) throw new Error("interrupted");
  const suite = suiteOf(name);
  const reportFile = `${dir}/${name}.json`;
  const tls = name.endsWith("-tls");
  const timeoutMs = suite.minutes[quick ? 0 : 1] * 60_000;
  const file = `${here}suites/${suite.name}.ts`;
  const flags = ["-A", "--no-lock", "--quiet"];
  // The driver suite runs under `deno bench`, whose JSON (printed even when a bench failed) is
  // read here; every other suite prints its tables as it goes and writes its report to a file.
  const bench = suite.name === "driver";
  const args = bench ? ["bench", ...flags, "--json", file] : ["run", ...flags, file];
  const suiteEnv = { ...env, PGPIPE_BENCH_REPORT: reportFile, PGPIPE_BENCH_TLS: tls ? "1" : "0" };
  const inherit = bench ? "stderr" : true;
  const r = await spawn(Deno.execPath(), args, { env: suiteEnv, timeoutMs, inherit });
  if (r.timedOut) throw new Error(`${name} suite did not finish within ${timeoutMs / 1000} s`);
  let report: SuiteReport;
  try {
    report = bench
      ? driverReport(JSON.parse(r.stdout))
      : JSON.parse(await Deno.readTextFile(reportFile));
  } catch {
    throw new Error(`${name} suite failed (exit code ${r.code}) before reporting`);
  }
  if (tls) report = labelTls(report);
  if (bench) console.log(renderSuite(report));
  if (r.code === 0) return report;
  throw new Error(
    `${name} suite failed${bench ? `:\n${report.notes.join("\n")}` : ` (exit code ${r.code})`}`,
  );
}

/** Starts the throwaway cluster (TLS on) unless DATABASE_URL names a server; the suites' env. */
async function server(starting: (c: Promise<Cluster>) => void): Promise<Record<string, string>> {
  const env: Record<string, string> = {};
  let url = Deno.env.get("DATABASE_URL");
  if (url) console.log("bench: using DATABASE_URL");
  else {
    const cluster = startCluster({ ssl: true, name: "bench" });
    starting(cluster);
    const c = await cluster;
    const { trust, scram } = c.users;
    const at = `@127.0.0.1:${c.port}/${c.database}`;
    url = `postgres://${trust.user}${at}`;
    env.PGPIPE_BENCH_CA = c.caCertPath!;
    const secret = encodeURIComponent(scram.password);
    env.PGPIPE_BENCH_SCRAM_URL = `postgres://${scram.user}:${secret}${at}`;
  }
  // The plaintext suites say sslmode=disable, their -tls twins require.
  const [plain, tls] = [via(url, 0, { sslmode: "disable" }), via(url, 0, { sslmode: "require" })];
  return { ...env, PGPIPE_BENCH_URL: plain, PGPIPE_BENCH_TLS_URL: tls };
}

async function main(): Promise<number> {
  const args = parseCommand(Deno.args);
  const startedAt = new Date();
  const t0 = performance.now();
  // Which peers load here, asked in a child with --no-lock so no deno.lock is written.
  type Loaded = { drivers: { name: string; source: string }[]; skipped: string[] };
  const driversArgs = ["run", "-A", "--no-lock", "--quiet", `${here}peers/drivers.ts`];
  const probe = lastJson<Loaded>(await run(Deno.execPath(), driversArgs, { timeoutMs: 120_000 }));
  for (const s of probe.skipped) console.log(s);
  const names = probe.drivers.map((d) => d.name);

  // Suite reports pass through here (the prefix differs from the cluster's "pgpipe-bench-").
  const dir = await Deno.makeTempDir({ prefix: "pgpipe-reports-" });
  let cluster: Promise<Cluster> | undefined;
  let stopping: Promise<void> | undefined;
  const stop = async () => {
    stopping ??= (cluster ?? Promise.resolve(undefined)).then((c) => c?.stop(), () => {});
    await stopping;
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  };
  for (const [sig, code] of [["SIGINT", 130], ["SIGTERM", 143]] as const) {
    Deno.addSignalListener(sig, async () => {
      console.error(`bench: ${sig}: stopping`);
      interrupted = true;
      running.forEach(kill);
      await stop();
      Deno.exit(code);
    });
  }

  try {
    const env = await server((c) => cluster = c);
    const machine = await describeMachine(env.PGPIPE_BENCH_URL);
    const { server: version, cpu, cores, deno } = machine;
    console.log(`bench: ${version}; ${cpu}, ${cores} cores; Deno ${deno}`);
    const quick = args.quick ? " (quick)" : "";
    console.log(`bench: drivers ${names.join(", ")}; suites ${args.only.join(", ")}${quick}`);
    Object.assign(env, {
      PGPIPE_BENCH_DRIVERS: names.join(","),
      PGPIPE_BENCH_QUICK: args.quick ? "1" : "0",
      PGPIPE_BENCH_DELAY: String(args.delay),
    });
    const sections: Section[] = [];
    const failures: string[] = [];
    for (const name of args.only) {
      if (interrupted) break;
      console.log(`\nbench: suite ${name}...`);
      const s0 = performance.now();
      try {
        const report = await runSuite(name, args.quick, env, dir);
        sections.push({ run: name, title: suiteOf(name).title, report });
      } catch (e) {
        failures.push((e as Error).message);
        console.error(`bench: ${(e as Error).message}`);
      }
      console.log(`bench: suite ${name} took ${((performance.now() - s0) / 1000).toFixed(0)} s`);
    }
    if (interrupted) return 130; // the signal handler is stopping everything

    const ratios = sections.flatMap((s) => s.report.ratios);
    const summary = summaryTable(ratios, sections.flatMap((s) => s.report.measures ?? []));
    console.log("\n" + renderTable(summary));
    console.log("\nSpeed targets (reported, not enforced): " + targetTexts().join("; "));
    const seconds = (performance.now() - t0) / 1000;
    const full = !args.quick && args.only.length === RUNS.length;
    const out = args.out ?? (full ? `${here}RESULTS.md` : undefined);
    if (out) {
      // The command as a reader would type it: --out names a file of this machine.
      const given = Deno.args.filter((a, i, x) => !a.startsWith("--out") && x[i - 1] !== "--out");
      const command = ["deno task bench", ...given].join(" ");
      const run = { command, machine, sections, failures, summary, startedAt, seconds };
      const ownServer = cluster !== undefined;
      const md = resultsMarkdown({ ...run, ...probe, quick: args.quick, ownServer });
      await Deno.writeTextFile(out, md);
      // The file lives in the repository, whose check runs `deno fmt --check`: leave it formatted.
      const fmt = await spawn(Deno.execPath(), ["fmt", "--quiet", out], { timeoutMs: 60_000 });
      if (fmt.code !== 0) console.error(`bench: deno fmt ${out} failed: ${fmt.stderr}`);
      console.log(`bench: wrote ${out}`);
    }
    console.log(`bench: done in ${seconds.toFixed(0)} s`);
    for (const f of failures) console.error(`bench: FAILED: ${f.split("\n")[0]}`);
    return failures.length ? 1 : 0;
  } finally {
    await stop();
  }
}

try {
  Deno.exit(await main());
} catch (e) {
  console.error(`bench: ${(e as Error).message}`);
  Deno.exit(1);
}
