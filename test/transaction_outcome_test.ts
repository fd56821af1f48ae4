/**
 * A transaction whose connection dies says whether it can have committed: `outcome` is
 * "not-sent" (nothing committed) until its COMMIT (or PREPARE TRANSACTION) was written, and
 * "unknown" once it was and its answer never came. Each test kills the connection at one point
 * and checks the outcome against what the table holds.
 */
import assert from "node:assert/strict";
import { mayEndTransaction } from "../src/query/transaction_end.ts";
import postgres, { ConnectionError, type Sql, type TransactionSql } from "./harness/postgres.ts";
import { databaseUrl } from "./harness/env.ts";
import { quiet } from "./harness/connect.ts";
import { type TapProxy, tapProxy } from "./harness/tap_proxy.ts";
import { settledYet, until, untilSleeping, within } from "./harness/wait.ts";
import { NETWORK, SERVER_PROCESS, serverTest, SEVERAL_SESSIONS } from "./harness/pglite_mode.ts";

const url = databaseUrl();

/** A fresh table for one test, dropped afterwards. */
async function withTable(name: string, fn: (admin: Sql) => Promise<void>): Promise<void> {
  await using admin = postgres(url, { max: 1, ...quiet });
  await admin`drop table if exists ${admin(name)}`;
  await admin`create table ${admin(name)} (id int primary key)`;
  try {
    await fn(admin);
  } finally {
    await admin`drop table if exists ${admin(name)}`;
  }
}

async function ids(admin: Sql, table: string): Promise<number[]> {
  return (await admin`select id from ${admin(table)} order by id`).map((r) => r.id as number);
}

/** The rejection of `p`, which must be a ConnectionError with `outcome`. */
async function lostWith(
  p: Promise<unknown>,
  outcome: "not-sent" | "unknown",
): Promise<ConnectionError> {
  const e = await within(p.then(() => null, (e) => e), 10_000, "the transaction");
  assert.ok(e instanceof ConnectionError, `expected a ConnectionError, got ${e}`);
  assert.equal(e.outcome, outcome, e.message);
  return e;
}

/** Terminates backend `pid` once it is running pg_sleep (so the kill lands mid-statement). */
async function killWhenSleeping(admin: Sql, pid: number): Promise<void> {
  await untilSleeping(admin, pid);
  await admin`select pg_terminate_backend(${pid})`;
}

/** A gate that holds the server's answers in the proxy until released. */
function hold(proxy: TapProxy): () => void {
  let release!: () => void;
  proxy.state.gate = new Promise<void>((r) => release = r);
  return () => {
    proxy.state.gate = null;
    release();
  };
}

serverTest(
  SERVER_PROCESS,
  "begin(fn): the backend killed inside the callback: not-sent, nothing committed",
  async () => {
    await withTable("tx_inside", async (admin) => {
      await using sql = postgres(url, { max: 1, ...quiet });
      const e = await lostWith(
        sql.begin(async (tx) => {
          await tx`insert into tx_inside values (1)`;
          const [{ pid }] = await tx`select pg_backend_pid() as pid`;
          await admin`select pg_terminate_backend(${pid})`;
          await tx`select pg_sleep(5)`;
        }),
        "not-sent",
      );
      assert.match(e.message, /before COMMIT was sent: nothing was committed/);
      assert.deepEqual(await ids(admin, "tx_inside"), []);
      assert.equal((await sql`select 1 as one`)[0].one, 1, "the client works again");
    });
  },
);

serverTest(
  SERVER_PROCESS,
  "begin(fn) returning an array of queries: killed while they run: not-sent, nothing committed",
  async () => {
    await withTable("tx_array", async (admin) => {
      await using sql = postgres(url, { max: 1, ...quiet });
      const [{ pid }] = await sql`select pg_backend_pid() as pid`; // the connection begin reserves
      const killing = killWhenSleeping(admin, pid);
      await lostWith(
        sql.begin((tx) => [tx`insert into tx_array values (2)`, tx`select pg_sleep(5)`]),
        "not-sent",
      );
      await killing;
      assert.deepEqual(await ids(admin, "tx_array"), []);
    });
  },
);

serverTest(
  SERVER_PROCESS,
  "await using tx: killed between the last statement and commit(): not-sent, nothing committed",
  async () => {
    await withTable("tx_between", async (admin) => {
      await using sql = postgres(url, { max: 1, ...quiet });
      {
        await using tx = await sql.begin();
        await tx`insert into tx_between values (3)`;
        const [{ pid }] = await tx`select pg_backend_pid() as pid`;
        await admin`select pg_terminate_backend(${pid})`;
        // A statement after the kill fails with its own outcome; then the connection is known gone.
        const stmt = await tx`select 1`.then(() => null, (e) => e);
        assert.ok(stmt instanceof ConnectionError, String(stmt));
        assert.ok(stmt.outcome === "unknown" || stmt.outcome === "not-sent");
        await lostWith(tx.commit(), "not-sent");
      }
      assert.deepEqual(await ids(admin, "tx_between"), []);
    });
  },
);

