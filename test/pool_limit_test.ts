/**
 * The pool never holds more than `max` sockets to the server, however connections die and are
 * replaced: backends terminated under load, connect attempts that time out against a server that
 * accepts and never answers, connections retired by idle_timeout and max_lifetime while others
 * open. Every socket the driver opens goes through a `socket` function that counts it from its
 * creation until the driver destroys it (or it closes), so the count is exact, not sampled.
 */
import assert from "node:assert/strict";
import * as net from "node:net";
import postgres from "./harness/postgres.ts";
import { databaseUrl } from "./harness/env.ts";
import { quiet } from "./harness/connect.ts";
import { delay, until, within } from "./harness/wait.ts";

const url = databaseUrl();
const server = new URL(url.replace(/^postgres(ql)?:/, "http:"));

Deno.test("max 4 under churn: terminated backends, timed-out connects, retirements: never more than 4 sockets, none after end()", async () => {
  // A server that accepts and never answers: connecting to it times out.
  const stall = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const stalled: Deno.Conn[] = [];
  const accepting = (async () => {
    for await (const c of stall) stalled.push(c);
  })();
  const live = new Set<net.Socket>();
  let most = 0;
  let opened = 0;
  let stallNext = false;
  const track = (s: net.Socket) => {
    live.add(s);
    opened++;
    most = Math.max(most, live.size);
    const destroy = s.destroy.bind(s);
    s.destroy = (e?: Error) => {
      live.delete(s);
      return destroy(e);
    };
    s.on("close", () => live.delete(s));
    return s;
  };
  const app = `pgpipe_limit_${Date.now()}`;
  const sql = postgres(url, {
    ...quiet,
    max: 4,
    connect_timeout: 0.3,
    idle_timeout: 0.2,
    max_lifetime: 0.5,
    connection: { application_name: app },
    socket: () => {
      const port = stallNext ? (stall.addr as Deno.NetAddr).port : Number(server.port);
      stallNext = false;
      return track(net.connect(port, "127.0.0.1"));
    },
  });
  await using admin = postgres(url, { max: 1, ...quiet });
  let stop = false;
  let ok = 0;
  const workers = Array.from({ length: 50 }, async (_, w) => {
    while (!stop) {
      await sql`select ${w}::int as w, pg_sleep(0.002)`.then(() => ok++, () => {});
    }
  });
  try {
    const until = Date.now() + 3000;
    let round = 0;
    while (Date.now() < until) {
      round++;
      if (round % 3 === 0) stallNext = true; // the next connect attempt times out
      await admin`
        select pg_terminate_backend(pid) from pg_stat_activity
        where application_name = ${app} and pid <> pg_backend_pid()`;
      await delay(100); // the pool refills meanwhile, through the stalls
      assert.ok(live.size <= 4, `${live.size} sockets open on max 4`);
    }
  } finally {
    stop = true;
    await within(Promise.all(workers), 15_000, "the workers");
    await within(sql.end({ timeout: 5 }), 10_000, "sql.end()");
    stall.close();
    for (const c of stalled) {
      try {
        c.close();
      } catch { /* closed by the driver's side already */ }
    }
    await accepting.catch(() => {});
  }
  assert.ok(opened > 8, `only ${opened} sockets opened: the faults did not churn the pool`);
  assert.ok(ok > 0, "queries went through between the faults");
  assert.ok(stalled.length > 0, "no connect attempt met the stalled server");
  assert.ok(most <= 4, `${most} sockets were open at once on max 4`);
  assert.equal(live.size, 0, "sockets left open after sql.end()");
  // The server side agrees: every backend of this client is gone (exiting ones leave shortly).
  await until("every backend gone after sql.end()", async () => {
    const [{ n }] = await admin`
      select count(*)::int as n from pg_stat_activity where application_name = ${app}`;
    return n === 0;
  });
});

Deno.test("transactions keeping every connection busy do not starve plain queries (found by the chaos soak)", async () => {
  await using sql = postgres(url, { ...quiet, max: 2 });
  let stop = false;
  let transactions = 0;
  // Always more transactions waiting for a connection than there are connections.
  const workers = Array.from({ length: 6 }, async () => {
    while (!stop) {
      await sql.begin((tx) => tx`select pg_sleep(0.005)`);
      transactions++;
    }
  });
  try {
    await until("the transactions under way", () => transactions >= 6);
    const rows = await within(
      Promise.all(Array.from({ length: 10 }, (_, i) => sql`select ${i}::int as i`.execute())),
      5000,
      "queries beside the transactions",
    );
    assert.deepEqual(rows.map((r) => r[0].i), Array.from({ length: 10 }, (_, i) => i));
    const before = transactions;
    await until("the transactions kept running too", () => transactions > before);
  } finally {
    stop = true;
    await Promise.all(workers);
  }
});

Deno.test("a burst of queries and transactions before any connection is open: every acknowledged write is stored once", async () => {
  await using admin = postgres(url, { max: 1, ...quiet });
  await admin`drop table if exists pool_burst`;
  await admin`create table pool_burst (id int not null)`;
  try {
    await using sql = postgres(url, { ...quiet, max: 4 });
    let next = 1;
    const acked: number[] = [];
    const writes: Promise<unknown>[] = [];
    for (let i = 0; i < 160; i++) {
      const id = next++;
      writes.push(sql`insert into pool_burst values (${id})`.then(() => acked.push(id)));
    }
    for (let i = 0; i < 20; i++) {
      const ids = [next++, next++, next++];
      writes.push(
        sql.begin((tx) => ids.map((id) => tx`insert into pool_burst values (${id})`))
          .then(() => acked.push(...ids)),
      );
    }
    await within(Promise.all(writes), 10_000, "the burst");
    const stored = (await admin`select id from pool_burst order by id`).map((r) => r.id as number);
    assert.deepEqual(stored, acked.sort((a, b) => a - b));
    assert.equal(stored.length, 220);
  } finally {
    await admin`drop table pool_burst`;
  }
});
