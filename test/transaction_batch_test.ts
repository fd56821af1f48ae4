/**
 * Inside sql.begin, queries written together share one Sync (a batch): an error aborts the
 * transaction anyway, so the server may skip the rest. These tests check the wire shape, and
 * that every query of a batch settles with a clear outcome when one fails, is cancelled, or the
 * connection is lost in the middle of it.
 */
import assert from "node:assert/strict";
import postgres, { ConnectionError, PostgresError } from "./harness/postgres.ts";
import { databaseUrl } from "./harness/env.ts";
import { tapProxy } from "./harness/tap_proxy.ts";
import { untilSleeping } from "./harness/wait.ts";
import { CANCEL, NETWORK, SERVER_PROCESS, serverTest } from "./harness/pglite_mode.ts";

const url = databaseUrl();
const quiet = { onnotice: () => {} };

/** Asserts `e` is the error of a query the server skipped because `cause` aborted its batch. */
function assertSkipped(e: unknown, causeCode: string): PostgresError {
  assert.ok(e instanceof PostgresError, `expected a PostgresError, got ${e}`);
  assert.equal(e.code, "25P02");
  assert.match(e.message, /current transaction is aborted/);
  assert.match(e.detail ?? "", /earlier query written in the same batch/);
  assert.ok(e.cause instanceof PostgresError, "the error that aborted the batch is its cause");
  assert.equal((e.cause as PostgresError).code, causeCode);
  return e;
}

serverTest(
  NETWORK,
  "transaction batch: 200 queries written together carry one Sync; outside a transaction one each",
  async () => {
    await using proxy = tapProxy(url);
    const { sql, state } = proxy;
    await sql`select 1`;
    state.recording = true;
    const inside = await sql.begin(async (tx) => {
      await tx`create temp table batch_sync (x int)`;
      state.bytes = [];
      const done = await Promise.all(
        Array.from({ length: 200 }, (_, i) => tx`insert into batch_sync values (${i})`),
      );
      const types = proxy.types();
      const [{ n }] = await tx`select count(*)::int as n from batch_sync`;
      assert.equal(n, 200);
      return { done: done.length, types };
    });
    assert.equal(inside.done, 200);
    assert.equal(inside.types.filter((t) => t === "E").length, 200, "200 Executes");
    assert.deepEqual(inside.types.filter((t) => t === "S"), ["S"], "one Sync for the batch");
    assert.equal(inside.types.at(-1), "S");
    state.bytes = [];
    await Promise.all(Array.from({ length: 50 }, (_, i) => sql`select ${i}::int`));
    state.recording = false;
    const outside = proxy.types();
    assert.equal(outside.filter((t) => t === "S").length, 50, "outside a transaction: a Sync each");
  },
);

Deno.test("transaction batch: an error mid-batch fails that query with its error and the rest with 25P02, earlier ones resolve", async () => {
  await using sql = postgres(url, { max: 1, ...quiet });
  const outcomes: PromiseSettledResult<unknown>[] = [];
  const err = await sql.begin(async (tx) => {
    await tx`create temp table batch_err (x int primary key)`;
    const batch = [
      tx`insert into batch_err values (1)`,
      tx`insert into batch_err values (2) returning x`,
      tx`insert into batch_err values (1)`, // duplicate key: 23505
      tx`insert into batch_err values (3)`,
      tx`select x from batch_err`,
      tx`select ${"a fresh statement, never parsed"}::text as t`,
    ];
    outcomes.push(...await Promise.allSettled(batch));
    await tx`select 1`; // the transaction is aborted now: the server says so itself
  }).catch((e) => e);
  assert.equal(outcomes[0].status, "fulfilled");
  assert.equal(outcomes[1].status, "fulfilled");
  assert.deepEqual([...(outcomes[1] as PromiseFulfilledResult<unknown[]>).value], [{ x: 2 }]);
  const dup = (outcomes[2] as PromiseRejectedResult).reason;
  assert.ok(dup instanceof PostgresError);
  assert.equal(dup.code, "23505");
  for (
    const [i, text] of [[3, "insert into batch_err values (3)"], [4, "select x from batch_err"]]
  ) {
    const skipped = assertSkipped((outcomes[i as number] as PromiseRejectedResult).reason, "23505");
    assert.equal(skipped.query, text, "each skipped query's error names its own query");
  }
  assertSkipped((outcomes[5] as PromiseRejectedResult).reason, "23505");
  // The query after the batch got the server's own 25P02, and begin rejected with it.
  assert.ok(err instanceof PostgresError);
  assert.equal(err.code, "25P02");
  assert.equal(err.detail, undefined);
  // The connection was rolled back and is usable; the statement whose Parse was skipped is
  // prepared afresh, not reported as missing.
  const [{ t }] = await sql`select ${"a fresh statement, never parsed"}::text as t`;
  assert.equal(t, "a fresh statement, never parsed");
  const [{ exists }] = await sql`select to_regclass('pg_temp.batch_err') is not null as exists`;
  assert.equal(exists, false, "the transaction was rolled back");
});

