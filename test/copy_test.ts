/**
 * COPY through Node streams (as postgres.js code uses them) and Web streams, against a real
 * server: postgres.js's own COPY tests ported, failures and aborts, and abandoned streams.
 */
import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import { createReadStream } from "node:fs";
import { Readable, Writable } from "node:stream";
import { pipeline } from "node:stream/promises";
import postgres, { PostgresError, QueryError, type TransactionSql } from "./harness/postgres.ts";
import { databaseUrl } from "./harness/env.ts";
import { runWithGc } from "./harness/collect.ts";
import { delay, within } from "./harness/wait.ts";
import { CANCEL, serverTest, SEVERAL_SESSIONS } from "./harness/pglite_mode.ts";

const url = databaseUrl();
const quiet = { onnotice: () => {} };

// ---------------------------------------------------------------------------
// postgres.js's tests (tests/index.js: 'Copy read' ... 'Copy from abort'), same usage

Deno.test("postgres.js 'Copy read': readable.on('data') gets one chunk per row, then 'end'", async () => {
  await using sql = postgres(url, { max: 1, ...quiet }); // temp tables live on one connection
  const result: Buffer[] = [];
  await sql`create temp table test (x int)`;
  await sql`insert into test select * from generate_series(1,10)`;
  const readable = await sql`copy test to stdout`.readable();
  readable.on("data", (x) => result.push(x));
  await new Promise((r) => readable.on("end", r));
  assert.equal(result.length, 10);
  assert.ok(result[0] instanceof Buffer);
  assert.deepEqual(result.map(String), Array.from({ length: 10 }, (_, i) => `${i + 1}\n`));
});

Deno.test("postgres.js 'Copy write': write(), write(), end(), then 'finish'", async () => {
  await using sql = postgres(url, { max: 1, ...quiet });
  await sql`create temp table test (x int)`;
  const writable = await sql`copy test from stdin`.writable();
  writable.write("1\n");
  writable.write("1\n");
  writable.end();
  await new Promise((r) => writable.on("finish", r));
  assert.equal((await sql`select 1 from test`).length, 2);
});

serverTest(
  SEVERAL_SESSIONS,
  "postgres.js 'Copy write as first': a COPY as a new client's first query",
  async () => {
    await using sql = postgres(url, quiet);
    await sql`create table copy_first (x int)`;
    try {
      await using first = postgres(url, quiet);
      const writable =
        await first`COPY copy_first FROM STDIN WITH(FORMAT csv, HEADER false, DELIMITER ',')`
          .writable();
      writable.write("1\n");
      writable.write("1\n");
      writable.end();
      await new Promise((r) => writable.on("finish", r));
      assert.equal((await sql`select 1 from copy_first`).length, 2);
    } finally {
      await sql`drop table copy_first`;
    }
  },
);

Deno.test("postgres.js 'Copy from file': fs.createReadStream(file).pipe(writable), 'finish'", async () => {
  await using sql = postgres(url, { max: 1, ...quiet });
  const file = await Deno.makeTempFile({ suffix: ".csv" });
  try {
    await Deno.writeTextFile(file, "1\t2\t3\n4\t5\t6\n");
    await sql`create temp table test (x int, y int, z int)`;
    const writable = await sql`copy test from stdin`.writable();
    await new Promise((r) => createReadStream(file).pipe(writable).on("finish", r));
    assert.equal(
      JSON.stringify(await sql`select * from test`),
      '[{"x":1,"y":2,"z":3},{"x":4,"y":5,"z":6}]',
    );
  } finally {
    await Deno.remove(file);
  }
});

Deno.test("postgres.js 'Copy from works in transaction': end('1\\n2'), then a query in the transaction", async () => {
  await using sql = postgres(url, quiet);
  await sql`create table copy_in_tx (x int)`;
  try {
    const xs = await sql.begin(async (sql) => {
      (await sql`copy copy_in_tx from stdin`.writable()).end("1\n2");
      await delay(20); // as postgres.js's own test does
      return sql`select 1 from copy_in_tx`;
    });
    assert.equal(xs.length, 2);
  } finally {
    await sql`drop table copy_in_tx`;
  }
});

