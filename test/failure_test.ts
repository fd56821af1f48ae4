/**
 * Failures: a backend killed mid-pipeline, unwritten requests re-sent once, a
 * server restart, a server that goes silent, stale prepared statements, and
 * the bounded local queue.
 */
import assert from "node:assert/strict";
import postgres, { ConnectionError, PostgresError, QueryError } from "./harness/postgres.ts";
import { type Cluster, findPgBin, startCluster } from "./harness/cluster.ts";
import { databaseUrl } from "./harness/env.ts";
import { delay, until, untilSleeping, within } from "./harness/wait.ts";
import { CANCEL, SERVER_PROCESS, serverTest } from "./harness/pglite_mode.ts";

const url = databaseUrl();
const quiet = { onnotice: () => {} };

serverTest(
  SERVER_PROCESS,
  "1000 queries in flight when the backend is terminated: all settle with typed outcomes",
  async () => {
    await using sql = postgres(url, { max: 1, ...quiet });
    await using admin = postgres(url, { max: 1, ...quiet });
    const [{ pid }] = await sql`select pg_backend_pid() as pid`;
    let answered = 0;
    const count = () => answered++;
    const inflight = Array.from({ length: 1000 }, (_, i) => {
      const q = sql`select ${i}::int as i, pg_sleep(0.0005)`.execute();
      q.then(count, count);
      return q;
    });
    await until("the first answers", () => answered > 0); // mid-pipeline from here
    await admin`select pg_terminate_backend(${pid})`;
    const outcomes = await within(Promise.allSettled(inflight), 5000, "the in-flight queries");
    let rejected = 0;
    for (const [i, o] of outcomes.entries()) {
      if (o.status === "fulfilled") {
        assert.equal(o.value[0].i, i);
        continue;
      }
      rejected++;
      assert.ok(o.reason instanceof ConnectionError, String(o.reason));
      assert.equal(o.reason.code, "CONNECTION_CLOSED");
      assert.equal(
        o.reason.outcome,
        "unknown",
        "only queries that were written fail; the rest are re-sent",
      );
    }
    assert.ok(rejected > 0);
    const [{ pid: after }] = await sql`select pg_backend_pid() as pid`;
    assert.notEqual(after, pid);
  },
);

serverTest(
  SERVER_PROCESS,
  "requests not yet written when the connection dies are re-sent once, never twice",
  async () => {
    await using admin = postgres(url, { max: 1, ...quiet });
    await admin`drop table if exists resent`;
    await admin`create table resent (id int primary key)`;
    try {
      await using sql = postgres(url, { max: 1, max_pipeline: 5, ...quiet });
      const [{ pid }] = await sql`select pg_backend_pid() as pid`;
      const blocker = sql`select pg_sleep(0.3)`.execute();
      const inserts = Array.from(
        { length: 200 },
        (_, i) => sql`insert into resent values (${i})`.execute(),
      );
      await untilSleeping(admin, pid); // the blocker runs: the inserts past max_pipeline wait
      await admin`select pg_terminate_backend(${pid})`;
      await blocker.catch(() => {});
      const outcomes = await within(Promise.allSettled(inserts), 5000, "the inserts");
      const ids = new Set((await admin`select id from resent`).map((r) => r.id as number));
      for (const [i, o] of outcomes.entries()) {
        if (o.status === "fulfilled") assert.ok(ids.has(i), `insert ${i} resolved but is missing`);
        else {
          assert.ok(o.reason instanceof ConnectionError, String(o.reason));
          assert.equal(
            o.reason.outcome,
            "unknown",
            `insert ${i} was not sent yet, so it must be re-sent`,
          );
        }
      }
      const resolved = outcomes.filter((o) => o.status === "fulfilled").length;
      assert.ok(resolved >= 190, `${resolved} of 200 unwritten inserts were re-sent and ran`);
    } finally {
      await admin`drop table resent`;
    }
  },
);

serverTest(SERVER_PROCESS, {
  name:
    "a server restart: queries during the outage wait and succeed; a long outage rejects at connect_timeout",
  ignore: findPgBin() === null,
  async fn() {
    const cluster: Cluster = await startCluster({ name: "restart" });
    try {
      const target = `postgres://${cluster.users.trust.user}@127.0.0.1:${cluster.port}/postgres`;
      await using sql = postgres(target, { max: 2, connect_timeout: 10, ...quiet });
      assert.equal((await sql`select 1 as one`)[0].one, 1);
      await cluster.halt();
      const during = Array.from({ length: 10 }, (_, i) => sql`select ${i}::int as i`.execute());
      await delay(300); // an outage that lasts
      await cluster.resume();
      const rows = await within(Promise.all(during), 10_000, "queries issued during the outage");
      assert.deepEqual(rows.map((r) => r[0].i), Array.from({ length: 10 }, (_, i) => i));

      await using short = postgres(target, { max: 1, connect_timeout: 1, ...quiet });
      await short`select 1`;
      await cluster.halt();
      const started = Date.now();
      const err = await within(
        short`select 2`.then(() => null, (e) => e),
        5000,
        "the outage query",
      );
      assert.ok(err instanceof ConnectionError, String(err));
      assert.ok(["CONNECT_TIMEOUT", "CONNECTION_CLOSED"].includes(err.code), err.code);
      assert.ok(Date.now() - started >= 900, "it waited for the server first");
      await cluster.resume();
      assert.equal((await short`select 3 as three`)[0].three, 3);
    } finally {
      await cluster.stop();
    }
  },
});

