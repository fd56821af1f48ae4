// The physical limit for suite 2: libpq's pipeline mode, driven by pgbench, sending the same
// `select $1::int` as the drivers with the same number of queries per pipeline. It shows how
// much of what the wire and server allow a JavaScript driver reaches.
import { join } from "node:path";
import { findPgBin, run } from "../../test/harness/cluster.ts";
import { isFile } from "../../test/harness/server_bin.ts";

/** Queries per second through a libpq pipeline, or a note saying why there is no number. */
export interface PipelineLimit {
  qps?: number;
  lines: number;
  note: string;
}

/** A pgbench script: one random parameter, then `lines` queries in one pipeline. */
function script(lines: number): string {
  return [
    "\\set x random(1, 1000)",
    "\\startpipeline",
    ...Array.from({ length: lines }, () => "select :x::int;"),
    "\\endpipeline",
    "",
  ].join("\n");
}

/**
 * Runs `pgbench -n -M prepared -c 1 -j 1 -T seconds` on that script against url (pgbench takes
 * a connection URI as its database name) and converts transactions to queries per second.
 */
export async function pgbenchPipeline(
  url: string,
  opts: { seconds: number; lines: number },
): Promise<PipelineLimit> {
  const bin = findPgBin();
  const pgbench = bin ? join(bin, "pgbench") : "";
  if (!isFile(pgbench)) {
    return {
      lines: opts.lines,
      note: "pgbench not found next to initdb: no libpq pipeline limit.",
    };
  }
  const dir = await Deno.makeTempDir({ prefix: "pgpipe-pgbench-" });
  try {
    const file = join(dir, "pipeline.sql");
    await Deno.writeTextFile(file, script(opts.lines));
    const args = ["-n", "-M", "prepared", "-c", "1", "-j", "1", "-T", `${opts.seconds}`];
    const out = await run(pgbench, [...args, "-f", file, url], {
      timeoutMs: (opts.seconds + 30) * 1000,
    });
    const tps = Number(/^tps = ([\d.]+)/m.exec(out)?.[1]);
    if (!(tps > 0)) return { lines: opts.lines, note: `pgbench printed no tps:\n${out}` };
    return {
      qps: tps * opts.lines,
      lines: opts.lines,
      note: `libpq pipeline: pgbench -M prepared -c 1 -j 1 -T ${opts.seconds}, ` +
        `${opts.lines} queries per \\startpipeline; q/s = tps x ${opts.lines}.`,
    };
  } catch (e) {
    return { lines: opts.lines, note: `pgbench failed: ${(e as Error).message.split("\n")[0]}` };
  } finally {
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
}