serverTest(
  SEVERAL_SESSIONS,
  "postgres.js 'Copy from abort': destroy(err) while piping: 'error' with err, CopyFail, table untouched",
  async () => {
    await using other = postgres(url, quiet);
    await other`create table copy_abort (x int, y int, z int)`;
    try {
      const sql = postgres(url, quiet);
      const file = await Deno.makeTempFile();
      await Deno.writeTextFile(file, "1\t2\t3\n4\t5\t6\n");
      const readable = createReadStream(file);
      const query = sql`COPY copy_abort FROM STDIN`;
      const writable = await query.writable();
      let aborted: Error | undefined;
      readable.pipe(writable).on("error", (err) => aborted = err);
      writable.destroy(new Error("abort"));
      await sql.end(); // waits for the COPY to end: it must not hang
      await Deno.remove(file);
      assert.equal(aborted?.message, "abort");
      await assert.rejects(
        query,
        (e) => e instanceof PostgresError && e.code === "57014" && /abort/.test(e.message),
      );
      assert.equal((await other`select count(*)::int as n from copy_abort`)[0].n, 0);
    } finally {
      await other`drop table copy_abort`;
    }
  },
);

// ---------------------------------------------------------------------------
// Node streams beyond the ported tests

Deno.test("Node streams: stream.pipeline in and out (postgres.js README), for await, await query", async () => {
  await using sql = postgres(url, { max: 1, ...quiet });
  await sql`create temp table users (name text, age int)`;
  const into = sql`copy users (name, age) from stdin`;
  await pipeline(Readable.from(["Murray\t68\n", "Walter\t80\n"]), await into.writable());
  const copied = await into;
  assert.equal(copied.command, "COPY");
  assert.equal(copied.count, 2);

  const out: Buffer[] = [];
  const sink = new Writable({
    write(chunk, _encoding, callback) {
      out.push(chunk);
      callback();
    },
  });
  await pipeline(await sql`copy users (name, age) to stdout`.readable(), sink);
  assert.equal(Buffer.concat(out).toString(), "Murray\t68\nWalter\t80\n");

  const rows: string[] = [];
  const query = sql`copy (select name, age from users where age = 68) to stdout`;
  for await (const chunk of await query.readable()) rows.push(chunk.toString());
  assert.deepEqual(rows, ["Murray\t68\n"]);
  assert.equal((await query).count, 1);
});

Deno.test("Node streams: bytes, many small writes and a large export round-trip with backpressure", async () => {
  await using sql = postgres(url, { max: 1, ...quiet });
  await sql`create temp table bulk (id int, payload text)`;
  const writable = await sql`copy bulk from stdin`.writable();
  const n = 20000;
  for (let i = 1; i <= n; i++) {
    const line = `${i}\t${"p".repeat(i % 50)}\n`;
    const ok = i % 2 ? writable.write(line) : writable.write(new TextEncoder().encode(line));
    if (!ok) await new Promise((r) => writable.once("drain", r));
  }
  await new Promise<void>((resolve, reject) => {
    writable.on("error", reject);
    writable.end(() => resolve());
  });
  assert.equal((await sql`select count(*)::int as n from bulk`)[0].n, n);

  let lines = 0;
  let bytes = 0;
  const readable = await sql`copy (select * from bulk order by id) to stdout`.readable();
  for await (const chunk of readable) {
    lines++;
    bytes += chunk.length;
    if (lines % 5000 === 0) await delay(5); // a slow consumer: the server waits for it
  }
  assert.equal(lines, n);
  assert.ok(bytes > n * 3);
  assert.equal((await sql`select 7 as seven`)[0].seven, 7);
});

