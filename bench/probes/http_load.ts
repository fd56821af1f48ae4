// The HTTP suite's load generator where wrk is not installed: `deno run -A bench/probes/http_load.ts
// URL CONNECTIONS SECONDS` runs CONNECTIONS concurrent loops of keep-alive fetches for SECONDS
// and prints one JSON line (http.ts reads it): requests, seconds, latency percentiles in ms,
// and how many answers were not 200 or failed. It runs as its own process, so its CPU is
// measured apart from the server's.
import { percentile } from "../shared/stats.ts";

/** What one load run reports (wrk's output is read into the same shape). */
export interface LoadResult {
  requests: number;
  seconds: number;
  p50Ms: number;
  p99Ms: number;
  /** Answers other than 200, and requests that failed outright. */
  errors: number;
}

async function load(url: string, connections: number, seconds: number): Promise<LoadResult> {
  const latencies: number[] = [];
  let errors = 0;
  const t0 = performance.now();
  const stop = t0 + seconds * 1000;
  const loop = async () => {
    while (performance.now() < stop) {
      const start = performance.now();
      try {
        const res = await fetch(url);
        await res.arrayBuffer();
        if (res.status !== 200) errors++;
      } catch {
        errors++;
      }
      latencies.push(performance.now() - start);
    }
  };
  await Promise.all(Array.from({ length: connections }, loop));
  return {
    requests: latencies.length,
    seconds: (performance.now() - t0) / 1000,
    p50Ms: percentile(latencies, 50),
    p99Ms: percentile(latencies, 99),
    errors,
  };
}

if (import.meta.main) {
  const [url, connections, seconds] = Deno.args;
  if (!url || !(Number(connections) >= 1) || !(Number(seconds) > 0)) {
    throw new Error("usage: http_load.ts URL CONNECTIONS SECONDS");
  }
  console.log(JSON.stringify(await load(url, Number(connections), Number(seconds))));
}
