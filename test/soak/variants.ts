/**
 * The servers each soak variant runs against, started and stopped around it: one server with a
 * fast restart, a primary with a streaming standby for a failover, PgBouncer in transaction mode.
 */
import { startCluster } from "../harness/cluster.ts";
import { faultProxy } from "../harness/fault_proxy.ts";
import { startReplica } from "../harness/replica.ts";
import { startPgbouncer } from "../harness/pgbouncer.ts";
import { soak, type SoakPlan, type SoakReport } from "./chaos.ts";

/** One server; terminate, drop, stall and a fast restart (the plan's faults). */
export async function soakWithRestart(plan: SoakPlan): Promise<SoakReport> {
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
    }, plan);
  } finally {
    await proxy.close();
    await cluster.stop();
  }
}

/**
 * A primary and a streaming standby behind one proxy each, the client on a multi-host URL with
 * target_session_attrs=read-write; fault "failover" stops the primary and promotes the standby.
 */
export async function soakWithFailover(plan: SoakPlan): Promise<SoakReport> {
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

/** PgBouncer (transaction mode, prepare: false) between the proxy and the server. */
export async function soakThroughPgbouncer(plan: SoakPlan): Promise<SoakReport> {
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
      backendsVisible: false, // the server backends are PgBouncer's, shared by its clients
      terminateAll: true,
    }, plan);
  } finally {
    await proxy.close();
    await bouncer.stop();
    await cluster.stop();
  }
}
