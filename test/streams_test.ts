/** Cursors, forEach, describe, COPY streams and cancellation against a real server. */
import assert from "node:assert/strict";
import postgres, { CLOSE, PostgresError, QueryError } from "./harness/postgres.ts";
import { databaseUrl } from "./harness/env.ts";
import { cancelRelay, type HeldCancel } from "./harness/cancel_relay.ts";
import { untilLocked, untilSleeping, within } from "./harness/wait.ts";
import { CANCEL, serverTest } from "./harness/pglite_mode.ts";

const url = databaseUrl();
const quiet = { onnotice: () => {} };

Deno.test("cursor: for await reads every row in batches; others wait, then run", async () => {
  await using sql = postgres(url, { max: 1, ...quiet });
  const sizes: number[] = [];
  let total = 0;
  let last = 0;
  const behind = sql`select 'after' as x`.execute(); // sent before the cursor: answered first
  for await (const rows of sql`select g from generate_series(1, 1050) g`.cursor(100)) {
    sizes.push(rows.length);
    for (const r of rows) {
      assert.equal(r.g, last + 1);
      last = r.g as number;
    }
    total += rows.length;
  }
  assert.equal(total, 1050);
  assert.deepEqual(sizes, [...Array(10).fill(100), 50]);
  assert.equal((await behind)[0].x, "after");
  assert.equal((await sql`select 1 as one`)[0].one, 1, "the connection is free again");
});

Deno.test("cursor: break closes the portal early; the connection stays usable", async () => {
  await using sql = postgres(url, { max: 1, ...quiet });
  let seen = 0;
  for await (const rows of sql`select g from generate_series(1, 100000) g`.cursor(10)) {
    seen += rows.length;
    if (seen >= 30) break;
  }
  assert.equal(seen, 30);
  const during = await Promise.all([sql`select 2 as two`, sql`select 3 as three`]);
  assert.equal(during[1][0].three, 3);
});

Deno.test("cursor: callback form with CLOSE, and a query issued meanwhile waits for the cursor", async () => {
  await using sql = postgres(url, { max: 1, ...quiet });
  const order: string[] = [];
  let other: Promise<unknown> | null = null;
  assert.equal(sql.CLOSE, CLOSE);
  await sql`select g from generate_series(1, 50) g`.cursor(10, (rows) => {
    order.push(`batch ${rows[0].g}`);
    if (other === null) {
      other = sql`select 1`.execute().then(() => order.push("other"));
    }
    if (rows[0].g === 21) return sql.CLOSE;
  });
  await other;
  assert.deepEqual(order, ["batch 1", "batch 11", "batch 21", "other"]);
});

Deno.test("cursor: an error mid-way rejects the iteration; the connection recovers", async () => {
  await using sql = postgres(url, { max: 1, ...quiet });
  const rows: number[] = [];
  await assert.rejects(async () => {
    for await (
      const batch of sql`select 10 / (5 - g) as x from generate_series(1, 10) g`.cursor(2)
    ) {
      for (const r of batch) rows.push(r.x as number);
    }
  }, (e) => e instanceof PostgresError && e.code === "22012");
  assert.deepEqual(rows, [2, 3, 5, 10]);
  assert.equal((await sql`select 4 as four`)[0].four, 4);
  await assert.rejects(async () => {
    for await (const _ of sql`select * from no_such_table`.cursor(5)) { /* not reached */ }
  }, (e) => e instanceof PostgresError && e.code === "42P01");
});

Deno.test("cursor: memory stays bounded by the batch for a large result", async () => {
  await using sql = postgres(url, { max: 1, ...quiet });
  let count = 0;
  let sum = 0;
  for await (
    const rows of sql`select g, repeat('x', 100) as pad from generate_series(1, 200000) g`.cursor(
      1000,
    )
  ) {
    assert.ok(rows.length <= 1000);
    count += rows.length;
    for (const r of rows) sum += r.g as number;
  }
  assert.equal(count, 200000);
  assert.equal(sum, (200000 * 200001) / 2);
});