Deno.test("Node writable: bad data emits the server's error instead of 'finish'; the connection stays usable", async () => {
  await using sql = postgres(url, { max: 1, ...quiet });
  await sql`create temp table strict_ints (x int)`;
  const query = sql`copy strict_ints from stdin`;
  const writable = await query.writable();
  let finished = false;
  writable.on("finish", () => finished = true);
  const failed = new Promise<Error>((resolve) => writable.on("error", resolve));
  writable.write("1\n");
  writable.end("not a number\n");
  const err = await failed;
  assert.ok(err instanceof PostgresError && err.code === "22P02", String(err));
  assert.equal(finished, false);
  await assert.rejects(query, (e) => e === err);
  assert.equal((await sql`select count(*)::int as n from strict_ints`)[0].n, 0);
  await assert.rejects(
    pipeline(Readable.from(["x\n"]), await sql`copy strict_ints from stdin`.writable()),
    (e) => e instanceof PostgresError && e.code === "22P02",
  );
  assert.equal((await sql`select 1 as one`)[0].one, 1);
});

Deno.test("Node writable: destroy() without an error, and query.cancel(), abort the COPY", async () => {
  await using sql = postgres(url, { max: 1, ...quiet });
  await sql`create temp table never (x int)`;
  const q1 = sql`copy never from stdin`;
  const w1 = await q1.writable();
  w1.write("1\n");
  const closed = new Promise((r) => w1.on("close", r));
  w1.destroy();
  await closed;
  await assert.rejects(q1, (e) => e instanceof PostgresError && /was destroyed/.test(e.message));

  const q2 = sql`copy never from stdin`;
  const w2 = await q2.writable();
  w2.on("error", () => {}); // writes after the cancel fail
  w2.write("2\n");
  q2.cancel();
  await assert.rejects(q2, (e) => e instanceof PostgresError && e.code === "57014");
  assert.equal((await sql`select count(*)::int as n from never`)[0].n, 0);
});

serverTest(
  CANCEL,
  "query.signal() stops a COPY either way and rejects with the signal's reason",
  async () => {
    await using sql = postgres(url, { max: 1, ...quiet });
    await sql`create temp table signalled (x int)`;
    const into = new AbortController();
    const q1 = sql`copy signalled from stdin`.signal(into.signal);
    const writable = await q1.writable();
    writable.on("error", () => {}); // writes after the abort fail
    writable.write("1\n");
    into.abort(new Error("user left"));
    await assert.rejects(q1, /user left/);
    assert.equal((await sql`select count(*)::int as n from signalled`)[0].n, 0);

    const out = new AbortController();
    const q2 = sql`copy (select generate_series(1, 1000000000)) to stdout`.signal(out.signal);
    const readable = await q2.readable();
    await new Promise((r) => readable.once("data", r));
    readable.pause();
    out.abort(new Error("enough"));
    await assert.rejects(q2, /enough/);
    // The stream ends too, with the server's error, once it is read.
    await assert.rejects(
      (async () => {
        for await (const _ of readable) { /* what was buffered, then the error */ }
      })(),
      (e) => e instanceof PostgresError && e.code === "57014",
    );
    await assert.rejects(
      sql`copy signalled from stdin`.signal(AbortSignal.abort(new Error("too late"))).writable(),
      /too late/,
    );
    assert.equal((await sql`select 1 as one`)[0].one, 1);
  },
);

Deno.test("Node readable: a COPY that fails mid-way errors the stream after the rows before it", async () => {
  await using sql = postgres(url, { max: 1, ...quiet });
  const query = sql`copy (select 10 / (5 - g) from generate_series(1, 10) g) to stdout`;
  const readable = await query.readable();
  const seen: string[] = [];
  await assert.rejects(
    (async () => {
      for await (const chunk of readable) seen.push(chunk.toString());
    })(),
    (e) => e instanceof PostgresError && e.code === "22012",
  );
  assert.deepEqual(seen, ["2\n", "3\n", "5\n", "10\n"]);
  await assert.rejects(query, (e) => e instanceof PostgresError && e.code === "22012");
  // Not read at all: the failure waits for a reader instead of throwing from an unheard 'error'.
  // It has arrived once the query rejects, and a round trip after it leaves any 'error' emitted
  // then the time to throw.
  const failing = sql`copy (select 1 / (g - 2) from generate_series(1, 2) g) to stdout`;
  const unread = await failing.readable();
  await assert.rejects(failing, (e) => e instanceof PostgresError && e.code === "22012");
  assert.equal((await sql`select 1 as one`)[0].one, 1);
  const rest: string[] = [];
  await assert.rejects(
    (async () => {
      for await (const chunk of unread) rest.push(chunk.toString());
    })(),
    (e) => e instanceof PostgresError && e.code === "22012",
  );
  assert.deepEqual(rest, ["-1\n"]);
  assert.equal((await sql`select 2 as two`)[0].two, 2);
});