serverTest(
  NETWORK,
  "begin(fn): the connection lost after COMMIT was written, its answer held back: unknown, and it did commit",
  async () => {
    await withTable("tx_after", async (admin) => {
      await using proxy = tapProxy(url);
      let release = () => {};
      const committing = proxy.sql.begin(async (tx) => {
        await tx`insert into tx_after values (4)`;
        release = hold(proxy); // from here the server's answers stop at the proxy: COMMIT's too
      });
      await until("the commit", async () => (await ids(admin, "tx_after")).length === 1);
      proxy.drop();
      release();
      const e = await lostWith(committing, "unknown");
      assert.match(e.message, /after COMMIT was sent, before its answer: it may have committed/);
      assert.deepEqual(await ids(admin, "tx_after"), [4], "unknown: here it did commit");
    });
  },
);

serverTest(
  NETWORK,
  "await using tx: COMMIT written but lost on the way: unknown, and it did not commit",
  async () => {
    await withTable("tx_swallowed", async (admin) => {
      await using proxy = tapProxy(url);
      {
        await using tx = await proxy.sql.begin();
        await tx`insert into tx_swallowed values (5)`;
        proxy.state.swallow = true; // COMMIT leaves the client but never reaches the server
        const committing = tx.commit();
        await until("the COMMIT write", () => proxy.state.swallowed > 0);
        proxy.drop();
        await lostWith(committing, "unknown");
        proxy.state.swallow = false;
      }
      assert.deepEqual(await ids(admin, "tx_swallowed"), [], "unknown: here it did not commit");
    });
  },
);

serverTest(
  NETWORK,
  "two-phase: PREPARE TRANSACTION and COMMIT PREPARED each lost after being written: unknown",
  async () => {
    await withTable("tx_2pc", async (admin) => {
      await using proxy = tapProxy(url);
      const gid = `pgpipe-outcome-${Date.now()}`;
      let release = () => {};
      const preparing = proxy.sql.begin(async (tx) => {
        await tx`insert into tx_2pc values (6)`;
        await tx.prepare(gid);
        release = hold(proxy);
      });
      const prepared = async () =>
        (await admin`select 1 from pg_prepared_xacts where gid = ${gid}`).length === 1;
      try {
        await until("the PREPARE TRANSACTION", prepared);
        proxy.drop();
        release();
        const e = await lostWith(preparing, "unknown");
        assert.match(e.message, /after PREPARE TRANSACTION was sent/);

        // COMMIT PREPARED is one query: its own outcome says the same.
        await proxy.sql`select 1`; // a new connection, before the answers are held
        release = hold(proxy);
        const committing = proxy.sql.unsafe(`commit prepared '${gid}'`).execute();
        await until("the COMMIT PREPARED", async () => (await ids(admin, "tx_2pc")).length === 1);
        proxy.drop();
        release();
        await lostWith(committing, "unknown");
        assert.deepEqual(await ids(admin, "tx_2pc"), [6]);
      } finally {
        release();
        if (await prepared()) await admin.unsafe(`rollback prepared '${gid}'`);
      }
    });
  },
);

serverTest(
  SERVER_PROCESS,
  "two-phase: killed before PREPARE TRANSACTION was written: not-sent, nothing prepared",
  async () => {
    await withTable("tx_2pc_before", async (admin) => {
      await using sql = postgres(url, { max: 1, ...quiet });
      const gid = `pgpipe-outcome-before-${Date.now()}`;
      const e = await lostWith(
        sql.begin(async (tx) => {
          await tx`insert into tx_2pc_before values (7)`;
          await tx.prepare(gid);
          const [{ pid }] = await tx`select pg_backend_pid() as pid`;
          await admin`select pg_terminate_backend(${pid})`;
          await tx`select pg_sleep(5)`;
        }),
        "not-sent",
      );
      assert.match(e.message, /before PREPARE TRANSACTION was sent/);
      assert.equal((await admin`select 1 from pg_prepared_xacts where gid = ${gid}`).length, 0);
      assert.deepEqual(await ids(admin, "tx_2pc_before"), []);
    });
  },
);