Deno.test("forEach streams rows to a callback and resolves with the count", async () => {
  await using sql = postgres(url, { max: 1, ...quiet });
  let sum = 0;
  const result = await sql`select g from generate_series(1, 1000) g`.forEach((row) => {
    sum += row.g as number;
  });
  assert.equal(sum, 500500);
  assert.equal(result.count, 1000);
  assert.equal(result.length, 0, "rows are not kept");
});

Deno.test("describe returns parameter and column types without running the query", async () => {
  await using sql = postgres(url, { max: 1, ...quiet });
  await sql`create temp table described (id int, name text)`;
  const d = await sql`insert into described values (${1}, ${"a"}) returning id, name`.describe();
  assert.deepEqual(d.types, [23, 25]);
  const [{ oid }] = await sql`select 'described'::regclass::oid as oid`;
  assert.deepEqual(d.columns, [
    { name: "id", type: 23, table: oid, number: 1 },
    { name: "name", type: 25, table: oid, number: 2 },
  ]);
  assert.equal((await sql`select count(*)::int as n from described`)[0].n, 0);
  await assert.rejects(
    sql`select from nowhere_at_all`.describe(),
    (e) => e instanceof PostgresError,
  );
});

Deno.test("COPY FROM STDIN through writableStream(); COPY TO STDOUT through readableStream()", async () => {
  await using sql = postgres(url, { max: 1, ...quiet });
  await sql`create temp table copied (id int, name text)`;
  const writable = await sql`copy copied from stdin`.writableStream();
  const writer = writable.getWriter();
  for (let i = 1; i <= 1000; i++) await writer.write(`${i}\tname ${i}\n`);
  await writer.write(new TextEncoder().encode("1001\tbytes\n"));
  await writer.close();
  const [{ n }] = await sql`select count(*)::int as n from copied`;
  assert.equal(n, 1001);

  const readable = await sql`copy (select id, name from copied order by id) to stdout`
    .readableStream();
  const text = await new Response(readable).text();
  const lines = text.trimEnd().split("\n");
  assert.equal(lines.length, 1001);
  assert.equal(lines[0], "1\tname 1");
  assert.equal(lines[1000], "1001\tbytes");
});

Deno.test("COPY failures: bad data, abort, wrong direction; the connection stays usable", async () => {
  await using sql = postgres(url, { max: 1, ...quiet });
  await sql`create temp table copy_bad (id int)`;
  const writable = await sql`copy copy_bad from stdin`.writableStream();
  const writer = writable.getWriter();
  await writer.write("1\nnot a number\n");
  await assert.rejects(writer.close(), (e) => e instanceof PostgresError && e.code === "22P02");
  const aborted = (await sql`copy copy_bad from stdin`.writableStream()).getWriter();
  await aborted.write("5\n");
  await aborted.abort("changed my mind");
  assert.equal((await sql`select count(*)::int as n from copy_bad`)[0].n, 0);
  await assert.rejects(
    sql`select 1`.writableStream(),
    (e) => e instanceof QueryError && e.code === "NOT_COPY_FROM_STDIN",
  );
  await assert.rejects(sql`copy copy_bad from stdin where id > ${1}`.writableStream(), QueryError);
  await assert.rejects(
    sql`select 1`.readableStream(),
    (e) => e instanceof QueryError && e.code === "NOT_COPY_TO_STDOUT",
  );
  assert.equal((await sql`select 9 as nine`)[0].nine, 9);
});

Deno.test("COPY TO STDOUT: cancelling the reader drains the rest; the connection stays usable", async () => {
  await using sql = postgres(url, { max: 1, ...quiet });
  const readable = await sql`copy (select g from generate_series(1, 200000) g) to stdout`
    .readableStream();
  const reader = readable.getReader();
  const first = await reader.read();
  assert.ok(first.value && first.value.length > 0);
  await reader.cancel();
  assert.equal((await sql`select 8 as eight`)[0].eight, 8);
});

