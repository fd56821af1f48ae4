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
import { findPgBin, startCluster } from "../harness/cluster.ts";
import { faultProxy } from "../harness/fault_proxy.ts";
import { startReplica } from "../harness/replica.ts";
import { findPgbouncer, startPgbouncer } from "../harness/pgbouncer.ts";
import { type Fault, soak, type SoakPlan, type SoakReport } from "./chaos.ts";

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

async function restartVariant(): Promise<SoakReport> {
  const cluster = await startCluster({ name: "soak" });
  const proxy = faultProxy({ host: "127.0.0.1", port: cluster.port });
  const user = cluster.users.trust.user;
  try {
    return await soak({
      proxy,
      clientUrl: `postgres://${user}@127.0.0.1:${proxy.port}/postgres?sslmode=disable`,
      adminUrl: () => `postgres://${user}@127.0.0.1:${cluster.port}/postgres?sslmode=disable`,
      restart: async () => {
        await cluster.halt();
        await cluster.resume();
      },
    }, base(["terminate", "drop", "stall", "terminate", "drop", "restart"]));
  } finally {
    await proxy.close();
    await cluster.stop();
  }
}

async function failoverVariant(): Promise<SoakReport> {
  const primary = await startCluster({ name: "soak-primary", replication: true });
  const replica = await startReplica(primary).catch(async (e) => {
    await primary.stop();
    throw e;
  });
  const toPrimary = faultProxy({ host: "127.0.0.1", port: primary.port });
  const toReplica = faultProxy({ host: "127.0.0.1", port: replica.port });
  let promoted = false;
  // One proxy object for the soak's faults: both proxies at once.
  const both = {
    get port() {
      return toPrimary.port;
    },
    get closedPorts() {
      return new Set([...toPrimary.closedPorts, ...toReplica.closedPorts]);
    },
    get dropped() {
      return toPrimary.dropped + toReplica.dropped;
    },
    get stalled() {
      return toPrimary.stalled + toReplica.stalled;
    },
    drop() {
      toPrimary.drop();
      toReplica.drop();
    },
    stall(on: boolean) {
      toPrimary.stall(on);
      toReplica.stall(on);
    },
    close: async () => {
      await toPrimary.close();
      await toReplica.close();
    },
  };
  try {
    const plan = base(["terminate", "drop", "stall", "failover", "terminate", "drop"]);
    return await soak({
      proxy: both,
      clientUrl: `postgres://postgres@127.0.0.1:${toReplica.port},127.0.0.1:${toPrimary.port}` +
        `/postgres?sslmode=disable&target_session_attrs=read-write`,
      adminUrl: () =>
        `postgres://postgres@127.0.0.1:${promoted ? replica.port : primary.port}` +
        `/postgres?sslmode=disable`,
      failover: async () => {
        if (promoted) return;
        await primary.halt();
        await replica.promote();
        promoted = true;
      },
    }, plan);
  } finally {
    await both.close();
    await replica.stop();
    await primary.stop();
  }
}

async function pgbouncerVariant(): Promise<SoakReport> {
  const cluster = await startCluster({ name: "soak-bouncer" });
  const user = cluster.users.trust.user;
  const bouncer = await startPgbouncer({
    server: { host: "127.0.0.1", port: cluster.port },
    users: [user],
    poolSize: 4,
  });
  const proxy = faultProxy({ host: "127.0.0.1", port: bouncer.port });
  try {
    return await soak({
      proxy,
      clientUrl: `postgres://${user}@127.0.0.1:${proxy.port}/postgres?sslmode=disable`,
      adminUrl: () => `postgres://${user}@127.0.0.1:${cluster.port}/postgres?sslmode=disable`,
      options: { prepare: false },
      backendsVisible: false, // PgBouncer's server connections carry its own application_name
    }, base(["terminate", "drop", "stall"]));
  } finally {
    await proxy.close();
    await bouncer.stop();
    await cluster.stop();
  }
}

if (findPgBin() === null) {
  console.error("soak: PostgreSQL server binaries not found");
  Deno.exit(1);
}
const variants: Record<string, () => Promise<SoakReport>> = {
  restart: restartVariant,
  failover: failoverVariant,
  pgbouncer: pgbouncerVariant,
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
      (bad.length === 0 ? "bookkeeping all zero" : `VIOLATIONS ${JSON.stringify(bad)}`),
  );
  if (bad.length > 0 || growth > 64 * 1024 * 1024) failed = true;
}
Deno.exit(failed ? 1 : 0);