serverTest(
  CANCEL,
  "Node readable: destroy() mid-way cancels a large export outside a transaction; inside one the rest is drained",
  async () => {
    await using sql = postgres(url, { max: 1, ...quiet });
    // Streamed row by row and practically endless: only the cancel ends it.
    const query = sql.unsafe(
      "copy (select generate_series(1, 1000000000), repeat('x', 200)) to stdout",
    );
    let chunks = 0;
    for await (const _ of await query.readable()) if (++chunks === 10) break; // destroys the stream
    await assert.rejects(query, (e) => e instanceof PostgresError && e.code === "57014");
    assert.equal((await sql`select 3 as three`)[0].three, 3);

    const [count, after] = await sql.begin(async (tx) => {
      const inTx = tx.unsafe("copy (select g from generate_series(1, 100000) g) to stdout");
      const readable = await inTx.readable();
      await new Promise((r) => readable.once("data", r));
      readable.destroy();
      const copied = await inTx; // drained, not cancelled: the transaction is still good
      return [copied.count, (await tx`select 4 as four`)[0].four];
    });
    assert.equal(count, 100000);
    assert.equal(after, 4);
  },
);

Deno.test("COPY streams: the wrong kind of query rejects with a typed error; nothing hangs", async () => {
  await using sql = postgres(url, { max: 1, ...quiet });
  await sql`create temp table kinds (x int)`;
  const notCopyOut = (e: unknown) => e instanceof QueryError && e.code === "NOT_COPY_TO_STDOUT";
  const notCopyIn = (e: unknown) => e instanceof QueryError && e.code === "NOT_COPY_FROM_STDIN";
  await assert.rejects(sql`select 1`.readable(), notCopyOut);
  await assert.rejects(sql`select 1`.writable(), notCopyIn);
  await assert.rejects(sql`copy kinds from stdin`.readable(), notCopyOut);
  await assert.rejects(sql`copy kinds to stdout`.writable(), notCopyIn);
  await assert.rejects(sql`select 1`.readableStream(), notCopyOut);
  await assert.rejects(sql`select 1`.writableStream(), notCopyIn);
  const q = sql`select 1`;
  await assert.rejects(q.readable(), notCopyOut);
  await assert.rejects(q, notCopyOut); // the query itself settles the same way
  await assert.rejects(
    sql`copy kinds from stdin where x > ${1}`.writable(),
    (e) => e instanceof QueryError && e.code === "COPY_PARAMETERS",
  );
  await assert.rejects(
    sql`copy no_such_table to stdout`.readable(),
    (e) => e instanceof PostgresError && e.code === "42P01",
  );
  const cancelled = sql`copy kinds from stdin`;
  cancelled.cancel();
  await assert.rejects(cancelled.writable(), (e) => e instanceof PostgresError);
  assert.equal((await sql`select 5 as five`)[0].five, 5);
});

// ---------------------------------------------------------------------------
// Web streams

Deno.test("Web streams: pipeTo into writableStream(), readableStream() through a Response", async () => {
  await using sql = postgres(url, { max: 1, ...quiet });
  await sql`create temp table web (id int, name text)`;
  const into = sql`copy web from stdin`;
  await ReadableStream.from(
    (function* () {
      for (let i = 1; i <= 500; i++) {
        yield i % 2 ? `${i}\tn${i}\n` : new TextEncoder().encode(`${i}\tn${i}\n`);
      }
    })(),
  ).pipeTo(await into.writableStream());
  assert.equal((await into).count, 500);
  const out = sql`copy (select * from web order by id) to stdout with (format csv)`;
  const text = await new Response(await out.readableStream()).text();
  const lines = text.trimEnd().split("\n");
  assert.equal(lines.length, 500);
  assert.equal(lines[499], "500,n500");
  assert.equal((await out).count, 500);
});