/** Kills the transaction's backend from inside its callback, then runs into the dead connection. */
async function killFrom(admin: Sql, tx: TransactionSql): Promise<void> {
  const [{ pid }] = await tx`select pg_backend_pid() as pid`;
  await admin`select pg_terminate_backend(${pid})`;
  await tx`select pg_sleep(5)`;
}

serverTest(
  SERVER_PROCESS,
  "begin(fn): the user's own COMMIT inside the callback, then killed: unknown, and it did commit",
  async () => {
    await withTable("tx_user_commit", async (admin) => {
      await using sql = postgres(url, { max: 1, ...quiet });
      const e = await lostWith(
        sql.begin(async (tx) => {
          await tx`insert into tx_user_commit values (10)`;
          await tx`commit`;
          await killFrom(admin, tx);
        }),
        "unknown",
      );
      assert.match(e.message, /after a statement ending the transaction .* was sent inside it/);
      assert.deepEqual(await ids(admin, "tx_user_commit"), [10], "unknown: here it did commit");
    });
  },
);

serverTest(
  SERVER_PROCESS,
  "begin(fn): a ROLLBACK among statements of one text, then killed: unknown, what followed it committed",
  async () => {
    await withTable("tx_user_rollback", async (admin) => {
      await using sql = postgres(url, { max: 1, ...quiet });
      await lostWith(
        sql.begin(async (tx) => {
          await tx.unsafe(
            "insert into tx_user_rollback values (11); /* undo */ rollback; " +
              "insert into tx_user_rollback values (12)",
          );
          await killFrom(admin, tx);
        }),
        "unknown",
      );
      assert.deepEqual(
        await ids(admin, "tx_user_rollback"),
        [12],
        "it ran outside the transaction",
      );
    });
  },
);

serverTest(
  SERVER_PROCESS,
  "begin(fn): ROLLBACK TO SAVEPOINT, a DO block's END, 'commit' in a string: still not-sent",
  async () => {
    await withTable("tx_not_ending", async (admin) => {
      await using sql = postgres(url, { max: 1, ...quiet });
      await lostWith(
        sql.begin(async (tx) => {
          await tx`insert into tx_not_ending values (13)`;
          await tx`savepoint s`;
          await tx`rollback to savepoint s`;
          await tx.unsafe("do $$ begin perform 1; end $$; select 'commit; end' as \"commit\"");
          await assert.rejects(tx.savepoint(() => Promise.reject(new Error("undone"))), /undone/);
          await killFrom(admin, tx);
        }),
        "not-sent",
      );
      assert.deepEqual(await ids(admin, "tx_not_ending"), []);
    });
  },
);

serverTest(
  SERVER_PROCESS,
  "a transaction's statements not yet written when its connection dies fail; they never run outside it",
  async () => {
    await withTable("tx_orphans", async (admin) => {
      // max_pipeline 1: the insert waits locally behind the sleep, so it is never written.
      await using sql = postgres(url, { max: 1, max_pipeline: 1, ...quiet });
      const [{ pid }] = await sql`select pg_backend_pid() as pid`;
      let insert: Promise<unknown> | undefined;
      const killing = killWhenSleeping(admin, pid);
      await lostWith(
        sql.begin(async (tx) => {
          const sleep = tx`select pg_sleep(5)`.execute();
          insert = tx`insert into tx_orphans values (8)`.execute();
          await Promise.all([sleep, insert]);
        }),
        "not-sent",
      );
      await killing;
      const orphan = await insert!.then(() => null, (e) => e);
      assert.ok(orphan instanceof ConnectionError, String(orphan));
      assert.equal(orphan.outcome, "not-sent");
      await sql`select 1`; // max 1: had the insert been re-sent, it ran before this on the new connection
      assert.deepEqual(await ids(admin, "tx_orphans"), [], "the insert did not run in autocommit");
    });
  },
);

serverTest(
  SERVER_PROCESS,
  "sql.reserve(): a query in flight when the backend dies is unknown, later ones not-sent",
  async () => {
    await withTable("tx_reserved", async (admin) => {
      await using sql = postgres(url, { max: 2, ...quiet });
      await using reserved = await sql.reserve();
      const [{ pid }] = await reserved`select pg_backend_pid() as pid`;
      const running = reserved`select pg_sleep(5)`.execute();
      await killWhenSleeping(admin, pid);
      await lostWith(running, "unknown");
      await lostWith(reserved`insert into tx_reserved values (9)`.execute(), "not-sent");
      assert.deepEqual(await ids(admin, "tx_reserved"), []);
      assert.equal((await sql`select 1 as one`)[0].one, 1, "the pool works again");
    });
  },
);

