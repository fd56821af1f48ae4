/** Transactions, savepoints, reserved connections and LISTEN/NOTIFY against a real server. */
import assert from "node:assert/strict";
import postgres, { PostgresError, QueryError } from "./harness/postgres.ts";
import { databaseUrl } from "./harness/env.ts";
import { until } from "./harness/wait.ts";
import { SERVER_PROCESS, serverTest, SEVERAL_SESSIONS } from "./harness/pglite_mode.ts";

const url = databaseUrl();
const quiet = { onnotice: () => {} };

serverTest(SEVERAL_SESSIONS, "begin commits on success and rolls back on a throw", async () => {
  await using sql = postgres(url, { max: 2, ...quiet });
  await sql`create table if not exists tx_a (x int)`;
  await sql`truncate tx_a`;
  const out = await sql.begin(async (tx) => {
    await tx`insert into tx_a values (1)`;
    const [{ n }] = await tx`select count(*)::int as n from tx_a`;
    return n;
  });
  assert.equal(out, 1);
  await assert.rejects(
    sql.begin(async (tx) => {
      await tx`insert into tx_a values (2)`;
      throw new Error("boom");
    }),
    /boom/,
  );
  await assert.rejects(
    sql.begin(async (tx) => {
      await tx`insert into tx_a values (3)`;
      await tx`select 1/0`;
    }),
    (e) => e instanceof PostgresError && e.code === "22012",
  );
  const rows = await sql`select x from tx_a order by x`;
  assert.deepEqual(rows.map((r) => r.x), [1]);
  await sql`drop table tx_a`;
});

Deno.test("begin with modes, and a returned array of queries is pipelined and awaited", async () => {
  await using sql = postgres(url, { max: 1, ...quiet });
  const [level, ro] = await sql.begin("isolation level serializable read only", (tx) => [
    tx`show transaction_isolation`,
    tx`show transaction_read_only`,
  ]);
  assert.equal(level[0].transaction_isolation, "serializable");
  assert.equal(ro[0].transaction_read_only, "on");
  await assert.rejects(
    sql.begin("read only; drop table x", () => 1),
    (e) => e instanceof QueryError && e.code === "INVALID_TRANSACTION_MODE",
  );
  await assert.rejects(
    sql.begin("read only", (tx) => tx`create temp table nope (x int)`),
    (e) => e instanceof PostgresError && e.code === "25006",
  );
});

Deno.test("savepoints roll back their part only, and nest", async () => {
  await using sql = postgres(url, { max: 1, ...quiet });
  const rows = await sql.begin(async (tx) => {
    await tx`create temp table sp (x int)`;
    await tx`insert into sp values (1)`;
    await assert.rejects(
      tx.savepoint(async (sp) => {
        await sp`insert into sp values (2)`;
        throw new Error("undo 2");
      }),
      /undo 2/,
    );
    await tx.savepoint("outer", async (sp) => {
      await sp`insert into sp values (3)`;
      await sp.savepoint(async (inner) => {
        await inner`insert into sp values (4)`;
      });
    });
    return await tx`select x from sp order by x`;
  });
  assert.deepEqual(rows.map((r) => r.x), [1, 3, 4]);
});

Deno.test("await using a transaction rolls back unless committed", async () => {
  await using sql = postgres(url, { max: 1, ...quiet });
  await sql`create table if not exists tx_b (x int)`;
  await sql`truncate tx_b`;
  {
    await using tx = await sql.begin();
    await tx`insert into tx_b values (1)`;
  }
  {
    await using tx = await sql.begin();
    await tx`insert into tx_b values (2)`;
    await tx.commit();
  }
  assert.deepEqual((await sql`select x from tx_b`).map((r) => r.x), [2]);
  await sql`drop table tx_b`;
});

Deno.test("a transaction's connection is never shared while it is open", async () => {
  await using sql = postgres(url, { max: 1, ...quiet });
  await sql`create table if not exists tx_c (x int)`;
  await sql`truncate tx_c`;
  let outside: Promise<{ n: number; xid: unknown }[]> | null = null;
  await sql.begin(async (tx) => {
    await tx`insert into tx_c values (1)`;
    // With max 1 this must wait for the transaction, not run inside it.
    outside = sql<{ n: number; xid: unknown }[]>`
      select count(*)::int as n, pg_current_xact_id_if_assigned() as xid from tx_c`.execute()
      .then((r) => [...r]);
    // Had the outside query been put on this connection, it went before this round trip.
    await tx`select 1`;
    await tx`insert into tx_c values (2)`;
  });
  const [row] = await outside!;
  assert.equal(row.n, 2, "the outside query saw the committed rows, so it ran after the commit");
  assert.equal(row.xid, null, "it did not run inside the transaction");
  await sql`drop table tx_c`;
});

serverTest(
  SEVERAL_SESSIONS,
  "reserve gives one connection to one caller; release returns it",
  async () => {
    await using sql = postgres(url, { max: 2, ...quiet });
    const reserved = await sql.reserve();
    const [{ pid }] = await reserved`select pg_backend_pid() as pid`;
    const pids = await Promise.all(
      Array.from({ length: 20 }, () => sql`select pg_backend_pid() as pid`),
    );
    assert.ok(pids.every((r) => r[0].pid !== pid), "shared queries avoid the reserved connection");
    await reserved`begin`;
    await reserved`set local application_name = 'inside'`;
    reserved.release(); // left inside a transaction: rolled back before reuse
    const rows = await Promise.all(
      Array.from({ length: 20 }, () => sql`select current_setting('application_name') as app`),
    );
    assert.ok(
      rows.every((r) => r[0].app === "pgpipe"),
      "no query ran inside the abandoned transaction",
    );
    {
      await using r2 = await sql.reserve();
      assert.equal((await r2`select 1 as one`)[0].one, 1);
    }
  },
);

Deno.test("listen and notify; payloads arrive in order; unlisten stops them", async () => {
  await using sql = postgres(url, { max: 1, ...quiet });
  const got: string[] = [];
  let listens = 0;
  const handle = await sql.listen("pgpipe test", (p) => got.push(p), () => listens++);
  assert.equal(listens, 1);
  assert.ok(handle.state.pid > 0);
  for (let i = 0; i < 5; i++) await sql.notify("pgpipe test", `m${i}`);
  await until("the five notifications", () => got.length === 5);
  assert.deepEqual(got, ["m0", "m1", "m2", "m3", "m4"]);
  // A second channel on the same listening connection, still listened to after the unlisten:
  // the server delivers a session's notifications in commit order, so once the one sent to it
  // last arrives, one sent before it to the unlistened channel would have arrived too.
  const marks: string[] = [];
  const mark = await sql.listen("pgpipe test mark", (p) => marks.push(p));
  assert.equal(mark.state.pid, handle.state.pid, "one listening connection");
  await handle.unlisten();
  await sql.notify("pgpipe test", "after");
  await sql.notify("pgpipe test mark", "sent after");
  await until("the later notification", () => marks.length === 1);
  assert.deepEqual(got, ["m0", "m1", "m2", "m3", "m4"]);
});

serverTest(
  SERVER_PROCESS,
  "listeners survive the listening connection being terminated",
  async () => {
    await using sql = postgres(url, { max: 1, ...quiet });
    const got: string[] = [];
    let listens = 0;
    const { state } = await sql.listen("pgpipe_reconnect", (p) => got.push(p), () => listens++);
    await sql`select pg_terminate_backend(${state.pid})`;
    await until("the listener's second onlisten", () => listens === 2);
    await sql.notify("pgpipe_reconnect", "back");
    await until("the notification after the reconnect", () => got.includes("back"));
  },
);
