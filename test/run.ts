// `deno task test [--pg=VERSION[,VERSION...]] [deno test args]`: starts a TLS and a plain
// throwaway cluster of that PostgreSQL version (default: PGPIPE_TEST_PG, else the installed one),
// runs `deno test` with PGPIPE_TEST_CLUSTERS describing them and PGPIPE_TEST_PG_BIN naming the
// binaries, and always tears the clusters down afterwards. With several versions (`--pg=all`:
// every major of the matrix) it runs the whole suite once per version, one after another, and
// ends with one line per version.
import { type Cluster, type ClusterInfo, startCluster } from "./harness/cluster.ts";
import { findPgBin, PG_BIN_ENV, PG_MATRIX, PG_VERSION_ENV, pgBin } from "./harness/server_bin.ts";
import { runPglite } from "./harness/pglite_run.ts";

// `deno test` flags whose value is a separate argument (so it is not mistaken for a path).
const VALUE_FLAGS = new Set(["--filter", "--reporter", "--junit-path", "--config", "-c"]);

/** Forwarded args, plus the test/ directory when no path was given. */
function testArgs(args: string[]): string[] {
  const end = args.indexOf("--") === -1 ? args.length : args.indexOf("--");
  let hasPath = false;
  for (let i = 0; i < end; i++) {
    if (VALUE_FLAGS.has(args[i])) i++;
    else if (!args[i].startsWith("-")) hasPath = true;
  }
  return hasPath ? args : [...args.slice(0, end), "test/", ...args.slice(end)];
}

function info(c: Cluster): ClusterInfo {
  const { stop: _stop, dataDir: _dataDir, bin: _bin, ...rest } = c;
  return rest;
}

const version = (v: number) => `${Math.floor(v / 10000)}.${v % 10000}`;

/** `--pg=...` taken out of the arguments: the versions asked for, and what goes to deno test. */
function splitPg(args: string[]): { versions: string[]; rest: string[] } {
  let pg = Deno.env.get(PG_VERSION_ENV) ?? "";
  const rest: string[] = [];
  for (const a of args) {
    if (a.startsWith("--pg=")) pg = a.slice("--pg=".length);
    else rest.push(a);
  }
  const versions = pg.split(",").flatMap((v) =>
    v === "all" ? PG_MATRIX : v.trim() ? [v.trim()] : []
  );
  return { versions, rest };
}

async function main(): Promise<number> {
  const { versions, rest } = splitPg(Deno.args);
  // In process, no cluster: see harness/pglite_run.ts.
  if (versions.length === 1 && versions[0] === "pglite") {
    return await runPglite(rest, testArgs, relay);
  }
  if (versions.length > 1) return await matrix(versions, rest);
  return await runOnce(versions[0], rest);
}

/** The whole suite on one server version (undefined: the installed one). */
async function runOnce(pg: string | undefined, args: string[]): Promise<number> {
  const env: Record<string, string> = {};
  let starting: Promise<Cluster>[] = [];
  if (!pg && Deno.env.get("DATABASE_URL") && !findPgBin()) {
    console.log(
      "test: no PostgreSQL server binaries; using DATABASE_URL only (auth tests skipped)",
    );
  } else {
    let bin: string;
    try {
      bin = await pgBin(pg);
    } catch (e) {
      console.error(`test: ${(e as Error).message}`);
      return 1;
    }
    env[PG_BIN_ENV] = bin;
    starting = [startCluster({ ssl: true, pg: bin }), startCluster({ ssl: false, pg: bin })];
  }
  // Stops whatever did start, even if the other cluster failed or we were interrupted.
  let cleaning: Promise<void> | undefined;
  const cleanup = () =>
    cleaning ??= Promise.allSettled(starting).then(async (rs) => {
      await Promise.all(rs.map((r) => r.status === "fulfilled" ? r.value.stop() : undefined));
    });

  let child: Deno.ChildProcess | undefined;
  let interrupted = false;
  for (const [sig, code] of [["SIGINT", 130], ["SIGTERM", 143]] as const) {
    Deno.addSignalListener(sig, async () => {
      interrupted = true; // a signal during startup must not let main() spawn `deno test` later
      try {
        child?.kill(sig);
      } catch { /* already exited */ }
      await cleanup();
      Deno.exit(code);
    });
  }

  try {
    if (starting.length) {
      const t0 = performance.now();
      const [tls, plain] = await Promise.all(starting);
      if (interrupted) return 130;
      env.PGPIPE_TEST_CLUSTERS = JSON.stringify({ tls: info(tls), plain: info(plain) });
      const ms = Math.round(performance.now() - t0);
      console.log(
        `test: PostgreSQL ${version(tls.version)} (${tls.version}, ${tls.bin}): ` +
          `tls port ${tls.port}, plain port ${plain.port} (started in ${ms} ms)`,
      );
    }
    child = new Deno.Command(Deno.execPath(), {
      args: ["test", "-A", ...testArgs(args)],
      env,
      stdin: "inherit",
      stdout: "piped",
      stderr: "inherit",
    }).spawn();
    const summary = await relay(child.stdout);
    const code = (await child.status).code;
    // One plain closing line that any CI log reader understands.
    if (summary) console.log(`tests: ${summary}`);
    return code;
  } catch (e) {
    console.error(`test: ${(e as Error).message}`);
    return 1;
  } finally {
    await cleanup();
  }
}