Deno.test("mayEndTransaction: the statements that can end a block, and look-alikes that cannot", () => {
  const ends = [
    "commit",
    "COMMIT WORK",
    "end",
    "abort",
    "rollback",
    "prepare transaction 'x'",
    "select 1; commit",
    "/* note */ end transaction",
  ];
  const not = [
    "rollback to savepoint s",
    "rollback work to s",
    "rollback transaction to s",
    "select 'commit'",
    'select 1 as "end"',
    "select case when true then 1 end",
    "select pending, appended, committed from t",
    "do $$ begin perform 1; end $$",
    "prepare q as select 1",
  ];
  for (const text of ends) assert.equal(mayEndTransaction(text), true, text);
  for (const text of not) assert.equal(mayEndTransaction(text), false, text);
});

serverTest(
  SEVERAL_SESSIONS,
  "end({ timeout: 0 }) while the callback is between queries: CONNECTION_CLOSED, not-sent",
  async () => {
    await withTable("pgpipe_end_idle_tx", async (admin) => {
      const sql = postgres(url, { max: 1, ...quiet });
      const tx = sql.begin(async (tx) => {
        await tx`insert into pgpipe_end_idle_tx values (1)`;
        await within(sql.end({ timeout: 0 }), 10_000, "end({ timeout: 0 })"); // between queries
        return sql`select 1`; // postgres.js's own test returns a query of the ended client
      });
      const e = await lostWith(tx, "not-sent");
      assert.equal(e.code, "CONNECTION_CLOSED", e.message);
      assert.deepEqual(await ids(admin, "pgpipe_end_idle_tx"), []);
    });
  },
);

/**
 * Opens two connections and leaves them idle; resolves to their backends' pids. What end()
 * does at once shows on the server: an idle connection's backend goes.
 */
async function twoIdle(sql: Sql): Promise<number[]> {
  const held = await Promise.all([sql.reserve(), sql.reserve()]);
  const pids = await Promise.all(
    held.map(async (r) => (await r`select pg_backend_pid() as pid`)[0].pid),
  );
  for (const r of held) r.release();
  return pids as number[];
}

/** Waits until backend `pid` has left the server. */
async function untilGone(admin: Sql, pid: number): Promise<void> {
  await until(
    `backend ${pid} gone`,
    async () => (await admin`select 1 from pg_stat_activity where pid = ${pid}`).length === 0,
  );
}

serverTest(
  SEVERAL_SESSIONS,
  "end() lets a transaction between queries finish, then ends",
  async () => {
    await withTable("pgpipe_end_waits_tx", async (admin) => {
      const sql = postgres(url, { max: 2, ...quiet });
      const pids = await twoIdle(sql);
      let ended: Promise<string> | undefined;
      const result = await sql.begin(async (tx) => {
        await tx`insert into pgpipe_end_waits_tx values (1)`;
        const [{ pid }] = await tx`select pg_backend_pid() as pid`;
        ended = sql.end().then(() => "ended");
        // end() closed the idle connection at once: had it not waited for the transaction's, that
        // one would have gone then too.
        await untilGone(admin, pids.find((p) => p !== pid)!);
        await assert.rejects(
          sql`select 1`,
          (e) => (e as ConnectionError).code === "CONNECTION_ENDED",
        );
        await tx`insert into pgpipe_end_waits_tx values (2)`;
        return "committed";
      });
      assert.equal(result, "committed");
      assert.equal(await within(ended!, 10_000, "end()"), "ended");
      assert.deepEqual(await ids(admin, "pgpipe_end_waits_tx"), [1, 2]);
    });
  },
);

serverTest(
  SEVERAL_SESSIONS,
  "end() waits for a reserved connection's release; end({ timeout }) does not",
  async () => {
    await using admin = postgres(url, { max: 1, ...quiet });
    const sql = postgres(url, { max: 2, ...quiet });
    const pids = await twoIdle(sql);
    const reserved = await sql.reserve();
    const [{ pid }] = await reserved`select pg_backend_pid() as pid`;
    const ending = sql.end();
    // end() closed the idle connection at once, and is still waiting for the reserved one.
    await untilGone(admin, pids.find((p) => p !== pid)!);
    assert.equal(await settledYet(ending), false, "end() waits while the connection is reserved");
    assert.equal((await reserved`select 1 as x`)[0].x, 1);
    reserved.release();
    await within(ending, 10_000, "end() after the release");

    const other = postgres(url, { max: 1, ...quiet });
    const held = await other.reserve();
    await within(other.end({ timeout: 0.05 }), 10_000, "end({ timeout })");
    await assert.rejects(
      held`select 1`,
      (e) => e instanceof ConnectionError && e.code === "CONNECTION_CLOSED",
    );
  },
);