serverTest(
  CANCEL,
  "Web streams: abort() sends CopyFail; cancel() stops an export; bad chunks are refused",
  async () => {
    await using sql = postgres(url, { max: 1, ...quiet });
    await sql`create temp table web_abort (x int)`;
    const q = sql`copy web_abort from stdin`;
    const writer = (await q.writableStream()).getWriter();
    await writer.write("1\n");
    await writer.abort(new Error("changed my mind"));
    await assert.rejects(q, (e) => e instanceof PostgresError && /changed my mind/.test(e.message));

    const bad = (await sql`copy web_abort from stdin`.writableStream()).getWriter();
    await assert.rejects(
      bad.write(42 as unknown as string),
      (e) => e instanceof QueryError && e.code === "INVALID_COPY_CHUNK",
    );
    assert.equal((await sql`select count(*)::int as n from web_abort`)[0].n, 0);

    const big = sql`copy (select generate_series(1, 1000000000)) to stdout`; // ends by cancel only
    const reader = (await big.readableStream()).getReader();
    assert.ok((await reader.read()).value!.length > 0);
    await reader.cancel();
    await assert.rejects(big, (e) => e instanceof PostgresError && e.code === "57014");
    assert.equal((await sql`select 6 as six`)[0].six, 6);
  },
);

// ---------------------------------------------------------------------------
// Abandoned streams (needs --expose-gc, so in a child process)

serverTest(
  CANCEL,
  "abandoned COPY streams release the connection when collected; a flowing one is not collected",
  async () => {
    const fixture = new URL("./fixtures/abandoned_copy.ts", import.meta.url);
    const report = await runWithGc(fixture, [url]) as Record<string, any>;
    assert.equal(report.starved, undefined, `the connection stayed held after: ${report.starved}`);
    const collected = /57014: COPY from stdin failed: the COPY stream was garbage-collected/;
    for (const kind of ["writable", "writableStream", "writableNeverAwaited"]) {
      assert.equal(report[kind].freed, true, `${kind}: the next query never ran`);
      assert.match(report[kind].copy, collected, kind);
    }
    for (const kind of ["readable", "readableStream"]) {
      assert.equal(report[kind].freed, true, `${kind}: the next query never ran`);
      assert.match(report[kind].copy, /^57014: canceling statement due to user request/, kind);
    }
    assert.equal(report.rowsLeft, 0);
    assert.equal(report.flowed, 100);
  },
);

// ---------------------------------------------------------------------------
// A transaction that ends while its COPY FROM STDIN is still open

/** Opens a COPY FROM STDIN of each stream kind and sends one row through it, leaving it open. */
const openCopyIn = {
  writable: async (tx: TransactionSql, table: string) => {
    const q = tx`copy ${tx(table)} from stdin`;
    const w = await q.writable();
    await new Promise<void>((resolve, reject) => w.write("1\n", (e) => e ? reject(e) : resolve()));
    return { q, stream: w as unknown };
  },
  writableStream: async (tx: TransactionSql, table: string) => {
    const q = tx`copy ${tx(table)} from stdin`;
    const ws = await q.writableStream();
    const writer = ws.getWriter();
    await writer.write("1\n");
    writer.releaseLock();
    return { q, stream: ws as unknown };
  },
};

Deno.test("begin(): a callback that throws with a COPY still open fails the COPY, rolls back and rejects with its error", async () => {
  await using sql = postgres(url, { max: 1, ...quiet }); // one connection: it must be free again
  await sql`create temp table copy_open_throw (x int)`;
  for (const [kind, open] of Object.entries(openCopyIn)) {
    let copy: Promise<unknown> | undefined;
    const boom = new Error(`boom (${kind})`);
    await assert.rejects(
      within(
        sql.begin(async (tx) => {
          await tx`insert into copy_open_throw values (0)`;
          copy = (await open(tx, "copy_open_throw")).q;
          throw boom;
        }),
        10_000,
        `begin() (${kind})`,
      ),
      (e) => e === boom,
    );
    await assert.rejects(within(copy!, 10_000, `the COPY (${kind})`), PostgresError, kind);
    assert.equal((await sql`select count(*)::int as n from copy_open_throw`)[0].n, 0, kind);
    assert.equal((await sql`select 1 as one`)[0].one, 1);
  }
});

