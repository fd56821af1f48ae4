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
 */
import { parseArgs } from "node:util";
import { findPgBin } from "../harness/cluster.ts";
import { findPgbouncer } from "../harness/pgbouncer.ts";
import type { Fault, SoakPlan, SoakReport } from "./chaos.ts";
import { soakThroughPgbouncer, soakWithFailover, soakWithRestart } from "./variants.ts";

const { values } = parseArgs({
  args: Deno.args,
  options: {
    seconds: { type: "string", default: "600" },
    variant: { type: "string", default: "restart" },
    verbose: { type: "boolean", default: true },
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
const names = values.variant === "all" ? Object.keys(variants) : [values.variant!];
let failed = false;
for (const name of names) {
  if (name === "pgbouncer" && findPgbouncer() === null) {
    console.log("soak pgbouncer: skipped (pgbouncer not installed)");
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