serverTest(
  CANCEL,
  "cancel: a running query is cancelled; its pipelined neighbours are not",
  async () => {
    await using sql = postgres(url, { max: 1, ...quiet });
    await using admin = postgres(url, { max: 1, ...quiet });
    const before = sql`select 1 as x, pg_backend_pid() as pid`.execute();
    const slow = sql`select pg_sleep(5) as s`.execute();
    const after = Array.from({ length: 20 }, (_, i) => sql`select ${i}::int as i`.execute());
    await untilSleeping(admin, (await before)[0].pid as number);
    slow.cancel();
    await assert.rejects(slow, (e) => e instanceof PostgresError && e.code === "57014");
    assert.equal((await before)[0].x, 1);
    const rows = await Promise.all(after);
    assert.deepEqual(rows.map((r) => r[0].i), Array.from({ length: 20 }, (_, i) => i));
  },
);

/** An advisory lock key no other test takes. */
function lockKey(): number {
  return Math.floor(Math.random() * 2 ** 31);
}

serverTest(
  CANCEL,
  "cancel: a query queued behind a slow one is cancelled when it starts; not-yet-sent ones are dropped",
  async () => {
    await using sql = postgres(url, { max: 1, max_pipeline: 2, ...quiet });
    await using admin = postgres(url, { max: 1, ...quiet });
    // Connected: the queries below are written at once, not queued in the pool.
    const [{ pid }] = await sql`select pg_backend_pid() as pid`;
    const key = lockKey();
    await admin`select pg_advisory_lock(${key})`;
    // The slow query waits for admin's lock: it runs until the test lets it go.
    const slow = sql`select pg_advisory_lock(${key}), pg_advisory_unlock(${key})`.execute();
    const target = sql`select pg_sleep(30) as s`.execute();
    const waiting = sql`select 'never' as x`.execute(); // past max_pipeline: waits locally
    await untilLocked(admin, pid);
    waiting.cancel();
    target.cancel();
    await assert.rejects(waiting, (e) => e instanceof PostgresError && e.code === "57014");
    await admin`select pg_advisory_unlock(${key})`;
    await slow;
    // Cancelled when slow's ReadyForQuery arrives; should that cancel land while the backend was
    // still between the two, it is sent again (see the relayed test below).
    await within(
      assert.rejects(target, (e) => e instanceof PostgresError && e.code === "57014"),
      10_000,
      "the cancelled pg_sleep(30)",
    );
    const unsent = sql`select 1`;
    unsent.cancel();
    await assert.rejects(unsent, (e) => e instanceof PostgresError && e.code === "57014");
  },
);

serverTest(
  CANCEL,
  "AbortSignal: aborting rejects with the signal's reason, before or during the query",
  async () => {
    await using sql = postgres(url, { max: 1, ...quiet });
    await using admin = postgres(url, { max: 1, ...quiet });
    const early = AbortSignal.abort(new Error("too late"));
    await assert.rejects(sql`select 1`.signal(early), /too late/);
    const [{ pid }] = await sql`select pg_backend_pid() as pid`;
    const controller = new AbortController();
    const running = sql`select pg_sleep(5)`.signal(controller.signal).execute();
    await untilSleeping(admin, pid);
    controller.abort(new Error("user left"));
    await assert.rejects(running, /user left/);
    const timed = sql`select pg_sleep(5)`.signal(AbortSignal.timeout(100));
    await assert.rejects(timed, (e) => e instanceof DOMException && e.name === "TimeoutError");
    assert.equal((await sql`select 5 as five`)[0].five, 5);
  },
);

// A CancelRequest's signals can land at any time until the server closes its socket (see
// test/harness/cancel_relay.ts): on PostgreSQL up to 17 a second SIGINT may reach the backend
// after the cancelled query failed and the next one started.

