/**
 * The chaos soak: concurrent autocommit inserts and multi-row transactions with unique ids (~200
 * queries in flight) and reads beside them, through a fault proxy, while faults run on a schedule
 * (backends terminated, every connection dropped, a stalled server, a fast restart, a failover);
 * then per-id bookkeeping against the table. `test/chaos_test.ts` runs a bounded form in
 * `deno task test`; `deno task soak` runs it for longer (test/soak/run.ts).
 */
import postgres, { ConnectionError, PostgresError, QueryError, type Sql } from "../../mod.ts";
import type { FaultProxy } from "../harness/fault_proxy.ts";
import { poll } from "../harness/wait.ts";

/** One fault, run at its turn in the schedule. */
export type Fault = "terminate" | "drop" | "stall" | "restart" | "failover";

/** What the soak runs against. */
export interface SoakTarget {
  /** The proxy the client goes through (faults "drop" and "stall"). */
  proxy: FaultProxy;
  /** The URL of the proxy for the client (may list several hosts). */
  clientUrl: string;
  /** A direct URL for the soak's own bookkeeping connection (to the current primary). */
  adminUrl: () => string;
  /** Stops and starts the server (fault "restart"). */
  restart?: () => Promise<void>;
  /** Stops the primary and promotes the standby (fault "failover"; once). */
  failover?: () => Promise<void>;
  /** Client options to add (prepare: false for PgBouncer, ...). */
  options?: Record<string, unknown>;
  /** Whether pg_stat_activity shows the client's own backends (false behind PgBouncer). */
  backendsVisible?: boolean;
  /** Fault "terminate" ends every other client backend, not only the client's (PgBouncer's). */
  terminateAll?: boolean;
}

/** How long and how hard. */
export interface SoakPlan {
  /** Milliseconds of load with faults. */
  seconds: number;
  /** The faults, in turn, one every `every` ms. */
  faults: Fault[];
  every: number;
  /** Pool size. */
  max: number;
  /** Concurrent autocommit writers, transaction writers (3 rows each), readers. */
  writers: number;
  txWriters: number;
  readers: number;
  /** Log progress to the console. */
  verbose?: boolean;
}

/** Every bookkeeping count at zero: what a soak must report. */
export function noViolations(): SoakReport["violations"] {
  return {
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
  };
}

/** The bookkeeping: every count under `violations` must be zero. */
export interface SoakReport {
  seconds: number;
  ops: number;
  acked: number;
  notSent: number;
  refused: number;
  unknownPresent: number;
  unknownAbsent: number;
  faults: Record<string, number>;
  maxBackends: number;
  /** RSS after 10% of the run (warm), at half time, and at the end (after a GC with expose-gc). */
  rss: { warm: number; mid: number; end: number };
  /** Open file descriptors of the process (sockets included), when /proc tells. */
  fds: { warm: number; end: number };
  /** Connections the proxy cut, and those it accepted while stalled. */
  proxy: { dropped: number; stalled: number };
  violations: {
    /** An acknowledged write not in the table. */
    lost: number;
    /** A write rejected as not sent, or refused by the server, that is in the table. */
    phantom: number;
    /** An id in the table more than once. */
    duplicated: number;
    /** A transaction with some of its rows in the table and not others. */
    partial: number;
    /** A rejection without an outcome, or not one of pgpipe's error classes. */
    untyped: number;
    /** Operations still unsettled 30 s after the faults stopped. */
    pending: number;
    /** Unhandled promise rejections. */
    unhandled: number;
    /** Samples of pg_stat_activity with more live backends of the client than `max`. */
    overMax: number;
    /** Backends of the client left 10 s after sql.end(). */
    leftover: number;
    /** An acknowledged row a reader could not see. */
    unseen: number;
    /** The client did not answer after the faults. */
    deaf: number;
  };
  /** The first few untyped errors, for the report. */
  examples: string[];
}

type Status = "pending" | "acked" | "not-sent" | "refused" | "unknown";