Deno.test("begin(): a callback that returns with a COPY still open rejects with COPY_IN_PROGRESS after rolling back", async () => {
  await using sql = postgres(url, { max: 1, ...quiet });
  await sql`create temp table copy_open_return (x int)`;
  for (const [kind, open] of Object.entries(openCopyIn)) {
    let copy: Promise<unknown> | undefined;
    await assert.rejects(
      within(
        sql.begin(async (tx) => {
          await tx`insert into copy_open_return values (0)`;
          copy = (await open(tx, "copy_open_return")).q;
          return "done";
        }),
        10_000,
        `begin() (${kind})`,
      ),
      (e) => e instanceof QueryError && e.code === "COPY_IN_PROGRESS",
      kind,
    );
    await assert.rejects(within(copy!, 10_000, `the COPY (${kind})`), PostgresError, kind);
    assert.equal((await sql`select count(*)::int as n from copy_open_return`)[0].n, 0, kind);
    assert.equal((await sql`select 1 as one`)[0].one, 1);
  }
});

Deno.test("begin() without a callback: commit() or rollback() with a COPY still open does not hang", async () => {
  await using sql = postgres(url, { max: 1, ...quiet });
  await sql`create temp table copy_open_handle (x int)`;
  for (const end of ["commit", "rollback"] as const) {
    const tx = await sql.begin();
    await tx`insert into copy_open_handle values (0)`;
    const { q } = await openCopyIn.writable(tx, "copy_open_handle");
    const ended = within(tx[end](), 10_000, `${end}()`);
    if (end === "commit") {
      await assert.rejects(ended, (e) => e instanceof QueryError && e.code === "COPY_IN_PROGRESS");
    } else await ended;
    await assert.rejects(within(q, 10_000, `the COPY (${end})`), PostgresError, end);
    assert.equal((await sql`select count(*)::int as n from copy_open_handle`)[0].n, 0, end);
  }
  assert.equal((await sql`select 1 as one`)[0].one, 1);
});

Deno.test("begin(): a COPY the callback finished before returning still commits", async () => {
  await using sql = postgres(url, { max: 1, ...quiet });
  await sql`create temp table copy_closed_return (x int)`;
  const result = await within(
    sql.begin(async (tx) => {
      await pipeline(
        Readable.from(["1\n", "2\n"]),
        await tx`copy copy_closed_return from stdin`.writable(),
      );
      const writer = (await tx`copy copy_closed_return from stdin`.writableStream()).getWriter();
      await writer.write("3\n");
      await writer.close();
      return "done";
    }),
    10_000,
    "begin()",
  );
  assert.equal(result, "done");
  assert.equal((await sql`select count(*)::int as n from copy_closed_return`)[0].n, 3);
});

// ---------------------------------------------------------------------------
// Queries issued while a COPY or a cursor holds a connection (issue: `await sql\`select 1\``
// while a COPY FROM STDIN was open waited for the COPY to end, for ever, whatever max was)

Deno.test("postgres.js 'query during copy error': max 1, a COPY FROM STDIN open: queries, reserve() and begin() reject at once with COPY_IN_PROGRESS", async () => {
  const sql = postgres(url, { max: 1, ...quiet });
  await sql`create table copy_busy_one (x int)`;
  try {
    const writable = await sql`copy copy_busy_one from stdin`.writable();
    const refused = (e: unknown) => e instanceof QueryError && e.code === "COPY_IN_PROGRESS";
    assert.ok(refused(await within(sql`select 1`.then(() => null, (e) => e), 10_000, "the query")));
    assert.ok(refused(await within(sql.reserve().then(() => null, (e) => e), 10_000, "reserve()")));
    assert.ok(
      refused(await within(sql.begin(() => 1).then(() => null, (e) => e), 10_000, "begin()")),
    );
    await new Promise<void>((resolve, reject) => {
      writable.on("finish", resolve).on("error", reject);
      writable.end("1\n2\n");
    });
    assert.equal((await sql`select count(*)::int as n from copy_busy_one`)[0].n, 2);
  } finally {
    await sql.end({ timeout: 1 });
    await using admin = postgres(url, { max: 1, ...quiet });
    await admin`drop table copy_busy_one`;
  }
});