/** A client (max 1) whose CancelRequests a relay holds, a client to watch it from, its pid. */
async function relayedSession() {
  const relay = cancelRelay();
  const sql = postgres(url, { max: 1, socket: relay.socket, ...quiet });
  const admin = postgres(url, { max: 1, ...quiet });
  const [{ pid }] = await sql`select pg_backend_pid() as pid`;
  return {
    relay,
    sql,
    admin,
    pid: pid as number,
    /** Cancels a pg_sleep; the server gets the CancelRequest once, and it stays open. */
    async cancelSleep(): Promise<HeldCancel> {
      const slow = sql`select pg_sleep(30)`.execute();
      await untilSleeping(admin, pid);
      slow.cancel();
      const cancel = await relay.next();
      await cancel.deliver();
      await assert.rejects(slow, (e) => e instanceof PostgresError && e.code === "57014");
      return cancel;
    },
    async [Symbol.asyncDispose]() {
      await Promise.all([sql.end(), admin.end()]);
    },
  };
}

serverTest(
  CANCEL,
  "cancel: a second signal of the same CancelRequest hitting the next query re-runs it",
  async () => {
    await using session = await relayedSession();
    const { relay, sql, admin, pid } = session;
    await sql`create temp sequence stray_cancel_runs`;
    const controller = new AbortController();
    const running = sql`select pg_sleep(30)`.signal(controller.signal).execute();
    await untilSleeping(admin, pid);
    controller.abort(new Error("user left"));
    const cancel = await relay.next();
    await cancel.deliver(); // the first SIGINT: the query it was meant for stops
    await assert.rejects(running, /user left/);
    const innocent = sql`select nextval('stray_cancel_runs')::int as run, pg_sleep(0.2)`.execute();
    await untilSleeping(admin, pid);
    await cancel.deliver(); // the second SIGINT lands on the innocent query
    cancel.close();
    const [{ run }] = await innocent;
    // At least twice: the server may itself split this delivery's signals around a run again.
    assert.ok(run >= 2, `hit, then run again (run ${run})`);
    assert.equal((await sql`select 5 as five`)[0].five, 5);
  },
);

/**
 * A message locale the server translates (see test/harness/cluster.ts: C.UTF-8 reads LANGUAGE),
 * or null when it has no translations (a server built without NLS).
 */
async function translatedLocale(): Promise<string | null> {
  await using sql = postgres(url, { max: 1, ...quiet });
  for (const locale of ["de_DE.UTF-8", "C.UTF-8"]) {
    if (await sql.unsafe(`set lc_messages = '${locale}'`).then(() => false, () => true)) continue;
    const e = await sql`select 1/0`.catch((e) => e);
    if (e instanceof PostgresError && e.message !== "division by zero") return locale;
  }
  return null;
}
const translated = await translatedLocale();
if (translated === null) {
  console.log(
    "streams_test: the translated-messages cancel test skipped: this server build has no " +
      "message translations (the npm builds have none)",
  );
}

serverTest(CANCEL, {
  name:
    "cancel: with lc_messages translated, a stray signal is still recognised and its query re-run",
  ignore: translated === null,
  fn: async () => {
    await using session = await relayedSession();
    const { relay, sql, admin, pid } = session;
    await sql.unsafe(`set lc_messages = '${translated}'`);
    await sql`create temp sequence stray_cancel_translated`;
    const target = sql`select pg_sleep(30)`.execute();
    await untilSleeping(admin, pid);
    target.cancel();
    const cancel = await relay.next();
    await cancel.deliver();
    const e = await target.catch((e) => e);
    assert.ok(e instanceof PostgresError && e.code === "57014", String(e));
    assert.notEqual(e.message, "canceling statement due to user request", "the server translates");
    const innocent = sql`select nextval('stray_cancel_translated')::int as run, pg_sleep(0.2)`
      .execute();
    await untilSleeping(admin, pid);
    await cancel.deliver(); // the second SIGINT lands on the innocent query
    cancel.close();
    const [{ run }] = await innocent;
    assert.ok(run >= 2, `hit, then run again (run ${run})`);
  },
});