Deno.test("transaction batch: an empty query in the middle of a batch settles and the rest run", async () => {
  await using sql = postgres(url, { max: 1, ...quiet });
  const [a, empty, b] = await sql.begin((tx) => [tx`select 1 as x`, tx``, tx`select 2 as x`]);
  assert.deepEqual([...a], [{ x: 1 }]);
  assert.equal(empty.command, null);
  assert.equal(empty.length, 0);
  assert.deepEqual([...b], [{ x: 2 }]);
});

Deno.test("transaction batch: ROLLBACK TO SAVEPOINT written right after a failing query still runs", async () => {
  await using sql = postgres(url, { max: 1, ...quiet });
  const result = await sql.begin(async (tx) => {
    await tx`create temp table batch_sp (x int)`;
    await tx`insert into batch_sp values (1)`;
    await tx`savepoint before_bad`;
    const [bad, rolled, after] = await Promise.allSettled([
      tx`select 1 / 0`,
      tx`rollback to savepoint before_bad`,
      tx`insert into batch_sp values (2)`,
    ]);
    assert.equal(bad.status, "rejected");
    assert.equal(((bad as PromiseRejectedResult).reason as PostgresError).code, "22012");
    assert.equal(rolled.status, "fulfilled", "the rollback was not skipped");
    assert.equal(after.status, "fulfilled");
    return await tx`select x from batch_sp order by x`;
  });
  assert.deepEqual(result.map((r) => r.x), [1, 2]);
});

Deno.test("transaction batch: tx.savepoint inside a batch rolls back only its own work", async () => {
  await using sql = postgres(url, { max: 1, ...quiet });
  const rows = await sql.begin(async (tx) => {
    await tx`create temp table batch_sp2 (x int)`;
    const a = tx`insert into batch_sp2 values (1)`.execute(); // written before the SAVEPOINT
    const sp = tx.savepoint(async (s) => {
      await Promise.all([s`insert into batch_sp2 values (2)`, s`select 1 / 0`]);
    });
    const [first, inner] = await Promise.allSettled([a, sp]);
    assert.equal(first.status, "fulfilled");
    assert.equal(inner.status, "rejected");
    assert.equal(((inner as PromiseRejectedResult).reason as PostgresError).code, "22012");
    await tx`insert into batch_sp2 values (3)`;
    return await tx`select x from batch_sp2 order by x`;
  });
  assert.deepEqual(rows.map((r) => r.x), [1, 3]);
});

