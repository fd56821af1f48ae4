// Builds and runs bench/peers/libpq_pipeline.c when a C compiler and libpq's headers are present, to
// give the libpq limit for pgpipe's own protocol shape (one Sync per query) next to pgbench's
// (one Sync per 1,000 queries). Absent tools: one note, no number.
import { join } from "node:path";

/** Queries per second through libpq with a Sync every `syncEvery` queries, or why there is none. */
export interface LibpqRate {
  qps?: number;
  note: string;
}

const INCLUDE = "/usr/include/postgresql";

/** Compiles the program once per run into `dir`; null with a reason when it cannot. */
export async function buildLibpqPipeline(dir: string): Promise<string | { note: string }> {
  const source = new URL("./libpq_pipeline.c", import.meta.url).pathname;
  const exe = join(dir, "libpq_pipeline");
  try {
    const out = await new Deno.Command("cc", {
      args: ["-O2", "-o", exe, source, `-I${INCLUDE}`, "-lpq"],
      stdout: "piped",
      stderr: "piped",
    }).output();
    if (out.code !== 0) {
      return { note: "libpq pipeline (1 Sync per query): not built (needs cc and libpq-dev)." };
    }
    return exe;
  } catch {
    return { note: "libpq pipeline (1 Sync per query): no C compiler found." };
  }
}

/** Runs the compiled program; the conninfo may be a postgres:// URL. */
export async function libpqPipeline(
  exe: string,
  url: string,
  total: number,
  window: number,
  syncEvery: number,
): Promise<LibpqRate> {
  const out = await new Deno.Command(exe, {
    args: [url, String(total), String(window), String(syncEvery)],
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = new TextDecoder().decode(out.stdout);
  const qps = Number(/: (\d+) q\/s/.exec(text)?.[1]);
  if (out.code !== 0 || !(qps > 0)) {
    return { note: `libpq pipeline failed: ${new TextDecoder().decode(out.stderr).trim()}` };
  }
  return {
    qps,
    note: `libpq pipeline, 1 Sync per query (pgpipe's shape): bench/peers/libpq_pipeline.c, ` +
      `${total} queries, ${window} in flight.`,
  };
}