serverTest(
  CANCEL,
  "cancel: a 57014 a function raises is its own error, never taken for a stray cancel",
  async () => {
    await using session = await relayedSession();
    const { sql } = session;
    await sql`create temp sequence raised_cancel_runs`;
    const cancel = await session.cancelSleep(); // still open: any query may yet be hit
    const raised = sql.unsafe(`do $$ begin
      perform nextval('raised_cancel_runs');
      raise exception 'canceling statement due to user request' using errcode = '57014';
    end $$`).execute();
    let e: unknown;
    try {
      e = await within(raised.catch((e) => e), 5000, "the raising query");
    } finally {
      cancel.close();
    }
    assert.ok(e instanceof PostgresError && e.code === "57014", String(e));
    assert.equal(e.routine, "exec_stmt_raise");
    const [{ runs }] = await sql`select last_value::int as runs from raised_cancel_runs`;
    assert.equal(runs, 1, "run once, not again as if a cancel had hit it");
  },
);

serverTest(
  CANCEL,
  "cancel: a stray signal inside a transaction rejects the query it hit with a clear 57014",
  async () => {
    await using session = await relayedSession();
    const { sql, admin, pid } = session;
    const cancel = await session.cancelSleep();
    const failed = sql.begin(async (tx) => {
      await tx`select 1`;
      const hit = tx`select pg_sleep(5)`.execute();
      await untilSleeping(admin, pid);
      await cancel.deliver();
      await hit;
    });
    await assert.rejects(failed, (e) =>
      e instanceof PostgresError && e.code === "57014" &&
      /a cancel this connection sent for another query/.test(e.detail ?? ""));
    cancel.close();
    assert.equal((await sql`select 6 as six`)[0].six, 6);
  },
);

serverTest(
  CANCEL,
  "cancel: a query stopped by a stray signal and cancelled before it goes again is not re-run",
  async () => {
    await using session = await relayedSession();
    const { relay, sql, admin, pid } = session;
    const cancel = await session.cancelSleep();
    const controller = new AbortController();
    const innocent = sql`select pg_sleep(5)`.signal(controller.signal).execute();
    await untilSleeping(admin, pid);
    const pause = relay.pauseAfterCancelError();
    await cancel.deliver(); // stops the innocent query: the driver means to send it again
    await pause.reached; // its ErrorResponse is read, its ReadyForQuery not yet
    controller.abort(new Error("gave up"));
    pause.release();
    const started = Date.now();
    await assert.rejects(innocent, /gave up/);
    assert.ok(Date.now() - started < 4000, "rejected at once, not after running again");
    cancel.close();
    assert.equal((await sql`select 7 as seven`)[0].seven, 7);
  },
);

serverTest(
  CANCEL,
  "cancel: once a cancel that landed on an idle backend is done, another session's cancel still rejects",
  async () => {
    await using session = await relayedSession();
    const { relay, sql, admin, pid } = session;
    const key = lockKey();
    await admin`select pg_advisory_lock(${key})`;
    const quick = sql`select pg_advisory_lock(${key}), pg_advisory_unlock(${key})`.execute();
    await untilLocked(admin, pid);
    quick.cancel();
    const cancel = await relay.next();
    await admin`select pg_advisory_unlock(${key})`;
    await quick; // it finished before the server got the cancel
    await cancel.deliver(); // the backend is idle: the server ignores it
    cancel.close();
    await cancel.finished;
    const slow = sql`select pg_sleep(30)`.execute();
    await untilSleeping(admin, pid);
    await admin`select pg_cancel_backend(${pid})`;
    await assert.rejects(slow, (e) => e instanceof PostgresError && e.code === "57014");
  },
);

