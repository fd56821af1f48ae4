// libpq's pipeline mode, the physical limit of the throughput suite: pgbench sending the same
// `select $1::int` as the drivers, 1,000 queries and one Sync per \startpipeline (pgbench's
// shape), and bench/peers/libpq_pipeline.c, built here when cc and libpq's headers are present,
// with one Sync per query (pgpipe's shape). It shows how much of what the wire and server allow
// a JavaScript driver reaches. A missing tool gives one note and no number.
import { join } from "node:path";
import { clientTool, findPgBin } from "../shared/harness.ts";
import { run, tempDir } from "../shared/probe.ts";

/** Queries per second through libpq, or a note saying why there is no number. */
export type LibpqRate = { qps?: number; note: string };

/**
 * Runs `pgbench -n -M prepared -c 1 -j 1 -T seconds` on a script of `lines` queries in one
 * pipeline against url (pgbench takes a connection URI as its database name); q/s = tps x lines.
 */
export async function pgbenchPipeline(url: string, seconds: number, lines: number) {
  const pgbench = clientTool(findPgBin(), "pgbench");
  if (!pgbench.includes("/")) return { note: "pgbench not found: no libpq pipeline limit." };
  await using dir = await tempDir("pgpipe-pgbench-");
  try {
    const file = join(dir.path, "pipeline.sql");
    const queries = Array.from({ length: lines }, () => "select :x::int;");
    const script = ["\\set x random(1, 1000)", "\\startpipeline", ...queries, "\\endpipeline"];
    await Deno.writeTextFile(file, script.join("\n") + "\n");
    const args = ["-n", "-M", "prepared", "-c", "1", "-j", "1", "-T", `${seconds}`, "-f", file];
    const out = await run(pgbench, [...args, url], { timeoutMs: (seconds + 30) * 1000 });
    const tps = Number(/^tps = ([\d.]+)/m.exec(out)?.[1]);
    if (!(tps > 0)) return { note: `pgbench printed no tps:\n${out}` };
    const note =
      `libpq pipeline: pgbench -M prepared -c 1 -j 1 -T ${seconds}, ${lines} queries per \\startpipeline; q/s = tps x ${lines}.`;
    return { qps: tps * lines, note };
  } catch (e) {
    return { note: `pgbench failed: ${(e as Error).message.split("\n")[0]}` };
  }
}

/** libpq_pipeline.c with a Sync every query: `total` queries, `window` in flight. */
export async function libpqPipeline(url: string, total: number, window: number) {
  await using dir = await tempDir("pgpipe-libpq-");
  const what = "libpq pipeline, 1 Sync per query (pgpipe's shape)";
  const exe = join(dir.path, "libpq_pipeline");
  const source = new URL("./libpq_pipeline.c", import.meta.url).pathname;
  const cc = ["-O2", "-o", exe, source, "-I/usr/include/postgresql", "-lpq"];
  if (!await run("cc", cc).then(() => true, () => false)) {
    return { note: `${what}: not built (needs cc and libpq-dev).` };
  }
  const out = await run(exe, [url, String(total), String(window), "1"]).catch((e) => String(e));
  const qps = Number(/: (\d+) q\/s/.exec(out)?.[1]);
  if (!(qps > 0)) return { note: `libpq pipeline failed: ${out.trim()}` };
  return {
    qps,
    note: `${what}: bench/peers/libpq_pipeline.c, ${total} queries, ${window} in flight.`,
  };
}