/**
 * Runs the whole suite once per version, each in its own runner process (its own clusters,
 * its own cleanup), then prints one line per version and the totals.
 */
async function matrix(versions: string[], args: string[]): Promise<number> {
  const lines: string[] = [];
  let passed = 0, failed = 0, worst = 0;
  for (const pg of versions) {
    console.log(`\ntest: ==== PostgreSQL ${pg} ====`);
    const t0 = performance.now();
    const child = new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", new URL(import.meta.url).pathname, `--pg=${pg}`, ...args],
      stdin: "null",
      stdout: "piped",
      stderr: "inherit",
    }).spawn();
    let summary: string | null = null;
    let server = "";
    const errors = failureLines();
    await relay(child.stdout, (line) => {
      const total = /^tests: (.*)$/.exec(line);
      if (total) summary = total[1];
      const started = /^test: (PostgreSQL \S+)/.exec(line);
      if (started) server = started[1];
      errors.take(line);
    });
    const code = (await child.status).code;
    worst = Math.max(worst, code);
    const counts = /(\d+) passed, (\d+) failed/.exec(summary ?? "");
    if (counts) {
      passed += Number(counts[1]);
      failed += Number(counts[2]);
    } else failed++; // the run broke before testing: count it, so it cannot pass unnoticed
    const s = Math.round((performance.now() - t0) / 1000);
    lines.push(
      `--pg=${pg}: ${server || "PostgreSQL ?"}: ${summary ?? `no result (exit code ${code})`}` +
        ` (${s} s)`,
    );
    // A CI log often keeps only its tail: each version's failures are said again there.
    for (const line of errors.lines) lines.push(`  ${line}`);
  }
  console.log("\n" + lines.join("\n"));
  console.log(`tests: ${passed} passed, ${failed} failed`);
  return worst || (failed ? 1 : 0);
}

/**
 * Collects, from Deno's closing "ERRORS" section, each failed test's "name => file" line and the
 * first line of its error (at most 40 lines in all).
 */
function failureLines(): { lines: string[]; take(line: string): void } {
  const lines: string[] = [];
  let inErrors = false;
  let wantError = false;
  return {
    lines,
    take(line) {
      const trimmed = line.trim();
      if (trimmed === "ERRORS") inErrors = true;
      else if (trimmed === "FAILURES") inErrors = false;
      else if (inErrors && lines.length < 40) {
        if (/ => \S+:\d+:\d+$/.test(trimmed)) {
          lines.push(trimmed);
          wantError = true;
        } else if (wantError && /^error: /.test(trimmed)) {
          lines.push(`  ${trimmed.slice(0, 300)}`);
          wantError = false;
        }
      }
    },
  };
}

/**
 * Copies the child's output through unchanged, hands each line (without colours) to `onLine`,
 * and returns its totals as "N passed, N failed[, N skipped]" (from Deno's "ok | N passed |
 * N failed" line).
 */
async function relay(
  stream: ReadableStream<Uint8Array>,
  onLine?: (line: string) => void,
): Promise<string | null> {
  const decoder = new TextDecoder();
  let tail = "";
  let pending = "";
  let summary: string | null = null;
  for await (const chunk of stream) {
    await Deno.stdout.write(chunk);
    const text = decoder.decode(chunk, { stream: true });
    tail = (tail + text).slice(-4096);
    // deno-lint-ignore no-control-regex
    const plain = tail.replace(/\x1b\[[0-9;]*m/g, "");
    // "N passed (M steps) | N failed (M steps)": a file with t.step adds the step counts.
    const m = /(\d+) passed(?: \([^)]*\))? \| (\d+) failed/.exec(plain);
    const ignored = /(\d+) ignored/.exec(plain);
    if (m) summary = `${m[1]} passed, ${m[2]} failed${ignored ? `, ${ignored[1]} skipped` : ""}`;
    if (onLine) {
      const lines = (pending + text).split("\n");
      pending = lines.pop()!;
      // deno-lint-ignore no-control-regex
      for (const line of lines) onLine(line.replace(/\x1b\[[0-9;]*m/g, ""));
    }
  }
  if (onLine && pending) onLine(pending);
  return summary;
}

Deno.exit(await main());