serverTest(
  SEVERAL_SESSIONS,
  "a COPY FROM STDIN open on one connection: queries and transactions go to another (max 2, and max 10)",
  async () => {
    for (const max of [2, 10]) {
      const sql = postgres(url, { max, ...quiet });
      await sql`create table copy_busy_many (x int)`;
      try {
        await sql`select 1`; // one connection open, idle: the COPY takes it
        const writable = await sql`copy copy_busy_many from stdin`.writable();
        writable.write("1\n");
        const rows = await within(
          Promise.all(Array.from({ length: 20 }, (_, i) => sql`select ${i}::int as i`.execute())),
          10_000,
          `queries beside the COPY (max ${max})`,
        );
        assert.deepEqual(rows.map((r) => r[0].i), Array.from({ length: 20 }, (_, i) => i));
        const inTx = await within(
          sql.begin((tx) => tx`select 7 as seven`),
          10_000,
          "a transaction",
        );
        assert.equal(inTx[0].seven, 7);
        await new Promise<void>((resolve, reject) => {
          writable.on("finish", resolve).on("error", reject);
          writable.end("2\n");
        });
        assert.equal((await sql`select count(*)::int as n from copy_busy_many`)[0].n, 2);
      } finally {
        await sql.end({ timeout: 1 });
        await using admin = postgres(url, { max: 1, ...quiet });
        await admin`drop table copy_busy_many`;
      }
    }
  },
);

serverTest(
  SEVERAL_SESSIONS,
  "a query awaited inside a cursor loop goes to another connection (max 2); at max 1 it runs once the cursor ends",
  async () => {
    {
      const sql = postgres(url, { max: 2, ...quiet });
      try {
        await sql`select 1`;
        const seen: number[] = [];
        const reading = (async () => {
          for await (const rows of sql`select g from generate_series(1, 3) g`.cursor(1)) {
            seen.push((await sql`select ${rows[0].g as number}::int * 10 as x`)[0].x as number);
          }
        })();
        await within(reading, 10_000, "the cursor loop");
        assert.deepEqual(seen, [10, 20, 30]);
      } finally {
        await sql.end({ timeout: 1 }); // a hung loop must not hang the suite
      }
    }
    {
      // One connection: a query issued beside a cursor (not awaited inside it) waits for it.
      await using sql = postgres(url, { max: 1, ...quiet });
      const cursor = sql`select g from generate_series(1, 3) g`.cursor(1);
      const rows: number[] = [];
      const beside = sql`select 5 as five`.execute();
      for await (const batch of cursor) rows.push(batch[0].g as number);
      assert.deepEqual(rows, [1, 2, 3]);
      assert.equal((await within(beside, 10_000, "the query beside the cursor"))[0].five, 5);
    }
  },
);

Deno.test("sql.copyFrom whose rows come from a generator that queries the same pool (max 1): it is refused with COPY_IN_PROGRESS, not hung", async () => {
  const sql = postgres(url, { max: 1, ...quiet });
  await sql`create table copy_from_busy (x int)`;
  try {
    const rows = async function* () {
      yield [1];
      const [{ n }] = await sql`select 2 as n`; // needs a connection while the COPY holds it
      yield [n];
    };
    const e = await within(
      sql.copyFrom("copy_from_busy", rows()).then(() => null, (e) => e),
      10_000,
      "copyFrom",
    );
    assert.ok(e instanceof QueryError && e.code === "COPY_IN_PROGRESS", String(e));
    assert.equal((await sql`select count(*)::int as n from copy_from_busy`)[0].n, 0);
  } finally {
    await sql.end({ timeout: 1 });
    await using admin = postgres(url, { max: 1, ...quiet });
    await admin`drop table copy_from_busy`;
  }
});
