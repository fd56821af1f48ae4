// `deno task bench [--quick] [--only=driver,throughput,latency,memory,cold,bulk,http,telemetry] [--delay=5] [--out=FILE]`:
// compares pgpipe with its peers in one run. Starts a throwaway PostgreSQL (or uses
// DATABASE_URL), runs each suite in its own process with the URL in PGPIPE_BENCH_URL, prints
// the tables and a summary of ratios, writes bench/RESULTS.md, and always stops the server.
import { join } from "node:path";
import { type Cluster, startCluster } from "../test/harness/cluster.ts";
import { driverReport } from "./shared/bench_json.ts";
import { skipLine, type Skipped } from "./peers/drivers.ts";
import { describeMachine } from "./shared/machine.ts";
import { renderSuite, renderTable, type SuiteReport, summaryTable } from "./shared/report.ts";
import { resultsMarkdown } from "./shared/results_md.ts";
import { targetTexts } from "./shared/targets.ts";

/**
 * A loopback suite's `-tls` twin runs the same file against the same server with
 * `sslmode=require` (PGPIPE_BENCH_TLS=1); its rows sit beside the plaintext ones. The latency
 * suite has none (its subject is the link), and the cold suite measures TLS itself.
 */
const SUITES = [
  "driver",
  "driver-tls",
  "throughput",
  "throughput-tls",
  "latency",
  "memory",
  "memory-tls",
  "cold",
  "bulk",
  "bulk-tls",
  "http",
  "http-tls",
  "telemetry",
] as const;
type Suite = typeof SUITES[number];

const here = new URL(".", import.meta.url).pathname;
/** Each suite is one file named after it: `--only=latency` runs bench/suites/latency.ts. */
const suiteFile = (suite: Suite) => join(here, "suites", `${suite.replace(/-tls$/, "")}.ts`);
const isTlsSuite = (suite: Suite) => suite.endsWith("-tls");

/** A TLS variant's report, its figures labelled so, to sit beside the plaintext ones. */
function labelTls(report: SuiteReport): SuiteReport {
  const tag = (s: string) => `${s} (TLS)`;
  return {
    ...report,
    tables: report.tables.map((t) => ({ ...t, title: `${t.title} — TLS, sslmode=require` })),
    ratios: report.ratios.map((r) => ({
      ...r,
      label: r.label.endsWith(" (TLS)") ? r.label : tag(r.label),
    })),
    measures: report.measures?.map((m) => ({
      ...m,
      label: m.label.endsWith(" (TLS)") ? m.label : tag(m.label),
    })),
  };
}
const USAGE = [
  "usage: deno task bench [--quick] [--only=driver,throughput,latency,memory,cold,bulk,http,telemetry] [--delay=MS] [--out=FILE]",
  "  --quick   fewer iterations (smoke run, under 2 minutes)",
  "  --only    run only these suites (comma-separated); a loopback suite's TLS twin is NAME-tls",
  "  --delay   one-way delay of the latency suite's proxy, in ms (default 5)",
  "  --out     where to write the results (default: bench/RESULTS.md after a full run of every",
  "            suite; quick and partial runs write nothing unless --out is given)",
  "DATABASE_URL: benchmark that server (with sslmode=disable) instead of a throwaway one.",
].join("\n");

/** Parsed command line. */
interface Args {
  quick: boolean;
  only: Suite[];
  delay: number;
  out?: string;
}

function parseArgs(argv: string[]): Args {
  const args: Args = { quick: false, only: [...SUITES], delay: 5 };
  for (const a of argv) {
    const [flag, value] = a.includes("=")
      ? [a.slice(0, a.indexOf("=")), a.slice(a.indexOf("=") + 1)]
      : [a, ""];
    if (flag === "--quick") args.quick = true;
    else if (flag === "--only") {
      const names = value.split(",").filter(Boolean);
      const bad = names.filter((n) => !SUITES.includes(n as Suite));
      if (bad.length || !names.length) {
        throw new Error(`--only: unknown suite ${bad.join(",")}\n${USAGE}`);
      }
      args.only = SUITES.filter((s) => names.includes(s));
    } else if (flag === "--delay") {
      args.delay = Number(value);
      if (!(args.delay >= 0)) throw new Error(`--delay: not a number of ms: ${value}`);
    } else if (flag === "--out" && value) args.out = value;
    else if (flag === "--help" || flag === "-h") {
      console.log(USAGE);
      Deno.exit(0);
    } else throw new Error(`unknown argument ${a}\n${USAGE}`);
  }
  return args;
}

/** The plaintext URL a suite gets (its `-tls` twin gets the same with sslmode=require). */
function plainUrl(url: string): string {
  const u = new URL(url);
  u.searchParams.set("sslmode", "disable");
  return u.toString();
}