/** Status codes in the per-id byte array (0: never written). */
const CODE: Record<Status, number> = {
  "pending": 1,
  "acked": 2,
  "not-sent": 3,
  "refused": 4,
  "unknown": 5,
};

/** A byte per id that grows as ids are handed out: bookkeeping that stays small for hours. */
class Bytes {
  a = new Uint8Array(1 << 16);
  set(i: number, v: number): void {
    if (i >= this.a.length) {
      const b = new Uint8Array(Math.max(this.a.length * 2, i + 1));
      b.set(this.a);
      this.a = b;
    }
    this.a[i] = v;
  }
  get(i: number): number {
    return i < this.a.length ? this.a[i] : 0;
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Open file descriptors (Linux), or 0 where /proc/self/fd cannot be read. */
function fds(): number {
  try {
    return [...Deno.readDirSync("/proc/self/fd")].length;
  } catch {
    return 0;
  }
}

/** RSS, after a full collection when the process runs with `--v8-flags=--expose-gc`. */
function rss(): number {
  (globalThis as { gc?: () => void }).gc?.();
  return Deno.memoryUsage().rss;
}

/** How a rejection counts: not sent or refused (must be absent), unknown (may be), or untyped. */
function classify(e: unknown): Status | "untyped" {
  if (e instanceof PostgresError) return "refused";
  if (e instanceof QueryError) return "not-sent"; // refused before sending (QUEUE_FULL, ...)
  if (e instanceof ConnectionError) {
    if (e.outcome === "not-sent") return "not-sent";
    if (e.outcome === "unknown") return "unknown";
  }
  return "untyped";
}

/** Runs the soak against `target`; the caller owns the servers and the proxy. */
export async function soak(target: SoakTarget, plan: SoakPlan): Promise<SoakReport> {
  const log = (...a: unknown[]) => plan.verbose && console.log(`[soak ${elapsed()} s]`, ...a);
  const started = Date.now();
  const elapsed = () => ((Date.now() - started) / 1000).toFixed(1);
  const app = `pgpipe_soak_${started}`;
  const quiet = { onnotice: () => {} };
  let admin: Sql = postgres(target.adminUrl(), { ...quiet, max: 1, connect_timeout: 5 });
  const table = `soak_${started}`;
  // Not unique, so a write that ran twice shows; indexed, so reads stay cheap as it grows.
  await admin`create table ${admin(table)} (id int not null, kind text not null)`;
  await admin`create index on ${admin(table)} (id)`;

  const report: SoakReport = {
    seconds: plan.seconds,
    ops: 0,
    acked: 0,
    notSent: 0,
    refused: 0,
    unknownPresent: 0,
    unknownAbsent: 0,
    faults: {},
    maxBackends: 0,
    rss: { warm: 0, mid: 0, end: 0 },
    fds: { warm: 0, end: 0 },
    proxy: { dropped: 0, stalled: 0 },
    violations: noViolations(),
    examples: [],
  };
  const v = report.violations;
  const untyped = (what: string, e: unknown) => {
    v.untyped++;
    if (report.examples.length < 5) report.examples.push(`${what}: ${Deno.inspect(e)}`);
  };
  const onUnhandled = (e: PromiseRejectionEvent) => {
    e.preventDefault();
    v.unhandled++;
    if (report.examples.length < 5) report.examples.push(`unhandled: ${Deno.inspect(e.reason)}`);
  };
  globalThis.addEventListener("unhandledrejection", onUnhandled);

  const sql = postgres(target.clientUrl, {
    ...quiet,
    max: plan.max,
    connect_timeout: 3,
    connection: { application_name: app },
    ...target.options,
  });

  // Every id written, with its status; a transaction writes three consecutive ids, and its
  // first id is marked in `groups`.
  const status = new Bytes();
  const groups = new Bytes();
  const acked: number[] = []; // recent acknowledged ids, for the readers
  let nextId = 1;
  let stop = false;
  let inFlight = 0;

  const settle = (ids: number[], s: Status) => {
    for (const id of ids) status.set(id, CODE[s]);
    if (s === "acked") { for (const id of ids) acked.push(id); }
    if (acked.length > 10_000) acked.splice(0, 5_000);
  };
  const track = async (ids: number[], run: () => Promise<unknown>) => {
    for (const id of ids) status.set(id, CODE.pending);
    inFlight++;
    report.ops++;
    try {
      await run();
      settle(ids, "acked");
    } catch (e) {
      const s = classify(e);
      if (s === "untyped") {
        untyped("write", e);
        settle(ids, "unknown");
      } else settle(ids, s);
    } finally {
      inFlight--;
    }
  };

  const writer = async () => {
    while (!stop) {
      const id = nextId++;
      await track([id], () => sql`insert into ${sql(table)} (id, kind) values (${id}, 'a')`);
    }
  };
  const txWriter = async () => {
    while (!stop) {
      const ids = [nextId++, nextId++, nextId++];
      groups.set(ids[0], 1);
      await track(
        ids,
        () =>
          sql.begin((tx) =>
            ids.map((id) => tx`insert into ${tx(table)} (id, kind) values (${id}, 't')`)
          ),
      );
    }
  };
  const reader = async () => {
    while (!stop) {
      const id = acked.length > 0 ? acked[Math.floor(Math.random() * acked.length)] : 0;
      inFlight++;
      report.ops++;
      try {
        const rows = await sql`select id from ${sql(table)} where id = ${id}`;
        if (id !== 0 && rows.length === 0) {
          v.unseen++;
          if (report.examples.length < 5) report.examples.push(`unseen: id ${id}`);
        }
      } catch (e) {
        if (classify(e) === "untyped") untyped("read", e);
      } finally {
        inFlight--;
      }
      await sleep(5);
    }
  };

  // pg_stat_activity: live backends of the client (terminated ones and those whose connection
  // the proxy closed are on their way out and not counted).
  const terminated = new Set<number>();
  let sampling = true;
  const sampler = (async () => {
    if (target.backendsVisible === false) return;
    while (sampling) {
      try {
        // Client backends only: parallel workers of a client's query carry its application_name.
        const rows = await admin`
          select pid, client_port from pg_stat_activity
          where application_name = ${app} and backend_type = 'client backend'`;
        const live = rows.filter((r) =>
          !terminated.has(r.pid as number) &&
          !target.proxy.closedPorts.has(r.client_port as number)
        ).length;
        report.maxBackends = Math.max(report.maxBackends, live);
        if (live > plan.max) {
          v.overMax++;
          if (report.examples.length < 5) {
            report.examples.push(`over max: ${JSON.stringify([...rows])}`);
          }
        }
      } catch {
        // the server is restarting
      }
      await sleep(50);
    }
  })();

  const faults = async () => {
    const until = started + plan.seconds * 1000;
    let turn = 0;
    await sleep(Math.min(plan.every, 1000));
    const warmAt = started + plan.seconds * 100;
    const midAt = started + plan.seconds * 500;
    while (Date.now() < until) {
      if (report.rss.warm === 0 && Date.now() >= warmAt) {
        report.rss.warm = rss();
        report.fds.warm = fds();
      }
      if (report.rss.mid === 0 && Date.now() >= midAt) report.rss.mid = rss();
      const fault = plan.faults[turn++ % plan.faults.length];
      if (fault === "failover" && report.faults.failover) continue; // there is one standby
      report.faults[fault] = (report.faults[fault] ?? 0) + 1;
      log(`fault ${fault}; in flight ${inFlight}, ops ${report.ops}`);
      try {
        switch (fault) {
          case "terminate": {
            const rows = target.terminateAll
              ? await admin`
                select pid from pg_stat_activity
                where backend_type = 'client backend' and pid <> pg_backend_pid()`
              : await admin`select pid from pg_stat_activity where application_name = ${app}`;
            for (const r of rows) terminated.add(r.pid as number);
            await admin`select pg_terminate_backend(pid) from unnest(${
              rows.map((r) => r.pid as number)
            }::int[]) pid`;
            break;
          }
          case "drop":
            target.proxy.drop();
            break;
          case "stall":
            target.proxy.stall(true);
            target.proxy.drop(); // every connection must be opened again, into the stall
            await sleep(Math.min(1500, plan.every));
            target.proxy.stall(false);
            break;
          case "restart":
            await target.restart?.();
            break;
          case "failover":
            await target.failover?.();
            await admin.end({ timeout: 1 }).catch(() => {});
            admin = postgres(target.adminUrl(), { ...quiet, max: 1, connect_timeout: 5 });
            break;
        }
      } catch (e) {
        log(`fault ${fault} failed: ${e}`);
      }
      await sleep(plan.every);
    }
  };

  const workers = [
    ...Array.from({ length: plan.writers }, writer),
    ...Array.from({ length: plan.txWriters }, txWriter),
    ...Array.from({ length: plan.readers }, reader),
  ];
  await faults();
  log(`faults over; in flight ${inFlight}`);
  // The client answers again once the faults stop (the first try may meet the last fault).
  const deadline = Date.now() + 30_000;
  for (;;) {
    const answered = await Promise.race([
      sql`select 1 as one`.then(() => true, (e) => {
        log(`select 1 after the faults: ${e}`);
        return false;
      }),
      sleep(30_000).then(() => false),
    ]);
    if (answered) break;
    if (Date.now() > deadline) {
      v.deaf++;
      break;
    }
    await sleep(100);
  }
  stop = true;
  const settled = await Promise.race([
    Promise.all(workers).then(() => true),
    sleep(30_000).then(() => false),
  ]);
  if (!settled) v.pending = inFlight;
  report.rss.end = rss();
  report.fds.end = fds();
  sampling = false;
  await sampler;
  await sql.end({ timeout: 5 });

  // Backends of the client gone (exiting ones take a moment).
  if (target.backendsVisible !== false) {
    const left = async () =>
      (await admin`
        select count(*)::int as n from pg_stat_activity where application_name = ${app}`)[0]
        .n as number;
    if (await poll(async () => await left() === 0, 10_000, 50) === undefined) {
      v.leftover = await left();
    }
  }

  // Per-id bookkeeping: the table read in id order through a cursor, one byte per id.
  const counts = new Bytes();
  for await (
    const rows of admin`select id from ${admin(table)} order by id`.values().cursor(10_000)
  ) {
    for (const [id] of rows as unknown as [number][]) {
      counts.set(id, Math.min(255, counts.get(id) + 1));
    }
  }
  for (let id = 1; id < nextId; id++) {
    const n = counts.get(id);
    const s = status.get(id);
    if (n > 1) v.duplicated++;
    if (s === CODE.pending) v.pending++;
    else if (s === CODE.acked) {
      report.acked++;
      if (n === 0) {
        v.lost++;
        const group = [id, id - 1, id - 2].find((g) => groups.get(g) === 1);
        const kind = group === undefined ? "autocommit insert" : `transaction from ${group}`;
        if (report.examples.length < 5) report.examples.push(`lost: id ${id} (${kind})`);
      }
    } else if (s === CODE["not-sent"] || s === CODE.refused) {
      if (s === CODE["not-sent"]) report.notSent++;
      else report.refused++;
      if (n > 0) v.phantom++;
    } else if (s === CODE.unknown) {
      if (n > 0) report.unknownPresent++;
      else report.unknownAbsent++;
    }
    if (groups.get(id) === 1) {
      const present = [id, id + 1, id + 2].filter((i) => counts.get(i) > 0).length;
      if (present !== 0 && present !== 3) v.partial++;
    }
  }
  report.proxy = { dropped: target.proxy.dropped, stalled: target.proxy.stalled };
  await admin`drop table ${admin(table)}`;
  await admin.end();
  globalThis.removeEventListener("unhandledrejection", onUnhandled);
  return report;
}
