/**
 * `deno task soak [--seconds=600] [--variant=restart|failover|pgbouncer|all]`: the chaos soak in
 * its long form, on throwaway servers it starts and stops itself. Prints each variant's report
 * (JSON) and exits non-zero when any bookkeeping figure is not zero or RSS grew more than 64 MiB
 * between warm-up and the end.
 *
 * - restart: one server; terminate, drop, stall and a fast restart, in turn.
 * - failover: a primary and a streaming standby behind one proxy each, the client on a
 *   multi-host URL with target_session_attrs=read-write; terminate, drop and stall, and once,
 *   half way, the primary stopped and the standby promoted.
 * - pgbouncer: PgBouncer (transaction mode, prepare: false) between the proxy and the server;
 *   terminate (the server backends PgBouncer holds), drop and stall.
 * - protocol: the protocol fuzz (test/harness/replay_fuzz.ts) at length: `--cases` seeded
 *   sessions (default 3000, from `--seed`), each with one message broken; fails on any wrong
 *   answer from a broken sequence, any hang or unhandled rejection, and prints the table.
 */
import { parseArgs } from "node:util";
import { findPgBin } from "../harness/cluster.ts";
import { findPgbouncer } from "../harness/pgbouncer.ts";
import type { Fault, SoakPlan, SoakReport } from "./chaos.ts";
import { soakThroughPgbouncer, soakWithFailover, soakWithRestart } from "./variants.ts";
import { startCluster } from "../harness/cluster.ts";
import { fuzz, recordAll } from "../harness/replay_fuzz.ts";

const { values } = parseArgs({
  args: Deno.args,
  options: {
    seconds: { type: "string", default: "600" },
    variant: { type: "string", default: "restart" },
    verbose: { type: "boolean", default: true },
    cases: { type: "string", default: "3000" },
    seed: { type: "string", default: String(0x50a50039) },
  },
});
const seconds = Number(values.seconds);
const base = (faults: Fault[]): SoakPlan => ({
  seconds,
  faults,
  every: 2000,
  max: 4,
  writers: 160,
  txWriters: 20,
  readers: 20,
  verbose: values.verbose,
});

if (findPgBin() === null) {
  console.error("soak: PostgreSQL server binaries not found");
  Deno.exit(1);
}
const variants: Record<string, () => Promise<SoakReport>> = {
  restart: () =>
    soakWithRestart(base(["terminate", "drop", "stall", "terminate", "drop", "restart"])),
  failover: () =>
    soakWithFailover(base(["terminate", "drop", "stall", "failover", "terminate", "drop"])),
  pgbouncer: () => soakThroughPgbouncer(base(["terminate", "drop", "stall"])),
};
/** The protocol fuzz on a throwaway server of its own: true when it found no bug. */
async function protocolFuzz(): Promise<boolean> {
  const cluster = await startCluster({ name: "fuzz" });
  try {
    const url = `postgres://${cluster.users.trust.user}@${cluster.host}:${cluster.port}/` +
      cluster.database;
    const seed = Number(values.seed);
    const { table, bugs } = await fuzz(await recordAll(url), seed, Number(values.cases));
    console.log(`soak protocol (seed ${seed}): ${JSON.stringify(table)}`);
    for (const bug of bugs) console.log(`soak protocol: BUG ${bug}`);
    return bugs.length === 0;
  } finally {
    await cluster.stop();
  }
}

const names = values.variant === "all" ? [...Object.keys(variants), "protocol"] : [values.variant!];
let failed = false;
for (const name of names) {
  if (name === "pgbouncer" && findPgbouncer() === null) {
    console.log("soak pgbouncer: skipped (pgbouncer not installed)");
    continue;
  }
  if (name === "protocol") {
    if (!(await protocolFuzz())) failed = true;
    continue;
  }
  const report = await variants[name]();
  const bad = Object.entries(report.violations).filter(([, n]) => n !== 0);
  const growth = report.rss.end - report.rss.warm;
  console.log(`soak ${name}: ${JSON.stringify(report)}`);
  console.log(
    `soak ${name}: ${report.ops} operations, ${report.acked} rows acknowledged, ` +
      `${report.notSent} not sent, ${report.refused} refused, unknown ${report.unknownPresent} ` +
      `present / ${report.unknownAbsent} absent; most backends ${report.maxBackends}; ` +
      `RSS ${report.rss.warm >> 20} -> ${report.rss.end >> 20} MiB; ` +
      `fds ${report.fds.warm} -> ${report.fds.end}; ` +
      (bad.length === 0 ? "bookkeeping all zero" : `VIOLATIONS ${JSON.stringify(bad)}`),
  );
  if (bad.length > 0 || growth > 64 * 1024 * 1024) failed = true;
}
Deno.exit(failed ? 1 : 0);