// The child process currently running, so a signal can stop it too; after a signal no new one
// is started (the handler is stopping the server under it).
let child: Deno.ChildProcess | undefined;
let interrupted = false;

/** Runs `deno ARGS` with env; stdout captured or passed through; killed after timeoutMs. */
async function deno(
  args: string[],
  env: Record<string, string>,
  opts: { capture: boolean; timeoutMs: number },
): Promise<{ code: number; stdout: string; timedOut: boolean }> {
  if (interrupted) throw new Error("interrupted");
  child = new Deno.Command(Deno.execPath(), {
    args,
    env,
    stdin: "null",
    stdout: opts.capture ? "piped" : "inherit",
    stderr: "inherit",
  }).spawn();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    try {
      child?.kill("SIGKILL");
    } catch { /* already gone */ }
  }, opts.timeoutMs);
  try {
    const [status, stdout] = await Promise.all([
      child.status,
      opts.capture ? new Response(child.stdout).text() : Promise.resolve(""),
    ]);
    return { code: status.code, stdout, timedOut };
  } finally {
    clearTimeout(timer);
    child = undefined;
  }
}

/** Which peers load here, asked in a child with --no-lock so no deno.lock is written. */
async function probeDrivers(): Promise<
  { names: string[]; drivers: { name: string; source: string }[]; skipped: Skipped[] }
> {
  const r = await deno(
    ["run", "-A", "--no-lock", "--quiet", join(here, "peers", "drivers.ts")],
    {},
    {
      capture: true,
      timeoutMs: 120_000,
    },
  );
  if (r.code !== 0) throw new Error(`could not load the drivers (exit code ${r.code})`);
  const out = JSON.parse(r.stdout) as {
    drivers: { name: string; source: string }[];
    skipped: Skipped[];
  };
  return { names: out.drivers.map((d) => d.name), drivers: out.drivers, skipped: out.skipped };
}

/**
 * Time allowed per suite; generous against the usual durations, so only a hang hits it (a
 * driver without pipelining, deno-postgres, makes the first three take minutes longer).
 */
function suiteTimeout(suite: Suite, quick: boolean): number {
  const minutes: Record<string, number> = {
    driver: quick ? 3 : 10,
    throughput: quick ? 3 : 8,
    latency: quick ? 3 : 8,
    memory: quick ? 2 : 3,
    cold: quick ? 1 : 3,
    bulk: quick ? 3 : 8,
    http: quick ? 4 : 12,
    telemetry: quick ? 2 : 5,
  };
  return minutes[suite.replace(/-tls$/, "")] * 60_000;
}

/** Runs one suite in its own process and returns its report. */
async function runSuite(
  suite: Suite,
  args: Args,
  env: Record<string, string>,
  dir: string,
): Promise<SuiteReport> {
  const reportFile = join(dir, `${suite}.json`);
  const suiteEnv = {
    ...env,
    PGPIPE_BENCH_REPORT: reportFile,
    PGPIPE_BENCH_TLS: isTlsSuite(suite) ? "1" : "0",
  };
  const timeoutMs = suiteTimeout(suite, args.quick);
  const flags = ["-A", "--no-lock", "--quiet"];
  const r = suite === "driver" || suite === "driver-tls"
    ? await deno(["bench", ...flags, "--json", suiteFile(suite)], suiteEnv, {
      capture: true,
      timeoutMs,
    })
    : await deno(
      ["run", ...flags, suiteFile(suite)],
      suiteEnv,
      { capture: false, timeoutMs },
    );
  if (r.timedOut) throw new Error(`${suite} suite did not finish within ${timeoutMs / 1000} s`);
  if (suite === "driver" || suite === "driver-tls") {
    // deno bench prints its JSON even when a bench failed; the failures are in the report.
    let report: SuiteReport;
    try {
      report = driverReport(JSON.parse(r.stdout));
    } catch {
      throw new Error(`${suite} suite failed (exit code ${r.code}) before reporting`);
    }
    if (isTlsSuite(suite)) report = labelTls(report);
    console.log(renderSuite(report));
    if (r.code !== 0) throw new Error(`${suite} suite failed:\n${report.notes.join("\n")}`);
    return report;
  }
  if (r.code !== 0) throw new Error(`${suite} suite failed (exit code ${r.code})`);
  const report = JSON.parse(await Deno.readTextFile(reportFile)) as SuiteReport;
  return isTlsSuite(suite) ? labelTls(report) : report;
}

