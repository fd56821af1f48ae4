/**
 * The chaos soak, bounded (~15 s of faults) so that `deno task test` runs it every time: ~200
 * queries in flight on max 4 through a fault proxy, while backends are terminated, every
 * connection is dropped, the server stalls and restarts. Every figure under `violations` must be
 * zero. The long form is `deno task soak` (test/soak/run.ts).
 */
import assert from "node:assert/strict";
import { findPgBin } from "./harness/cluster.ts";
import { noViolations } from "./soak/chaos.ts";
import { soakWithRestart } from "./soak/variants.ts";

Deno.test({
  name:
    "chaos soak (bounded): terminate, drop, stall, restart under ~200 queries in flight; bookkeeping all zero",
  ignore: findPgBin() === null,
  async fn() {
    const report = await soakWithRestart({
      seconds: 15,
      faults: ["terminate", "drop", "stall", "terminate", "restart", "drop"],
      every: 1200,
      max: 4,
      writers: 160,
      txWriters: 20,
      readers: 20,
    });
    console.log(`chaos soak: ${JSON.stringify(report)}`);
    assert.deepEqual(report.violations, noViolations(), report.examples.join("\n"));
    assert.ok(report.acked > 1000, `only ${report.acked} writes acknowledged`);
    assert.equal(report.faults.restart, 1, "the restart ran");
    assert.ok(report.proxy.dropped > 0 && report.proxy.stalled > 0, "the proxy's faults ran");
    // A leak check, not a speed target: the process must not grow without bound under faults.
    const growth = report.rss.end - report.rss.warm;
    assert.ok(growth < 128 * 1024 * 1024, `RSS grew ${growth >> 20} MiB after warm-up`);
  },
});