serverTest(
  CANCEL,
  "transaction batch: a cancel mid-batch fails the running query with 57014 and skips the rest",
  async () => {
    await using sql = postgres(url, { max: 1, ...quiet });
    await using admin = postgres(url, { max: 1, ...quiet });
    const outcomes: PromiseSettledResult<unknown>[] = [];
    const result = await sql.begin(async (tx) => {
      const [{ pid }] = await tx`select pg_backend_pid() as pid`;
      const slow = tx`select pg_sleep(30)`;
      const all = Promise.allSettled([
        tx`select 1 as x`,
        slow,
        tx`select 2 as x`,
        tx`select 3 as x`,
      ]);
      await untilSleeping(admin, pid);
      slow.cancel();
      outcomes.push(...await all);
      return "callback finished";
    });
    // As with postgres.js, COMMIT of an aborted block is answered as a ROLLBACK, not an error.
    assert.equal(result, "callback finished");
    assert.equal(outcomes[0].status, "fulfilled");
    const cancelled = (outcomes[1] as PromiseRejectedResult).reason;
    assert.ok(cancelled instanceof PostgresError);
    assert.equal(cancelled.code, "57014");
    assertSkipped((outcomes[2] as PromiseRejectedResult).reason, "57014");
    assertSkipped((outcomes[3] as PromiseRejectedResult).reason, "57014");
    const [{ ok }] = await sql`select true as ok`;
    assert.equal(ok, true);
  },
);

serverTest(
  CANCEL,
  "transaction batch: cancelling a query behind the running one rejects it with 57014 (or its signal's reason)",
  async () => {
    await using sql = postgres(url, { max: 1, ...quiet });
    await using admin = postgres(url, { max: 1, ...quiet });
    for (const how of ["cancel()", "signal"] as const) {
      const outcomes: PromiseSettledResult<unknown>[] = [];
      const abort = new AbortController();
      const reason = new Error("caller gave up");
      await sql.begin(async (tx) => {
        const [{ pid }] = await tx`select pg_backend_pid() as pid`;
        const behind = how === "signal"
          ? tx`select 2 as x`.signal(abort.signal)
          : tx`select 2 as x`;
        const all = Promise.allSettled([tx`select pg_sleep(30)`, behind, tx`select 3 as x`]);
        await untilSleeping(admin, pid);
        if (how === "signal") abort.abort(reason);
        else behind.cancel();
        outcomes.push(...await all);
      });
      // The cancel can only stop what the server runs: the sleep ahead of the target.
      const running = (outcomes[0] as PromiseRejectedResult).reason;
      assert.ok(running instanceof PostgresError);
      assert.equal(running.code, "57014");
      const target = (outcomes[1] as PromiseRejectedResult).reason;
      if (how === "signal") assert.equal(target, reason, "rejects with the signal's reason");
      else {
        assert.ok(target instanceof PostgresError);
        assert.equal(target.code, "57014", "the cancelled query reports a cancel, not 25P02");
        assert.match(target.detail ?? "", /stopped its batch/);
      }
      assertSkipped((outcomes[2] as PromiseRejectedResult).reason, "57014");
    }
  },
);

serverTest(
  SERVER_PROCESS,
  "transaction batch: the connection lost mid-batch rejects every query of it and begin",
  async () => {
    await using sql = postgres(url, { max: 2, ...quiet });
    await using admin = postgres(url, { max: 1, ...quiet });
    let all: Promise<PromiseSettledResult<unknown>[]> | undefined;
    const err = await sql.begin(async (tx) => {
      const [{ pid }] = await tx`select pg_backend_pid() as pid`;
      all = Promise.allSettled([tx`select 1 as x`, tx`select pg_sleep(30)`, tx`select 2 as x`]);
      await untilSleeping(admin, pid);
      await admin`select pg_terminate_backend(${pid})`;
      await all;
    }).catch((e) => e);
    assert.ok(all !== undefined);
    const outcomes = await all;
    assert.ok(err instanceof ConnectionError, `begin rejects with a ConnectionError, got ${err}`);
    assert.equal(outcomes[0].status, "fulfilled", "the query answered before the loss resolves");
    for (const o of outcomes.slice(1)) {
      assert.equal(o.status, "rejected");
      assert.ok((o as PromiseRejectedResult).reason instanceof ConnectionError);
    }
    const [{ ok }] = await sql`select true as ok`;
    assert.equal(ok, true, "the pool opens a new connection");
  },
);
