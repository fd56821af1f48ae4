/**
 * The chaos soak, bounded (~15 s of faults) so that `deno task test` runs it every time: ~200
 * queries in flight on max 4 through a fault proxy, while backends are terminated, every
 * connection is dropped, the server stalls and restarts. Every figure under `violations` must be
 * zero. The long form is `deno task soak` (test/soak/run.ts).
 */
import assert from "node:assert/strict";
import { findPgBin, startCluster } from "./harness/cluster.ts";
import { faultProxy } from "./harness/fault_proxy.ts";
import { soak } from "./soak/chaos.ts";

Deno.test({
  name:
    "chaos soak (bounded): terminate, drop, stall, restart under ~200 queries in flight; bookkeeping all zero",
  ignore: findPgBin() === null,
  async fn() {
    const cluster = await startCluster({ name: "chaos" });
    const proxy = faultProxy({ host: "127.0.0.1", port: cluster.port });
    try {
      const user = cluster.users.trust.user;
      const report = await soak({
        proxy,
        clientUrl: `postgres://${user}@127.0.0.1:${proxy.port}/postgres?sslmode=disable`,
        adminUrl: () => `postgres://${user}@127.0.0.1:${cluster.port}/postgres?sslmode=disable`,
        restart: async () => {
          await cluster.halt();
          await cluster.resume();
        },
      }, {
        seconds: 15,
        faults: ["terminate", "drop", "stall", "terminate", "restart", "drop"],
        every: 1200,
        max: 4,
        writers: 160,
        txWriters: 20,
        readers: 20,
      });
      console.log(JSON.stringify(report));
      assert.deepEqual(report.violations, {
        lost: 0,
        phantom: 0,
        duplicated: 0,
        partial: 0,
        untyped: 0,
        pending: 0,
        unhandled: 0,
        overMax: 0,
        leftover: 0,
        unseen: 0,
        deaf: 0,
      }, report.examples.join("\n"));
      assert.ok(report.acked > 1000, `only ${report.acked} writes acknowledged`);
      assert.ok(report.faults.restart === 1, "the restart ran");
      assert.ok(proxy.dropped > 0 && proxy.stalled > 0, "the proxy faults reached the client");
      // Leak check, not a speed target: the process must not grow without bound under faults.
      const growth = report.rss.end - report.rss.warm;
      assert.ok(growth < 128 * 1024 * 1024, `RSS grew ${growth >> 20} MiB after warm-up`);
    } finally {
      await proxy.close();
      await cluster.stop();
    }
  },
});
