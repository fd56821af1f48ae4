// The HTTP suite's load generator where wrk is not installed: `deno run -A bench/probes/http_load.ts
// URL CONNECTIONS SECONDS` runs CONNECTIONS concurrent loops of keep-alive fetches for SECONDS
// and prints one JSON line (http.ts reads it): requests, seconds, latency percentiles in ms,
// and how many answers were not 200 or failed. It runs as its own process, so its CPU is
// measured apart from the server's.
import type { LoadResult } from "../shared/loadgen.ts";
import { percentile } from "../shared/stats.ts";

if (import.meta.main) {
  const [url, connections, duration] = Deno.args;
  const latencies: number[] = [];
  let errors = 0;
  const t0 = performance.now();
  const loop = async () => {
    while (performance.now() < t0 + Number(duration) * 1000) {
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
  await Promise.all(Array.from({ length: Number(connections) }, loop));
  const [p50Ms, p99Ms] = [percentile(latencies, 50), percentile(latencies, 99)];
  const seconds = (performance.now() - t0) / 1000;
  const result: LoadResult = { requests: latencies.length, seconds, p50Ms, p99Ms, errors };
  console.log(JSON.stringify(result));
}
