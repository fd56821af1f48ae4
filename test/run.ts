// `deno task test [deno test args]`: starts a TLS and a plain throwaway cluster, runs `deno test`
// with PGPIPE_TEST_CLUSTERS describing them, and always tears the clusters down afterwards.
import { type Cluster, type ClusterInfo, findPgBin, startCluster } from "./harness/cluster.ts";

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
  const { stop: _stop, dataDir: _dataDir, ...rest } = c;
  return rest;
}

const version = (v: number) => `${Math.floor(v / 10000)}.${v % 10000}`;

async function main(): Promise<number> {
  const env: Record<string, string> = {};
  let starting: Promise<Cluster>[] = [];
  if (Deno.env.get("DATABASE_URL") && !findPgBin()) {
    console.log(
      "test: no PostgreSQL server binaries; using DATABASE_URL only (auth tests skipped)",
    );
  } else {
    starting = [startCluster({ ssl: true }), startCluster({ ssl: false })];
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
        `test: PostgreSQL ${version(tls.version)} (${tls.version}): tls port ${tls.port}, ` +
          `plain port ${plain.port} (started in ${ms} ms)`,
      );
    }
    child = new Deno.Command(Deno.execPath(), {
      args: ["test", "-A", ...testArgs(Deno.args)],
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
 * Copies the child's output through unchanged and returns its totals as
 * "N passed, N failed[, N skipped]" (from Deno's "ok | N passed | N failed" line).
 */
async function relay(stream: ReadableStream<Uint8Array>): Promise<string | null> {
  const decoder = new TextDecoder();
  let tail = "";
  let summary: string | null = null;
  for await (const chunk of stream) {
    await Deno.stdout.write(chunk);
    tail = (tail + decoder.decode(chunk, { stream: true })).slice(-4096);
    // deno-lint-ignore no-control-regex
    const plain = tail.replace(/\x1b\[[0-9;]*m/g, "");
    const m = /(\d+) passed \| (\d+) failed(?: \((?:[^)]*)\))?/.exec(plain);
    const ignored = /(\d+) ignored/.exec(plain);
    if (m) summary = `${m[1]} passed, ${m[2]} failed${ignored ? `, ${ignored[1]} skipped` : ""}`;
  }
  return summary;
}

Deno.exit(await main());