serverTest(
  CANCEL,
  "query_timeout: a server gone silent mid-query is cancelled, then the connection destroyed",
  async () => {
    // A proxy that forwards until told to black-hole the server's answers.
    const target = new URL(url.replace(/^postgres(ql)?:/, "http:"));
    const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    let silent = false;
    const conns: Deno.Conn[] = [];
    const accepting = (async () => {
      for await (const client of listener) {
        const server = await Deno.connect({ hostname: target.hostname, port: Number(target.port) });
        conns.push(client, server);
        client.readable.pipeTo(server.writable).catch(() => {});
        (async () => {
          const buf = new Uint8Array(65536);
          for (;;) {
            const n = await server.read(buf).catch(() => null);
            if (n === null) break;
            if (!silent) await client.write(buf.subarray(0, n)).catch(() => {});
          }
        })();
      }
    })();
    const port = (listener.addr as Deno.NetAddr).port;
    const sql = postgres(url.replace(/@[^/]+\//, `@127.0.0.1:${port}/`), {
      max: 1,
      ssl: false,
      query_timeout: 0.2,
      ...quiet,
    });
    try {
      await sql`select 1`;
      silent = true;
      const started = Date.now();
      const err = await within(sql`select 2`.then(() => null, (e) => e), 3000, "the silent query");
      assert.ok(err instanceof ConnectionError, String(err));
      assert.equal(err.code, "QUERY_TIMEOUT");
      assert.ok(Date.now() - started >= 300);
      silent = false;
      assert.equal((await sql`select 3 as three`)[0].three, 3, "a new connection works");
      // A slow but live query with query_timeout is cancelled on the server (57014), not destroyed.
      await assert.rejects(
        sql`select pg_sleep(2)`,
        (e) => e instanceof PostgresError && e.code === "57014",
      );
    } finally {
      await sql.end({ timeout: 1 });
      listener.close();
      for (const c of conns) {
        try {
          c.close();
        } catch {
          // already closed
        }
      }
      await accepting.catch(() => {});
    }
  },
);

Deno.test("stale prepared statements are re-prepared once, outside transactions only", async () => {
  await using sql = postgres(url, { max: 1, ...quiet });
  await sql`drop table if exists stale`;
  await sql`create table stale (a int)`;
  await sql`insert into stale values (1)`;
  const read = () => sql`select * from stale`;
  assert.deepEqual([...await read()], [{ a: 1 }]);
  await sql`alter table stale add column b text default 'x'`;
  assert.deepEqual([...await read()], [{ a: 1, b: "x" }], "0A000 cached plan: re-prepared");
  await sql.unsafe("deallocate all");
  assert.deepEqual([...await read()], [{ a: 1, b: "x" }], "26000 statement gone: re-prepared");
  await sql`alter table stale add column c int default 7`;
  await assert.rejects(
    sql.begin((tx) => tx`select * from stale`),
    (e) => e instanceof PostgresError && e.code === "0A000",
    "inside a transaction the error is reported, not retried",
  );
  assert.deepEqual([...await read()], [{ a: 1, b: "x", c: 7 }]);
  await sql`drop table stale`;
});

Deno.test("max_queue bounds local waiting with a clear error", async () => {
  await using sql = postgres(url, { max: 1, max_pipeline: 1, max_queue: 5, ...quiet });
  await sql`select 1`;
  const outcomes = await Promise.allSettled(
    Array.from({ length: 20 }, (_, i) => sql`select ${i}::int as i`.execute()),
  );
  const full = outcomes.filter((o) => o.status === "rejected");
  assert.ok(full.length > 0);
  for (const o of full) {
    const reason = (o as PromiseRejectedResult).reason;
    assert.ok(reason instanceof QueryError && reason.code === "QUEUE_FULL", String(reason));
  }
  assert.ok(outcomes.filter((o) => o.status === "fulfilled").length >= 5);
  assert.equal((await sql`select 9 as nine`)[0].nine, 9);
});

Deno.test("1,000,000 rows read through a cursor arrive complete and in order", async () => {
  await using sql = postgres(url, { max: 1, ...quiet });
  let n = 0;
  let sum = 0;
  for await (const rows of sql`select g from generate_series(1, 1000000) g`.cursor(5000)) {
    for (const r of rows) {
      n++;
      sum += r.g as number;
    }
  }
  assert.equal(n, 1_000_000);
  assert.equal(sum, 500000500000);
});