serverTest(
  CANCEL,
  "cancel: a cancel that lands while the backend is between statements is sent again once it was taken",
  async () => {
    await using session = await relayedSession();
    const { relay, sql, admin, pid } = session;
    const key = lockKey();
    await admin`select pg_advisory_lock(${key})`;
    const slow = sql`select pg_advisory_lock(${key}), pg_advisory_unlock(${key})`.execute();
    await untilLocked(admin, pid);
    // The next query is sent, but the backend does not read it yet (a backend descheduled right
    // after slow's ReadyForQuery leaves it unread the same way).
    const writes = relay.holdWrites();
    const target = sql`select pg_sleep(30) as s`.execute();
    await writes.reached;
    target.cancel(); // behind slow: the CancelRequest goes when slow's ReadyForQuery arrives
    await admin`select pg_advisory_unlock(${key})`;
    await slow;
    const first = await relay.next();
    await first.deliver(); // the backend waits for its next message: PostgreSQL drops the signal
    first.close();
    writes.release(); // the target starts: it would sleep its 30 s through
    await untilSleeping(admin, pid);
    const again = await within(relay.next(), 5000, "a second CancelRequest");
    await again.deliver();
    again.close();
    await within(
      assert.rejects(target, (e) => e instanceof PostgresError && e.code === "57014"),
      5000,
      "the cancelled pg_sleep(30)",
    );
    assert.equal((await sql`select 8 as eight`)[0].eight, 8);
  },
);

Deno.test("cursor on sql.unsafe text still reads in batches (extended protocol)", async () => {
  await using sql = postgres(url, { max: 1, ...quiet });
  const sizes: number[] = [];
  for await (const rows of sql.unsafe("select g from generate_series(1, 25) g").cursor(10)) {
    sizes.push(rows.length);
  }
  assert.deepEqual(sizes, [10, 10, 5]);
});

Deno.test("COPY FROM STDIN awaited as a plain query is refused, not hung (both protocols)", async () => {
  await using sql = postgres(url, { max: 1, ...quiet });
  await sql`create temp table plain_copy (x int)`;
  const refused = (e: unknown) =>
    e instanceof PostgresError && /needs query\.writable\(\)/.test(e.message);
  await assert.rejects(sql`copy plain_copy from stdin`, refused);
  await assert.rejects(sql.unsafe("copy plain_copy from stdin"), refused);
  const [{ n }] = await sql`select count(*)::int as n from plain_copy`;
  assert.equal(n, 0);
  const after = await Promise.all([sql`select 1 as a`, sql`select 2 as b`]);
  assert.deepEqual([after[0][0].a, after[1][0].b], [1, 2]);
});

serverTest(
  CANCEL,
  "cancel: a query cancelled while its connection starts stays cancelled when that start fails",
  async () => {
    // A server that asks for a password, takes it (and the queries riding with it), then, once the
    // test has cancelled, closes: nothing ran, so the pool hands the others to the next connection.
    const dead = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    let gotPassword!: () => void;
    const passwordIn = new Promise<void>((r) => gotPassword = r);
    let release!: () => void;
    const released = new Promise<void>((r) => release = r);
    const serving = (async () => {
      const c = await dead.accept();
      const buf = new Uint8Array(4096);
      await c.read(buf); // the startup message
      await c.write(new Uint8Array([0x52, 0, 0, 0, 8, 0, 0, 0, 3])); // AuthenticationCleartextPassword
      await c.read(buf); // the password, and the queries behind it
      gotPassword();
      await released;
      c.close();
    })();
    const real = new URL(url);
    const table = `cancel_starting_${Date.now()}`;
    await using admin = postgres(url, { max: 1, onnotice: () => {} });
    await admin.unsafe(`create table ${table} (n int)`);
    try {
      let calls = 0;
      await using sql = postgres(url, {
        max: 1,
        fetch_types: false,
        password: "unused under trust",
        socket: () =>
          ++calls === 1
            ? Deno.connect({ hostname: "127.0.0.1", port: (dead.addr as Deno.NetAddr).port })
            : Deno.connect({ hostname: real.hostname, port: Number(real.port || 5432) }),
      });
      const insert = sql.unsafe(`insert into ${table} values (1)`, []);
      const running = insert.execute();
      await passwordIn;
      insert.cancel();
      release();
      await assert.rejects(running, (e) => e instanceof PostgresError && e.code === "57014");
      const [{ n }] = await sql.unsafe(`select count(*)::int as n from ${table}`);
      assert.equal(n, 0, "the cancelled insert ran on the next connection");
    } finally {
      await serving;
      dead.close();
      await admin.unsafe(`drop table ${table}`);
    }
  },
);