async function main(): Promise<number> {
  const args = parseArgs(Deno.args);
  const startedAt = new Date();
  const t0 = performance.now();

  const probe = await probeDrivers();
  for (const s of probe.skipped) console.log(skipLine(s));

  // Suite reports pass through here (the prefix differs from the cluster's "pgpipe-bench-").
  const dir = await Deno.makeTempDir({ prefix: "pgpipe-reports-" });
  let starting: Promise<Cluster> | undefined;
  let stopping: Promise<void> | undefined;
  const stop = () =>
    stopping ??= (starting ?? Promise.resolve(undefined)).then(
      (c) => c?.stop(),
      () => {},
    );
  for (const [sig, code] of [["SIGINT", 130], ["SIGTERM", 143]] as const) {
    Deno.addSignalListener(sig, async () => {
      console.error(`bench: ${sig}: stopping`);
      interrupted = true;
      try {
        child?.kill("SIGKILL");
      } catch { /* already gone */ }
      await stop();
      await Deno.remove(dir, { recursive: true }).catch(() => {});
      Deno.exit(code);
    });
  }

  try {
    const tlsEnv: Record<string, string> = {};
    let url = Deno.env.get("DATABASE_URL");
    if (url) {
      console.log("bench: using DATABASE_URL");
    } else {
      // With TLS on: the plaintext suites say sslmode=disable, their -tls twins require.
      starting = startCluster({ ssl: true, name: "bench" });
      const cluster = await starting;
      url = `postgres://${cluster.users.trust.user}@127.0.0.1:${cluster.port}/${cluster.database}`;
      tlsEnv.PGPIPE_BENCH_CA = cluster.caCertPath!;
      const scram = cluster.users.scram;
      tlsEnv.PGPIPE_BENCH_SCRAM_URL = `postgres://${scram.user}:${
        encodeURIComponent(scram.password)
      }@127.0.0.1:${cluster.port}/${cluster.database}`;
    }
    const tlsUrl = new URL(url);
    tlsUrl.searchParams.set("sslmode", "require");
    tlsEnv.PGPIPE_BENCH_TLS_URL = tlsUrl.toString();
    url = plainUrl(url);
    const machine = await describeMachine(url);
    console.log(
      `bench: ${machine.server}; ${machine.cpu}, ${machine.cores} cores; Deno ${machine.deno}`,
    );
    console.log(
      `bench: drivers ${probe.names.join(", ")}; suites ${args.only.join(", ")}` +
        (args.quick ? " (quick)" : ""),
    );

    const env = {
      ...tlsEnv,
      PGPIPE_BENCH_URL: url,
      PGPIPE_BENCH_DRIVERS: probe.names.join(","),
      PGPIPE_BENCH_QUICK: args.quick ? "1" : "0",
      PGPIPE_BENCH_DELAY: String(args.delay),
    };
    const reports: SuiteReport[] = [];
    const failures: string[] = [];
    for (const suite of args.only) {
      if (interrupted) break;
      console.log(`\nbench: suite ${suite}...`);
      const s0 = performance.now();
      try {
        reports.push(await runSuite(suite, args, env, dir));
      } catch (e) {
        failures.push((e as Error).message);
        console.error(`bench: ${(e as Error).message}`);
      }
      console.log(`bench: suite ${suite} took ${((performance.now() - s0) / 1000).toFixed(0)} s`);
    }

    if (interrupted) return 130; // the signal handler is stopping everything

    console.log(
      "\n" +
        renderTable(
          summaryTable(reports.flatMap((r) => r.ratios), reports.flatMap((r) => r.measures ?? [])),
        ),
    );
    console.log("\nSpeed targets (reported, not enforced): " + targetTexts().join("; "));
    const seconds = (performance.now() - t0) / 1000;
    const full = !args.quick && args.only.length === SUITES.length;
    const out = args.out ?? (full ? join(here, "RESULTS.md") : undefined);
    if (out) {
      const md = resultsMarkdown({
        command: ["deno task bench", ...Deno.args].join(" "),
        quick: args.quick,
        machine,
        reports,
        failures,
        skipped: probe.skipped,
        drivers: probe.drivers,
        ownServer: starting !== undefined,
        startedAt,
        seconds,
      });
      await Deno.writeTextFile(out, md);
      // The file lives in the repository, whose check runs `deno fmt --check`: leave it formatted.
      const fmt = await deno(["fmt", "--quiet", out], {}, { capture: false, timeoutMs: 60_000 });
      if (fmt.code !== 0) console.error(`bench: deno fmt ${out} failed (exit code ${fmt.code})`);
      console.log(`bench: wrote ${out}`);
    }
    console.log(`bench: done in ${seconds.toFixed(0)} s`);
    for (const f of failures) console.error(`bench: FAILED: ${f.split("\n")[0]}`);
    return failures.length ? 1 : 0;
  } finally {
    await stop();
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
}

try {
  Deno.exit(await main());
} catch (e) {
  console.error(`bench: ${(e as Error).message}`);
  Deno.exit(1);
}
