/**
 * The pipeline against a real server: FIFO matching, error isolation, one
 * write per tick, statement caching, out-of-band messages, connection loss.
 */
import assert from "node:assert/strict";
import postgres, { ConnectionError, PostgresError, QueryError } from "./harness/postgres.ts";
import { databaseUrl } from "./harness/env.ts";
import { Statement, StatementCache } from "../src/connection/statement.ts";
import { tapProxy } from "./harness/tap_proxy.ts";
import { untilRan } from "./harness/wait.ts";
import { NETWORK, onPglite, SERVER_PROCESS, serverTest } from "./harness/pglite_mode.ts";

const url = databaseUrl();
const quiet = { onnotice: () => {} };

/** A distinct template object per call, as distinct call sites would make. */
function template(...parts: string[]): TemplateStringsArray {
  return Object.assign([...parts], { raw: [...parts] }) as unknown as TemplateStringsArray;
}

Deno.test("1000 concurrent queries on one connection each get their own answer", async () => {
  await using sql = postgres(url, { max: 1, ...quiet });
  const results = await Promise.all(
    Array.from({ length: 1000 }, (_, i) => sql`select ${i}::int as i, ${"v" + i}::text as t`),
  );
  for (let i = 0; i < 1000; i++) assert.deepEqual([...results[i]], [{ i, t: "v" + i }]);
  // One backend served them all (PGlite is one session by construction, without this view).
  if (!onPglite) {
    const [{ n }] =
      await sql`select count(*)::int as n from pg_stat_activity where application_name = 'pgpipe' and backend_type = 'client backend' and pid = pg_backend_pid()`;
    assert.equal(n, 1);
  }
});

Deno.test("every 10th of 100 concurrent queries fails: exactly those reject", async () => {
  await using sql = postgres(url, { max: 1, ...quiet });
  const settled = await Promise.allSettled(
    Array.from(
      { length: 100 },
      (_, i) => i % 10 === 9 ? sql`select 1/${i - i}::int as x` : sql`select ${i}::int as x`,
    ),
  );
  for (let i = 0; i < 100; i++) {
    const s = settled[i];
    if (i % 10 === 9) {
      assert.equal(s.status, "rejected");
      assert.ok(s.reason instanceof PostgresError);
      assert.equal(s.reason.code, "22012"); // division by zero
    } else {
      assert.equal(s.status, "fulfilled");
      assert.equal(s.value[0].x, i);
    }
  }
  const [{ ok }] = await sql`select true as ok`;
  assert.equal(ok, true);
});

Deno.test("a statement that fails to parse fails every query that shares it, with the real cause", async () => {
  await using sql = postgres(url, { max: 1, ...quiet });
  const bad = () => sql`selec ${1}`;
  const settled = await Promise.allSettled([bad(), sql`select 2 as x`, bad(), bad()]);
  for (const i of [0, 2, 3]) {
    const s = settled[i] as PromiseRejectedResult;
    assert.ok(s.reason instanceof PostgresError);
    assert.equal(s.reason.code, "42601", `query ${i}: ${s.reason.message}`);
  }
  assert.equal((settled[1] as PromiseFulfilledResult<Record<string, unknown>[]>).value[0].x, 2);
  // The failed statement was forgotten: the next use prepares it again (and fails again).
  await assert.rejects(bad(), (e: PostgresError) => e.code === "42601");
});

serverTest(NETWORK, "queries issued in one tick leave in one or two writes", async () => {
  await using proxy = tapProxy(url);
  const { sql, state } = proxy;
  await sql`select 1`; // connect and prepare
  state.recording = true;
  const rows = await Promise.all(
    Array.from({ length: 200 }, (_, i) => sql`select ${i}::int as i`),
  );
  state.recording = false;
  assert.equal(rows[199][0].i, 199);
  // 200 queries of ~60 bytes each: the first 4 KB leave once encoded (the server starts on them),
  // the rest at the end of the tick; never a write per query. The proxy may read the two as one;
  // TCP may split a segment, rarely.
  const { chunks } = state;
  assert.ok(chunks >= 1 && chunks <= 3, `expected two writes, the proxy saw ${chunks} chunks`);
});

/** Keeps this thread busy for `ms`: nothing else of this process runs meanwhile. */
function spin(ms: number): void {
  const end = Date.now() + ms;
  while (Date.now() < end) { /* busy */ }
}

serverTest(
  NETWORK,
  "a large tick's first part reaches the server while the tick is still running",
  async () => {
    await using sql = postgres(url, { max: 1, ...quiet });
    await sql`select 1`; // connected
    const pad = "x".repeat(200);
    // 100 queries of ~300 bytes, sent at once (execute), then this tick stays busy: only a write
    // made before the tick ends lets the server run the first of them meanwhile.
    const sent = Array.from(
      { length: 100 },
      () => sql`select clock_timestamp() as at, ${pad}::text as pad`.execute(),
    );
    spin(500);
    const tickEnded = Date.now();
    const rows = await Promise.all(sent);
    assert.ok(
      rows[0][0].at.getTime() < tickEnded,
      `the first query ran at ${rows[0][0].at.toISOString()}, after the tick that sent it ended`,
    );
    // The rest left at the end of the tick, in order, nothing lost.
    assert.equal(rows.length, 100);
    assert.ok(rows[99][0].at.getTime() >= tickEnded - 5);
  },
);

serverTest(
  NETWORK,
  "a query issued while many are unanswered is written at once, not held for answers",
  async () => {
    await using admin = postgres(url, { max: 1, ...quiet });
    await using proxy = tapProxy(url);
    const { sql, state } = proxy;
    const [{ pid }] = await sql`select pg_backend_pid() as pid`;
    let open!: () => void;
    state.gate = new Promise<void>((resolve) => open = resolve);
    const first = Array.from(
      { length: 100 },
      (_, i) =>
        (i < 99 ? sql`select ${i}::int as x` : sql`select ${i}::int as x, 'first' as m`)
          .execute(),
    );
    // The server ran all 100: their answers wait at the proxy, and none can pass while the gate
    // is shut. A driver that waited for answers before writing more would never send this one
    // (on a real link that costs a round trip); the server seeing it proves it was written.
    await untilRan(admin, pid, "'first'");
    const late = sql`select 100 as x, 'late' as m`.execute();
    await untilRan(admin, pid, "'late'");
    state.gate = null;
    open();
    const rows = await Promise.all([...first, late]);
    assert.deepEqual(rows.map((r) => r[0].x), Array.from({ length: 101 }, (_, i) => i));
  },
);

Deno.test("a pipeline that never empties: 20,000 queries from 300 lanes each get their own answer", async () => {
  await using sql = postgres(url, { max: 1, ...quiet });
  // The connection's FIFO keeps answered slots until it empties or they pile up (4,096), then
  // moves the live ones to the front: answers must still match their queries across that.
  let next = 0;
  let answered = 0;
  await Promise.all(Array.from({ length: 300 }, async () => {
    while (next < 20_000) {
      const v = next++;
      const [{ x, t }] = await sql`select ${v}::int as x, ${"v" + v}::text as t`;
      assert.equal(x, v);
      assert.equal(t, "v" + v);
      answered++;
    }
  }));
  assert.equal(answered, 20_000);
});

Deno.test("queries are lazy: nothing runs until awaited or executed", async () => {
  await using sql = postgres(url, { max: 1, ...quiet });
  await sql`create temp table lazy (x int)`;
  const q = sql`insert into lazy values (1)`;
  await sql`select 1`;
  assert.equal((await sql`select count(*)::int as n from lazy`)[0].n, 0);
  q.execute();
  await q;
  await q; // awaiting again does not run it twice
  assert.equal((await sql`select count(*)::int as n from lazy`)[0].n, 1);
});

Deno.test("fragments compose and parameters are renumbered", async () => {
  await using sql = postgres(url, { max: 1, ...quiet });
  const cond = sql`x > ${2} and x < ${5}`;
  const rows =
    await sql`select x from generate_series(${1}::int, ${10}::int) x where ${cond} order by x`;
  assert.deepEqual(rows.map((r) => r.x), [3, 4]);
  const nested = sql`select ${sql`${"a"}::text || ${sql`${"b"}::text`}`} as s`;
  assert.equal((await nested)[0].s, "ab");
  // A value that looks like SQL stays a parameter.
  const evil = "'; drop table pg_class; --";
  assert.equal((await sql`select ${evil}::text as s`)[0].s, evil);
});

Deno.test("result: count, command, columns, values()", async () => {
  await using sql = postgres(url, { max: 1, ...quiet });
  const r = await sql`select g as a, g * 2 as b from generate_series(1, 3) g`;
  assert.equal(r.count, 3);
  assert.equal(r.command, "SELECT");
  assert.deepEqual(r.columns?.map((c) => c.name), ["a", "b"]);
  assert.equal(r.columns?.[0].type, 23);
  assert.ok(Array.isArray(r));
  assert.equal(r.state?.status, "I");
  assert.equal(r.state?.pid, (await sql`select pg_backend_pid() as p`)[0].p);
  const values = await sql`select 1 as a, 'x' as b`.values();
  assert.deepEqual([...values], [[1, "x"]]);
  await sql`create temp table counted (x int)`;
  const ins = await sql`insert into counted select generate_series(1, 5)`;
  assert.equal(ins.command, "INSERT");
  assert.equal(ins.count, 5);
  const upd = await sql`update counted set x = x + 1 where x > 3`;
  assert.equal(upd.command, "UPDATE");
  assert.equal(upd.count, 2);
  const empty = await sql`select 1 where false`;
  assert.equal(empty.length, 0);
  assert.equal(empty.count, 0);
  const raw = await sql`select 'ab'::text as t, null as n`.raw();
  assert.deepEqual(raw.map(([t, n]) => [[...(t as Uint8Array)], n]), [[[97, 98], null]]);
  assert.ok(raw[0][0] instanceof Uint8Array);
});

Deno.test("PostgresError carries the server's fields and the query, not enumerably", async () => {
  await using sql = postgres(url, { max: 1, ...quiet });
  await sql`create temp table uniq (id int constraint uniq_pk primary key)`;
  await sql`insert into uniq values (1)`;
  const err = await sql`insert into uniq values (${1})`.then(() => null, (e: unknown) => e);
  assert.ok(err instanceof PostgresError);
  assert.equal(err.code, "23505");
  assert.equal(err.severity, "ERROR");
  assert.equal(err.constraint_name, "uniq_pk");
  assert.equal(err.table_name, "uniq");
  assert.match(err.detail ?? "", /Key \(id\)=\(1\) already exists/);
  assert.ok(err.file && err.line && err.routine);
  assert.equal(err.query, "insert into uniq values ($1)");
  assert.deepEqual(err.parameters, [1]); // the values as bound, as postgres.js gives them
  assert.ok(!Object.keys(err).includes("query"));
  assert.ok(!Object.keys(err).includes("parameters"));
  const syntax = await sql`select from from`.then(() => null, (e) => e as PostgresError);
  assert.equal(syntax?.code, "42601");
  assert.equal(syntax?.position, "13");
});

Deno.test("bad input is refused before anything is sent; the connection stays usable", async () => {
  await using sql = postgres(url, { max: 1, ...quiet });
  await assert.rejects(
    sql`select ${undefined}`,
    (e) => e instanceof QueryError && e.code === "UNDEFINED_VALUE",
  );
  await assert.rejects(
    sql`select ${() => 1}`,
    (e) => e instanceof QueryError && e.code === "UNSUPPORTED_TYPE",
  );
  await assert.rejects(
    sql`select ${new Date(NaN)}`,
    (e) => e instanceof QueryError && e.code === "INVALID_DATE",
  );
  await assert.rejects(
    sql`select 'a\0b'`,
    (e) => e instanceof QueryError && e.code === "NUL_IN_QUERY",
  );
  const many = Array.from({ length: 65536 }, (_, i) => i);
  await assert.rejects(
    sql(template("select 1", ...many.map(() => ",")), ...many),
    (e) => e instanceof QueryError && e.code === "MAX_PARAMETERS_EXCEEDED",
  );
  // postgres.js semantics: sql("...") makes an identifier; awaiting it is a clear error.
  await assert.rejects(
    async () => await (sql as unknown as (s: string) => PromiseLike<unknown>)("select 1"),
    (e) => e instanceof QueryError && e.code === "NOT_TAGGED_CALL",
  );
  assert.equal((await sql`select 7 as x`)[0].x, 7);
});

Deno.test("notices, parameter changes and notifications are routed by type amid pipelined queries", async () => {
  const notices: string[] = [];
  const parameters: [string, string][] = [];
  const notifications: string[] = [];
  await using sql = postgres(url, {
    max: 1,
    onnotice: (n) => notices.push(n.message),
    onparameter: (k, v) => parameters.push([k, v]),
    onnotify: (n) => notifications.push(`${n.channel}:${n.payload}`),
  });
  const [a, , b, , , c] = await Promise.all([
    sql`select 1 as x`,
    sql`do $$ begin raise notice 'hello %', 42; end $$`,
    sql`select 2 as x`,
    sql`set application_name = 'pgpipe-test'`,
    sql`listen pgpipe_chan`,
    sql`select 3 as x`,
  ]);
  assert.deepEqual([a[0].x, b[0].x, c[0].x], [1, 2, 3]);
  await Promise.all([sql`notify pgpipe_chan, 'p1'`, sql`select pg_notify('pgpipe_chan', 'p2')`]);
  await sql`select 1`;
  assert.deepEqual(notices, ["hello 42"]);
  assert.ok(parameters.some(([k, v]) => k === "application_name" && v === "pgpipe-test"));
  assert.deepEqual(notifications, ["pgpipe_chan:p1", "pgpipe_chan:p2"]);
});

Deno.test("past max_pipeline, requests wait locally and all complete in order", async () => {
  await using sql = postgres(url, { max: 1, max_pipeline: 7, ...quiet });
  const rows = await Promise.all(Array.from({ length: 100 }, (_, i) => sql`select ${i}::int as i`));
  assert.deepEqual(rows.map((r) => r[0].i), Array.from({ length: 100 }, (_, i) => i));
});

Deno.test("the statement cache is bounded and closes evicted statements on the server", async () => {
  await using sql = postgres(url, { max: 1, max_statements: 5, ...quiet });
  for (let round = 0; round < 3; round++) {
    const rows = await Promise.all(
      Array.from(
        { length: 20 },
        (_, i) => sql<{ v: number }[]>(template(`select ${i} + `, "::int as v"), round),
      ),
    );
    assert.deepEqual(rows.map((r) => r[0].v), Array.from({ length: 20 }, (_, i) => i + round));
  }
  const [{ n }] = await sql<{ n: number }[]>`select count(*)::int as n from pg_prepared_statements`;
  assert.ok(n <= 5, `${n} statements prepared on the server`);
  assert.ok(n >= 1);
});

Deno.test("statement cache: the least recently used statement is the one evicted", () => {
  const cache = new StatementCache(2);
  const a = cache.create("a", "select 1", []);
  const b = cache.create("b", "select 2", []);
  assert.equal(cache.get("a"), a); // a is now more recent than b
  cache.create("c", "select 3", []);
  assert.deepEqual(cache.evicted, [b]);
  assert.equal(cache.get("b"), undefined);
  assert.equal(cache.get("a"), a);
  cache.get("c");
  cache.create("d", "select 4", []); // a was used before c
  assert.deepEqual(cache.evicted, [b, a]);
  assert.equal(cache.size, 2);
});

Deno.test("statements with the same columns share one row constructor (no compile per unnamed query)", () => {
  const columns = [
    { name: "id", table: 0, number: 0, type: 23, size: 4, modifier: -1, format: 0 },
    { name: "name", table: 0, number: 0, type: 25, size: -1, modifier: -1, format: 0 },
  ];
  const a = new Statement("", "select 1", []);
  const b = new Statement("", "select 2", []);
  a.describe(columns, { bigint: false });
  b.describe(columns.map((c) => ({ ...c })), { bigint: false });
  assert.equal(a.Row, b.Row);
  const c = new Statement("", "select 3", []);
  c.describe([columns[1], columns[0]], { bigint: false });
  assert.notEqual(c.Row, a.Row, "another column order is another shape");
  assert.deepEqual({ ...new c.Row(["x", 1]) }, { name: "x", id: 1 });
});

Deno.test("prepare: false uses the unnamed statement and still pipelines", async () => {
  await using sql = postgres(url, { max: 1, prepare: false, ...quiet });
  const rows = await Promise.all(Array.from({ length: 50 }, (_, i) => sql`select ${i}::int as i`));
  assert.deepEqual(rows.map((r) => r[0].i), Array.from({ length: 50 }, (_, i) => i));
  const [{ n }] = await sql`select count(*)::int as n from pg_prepared_statements`;
  assert.equal(n, 0);
});

serverTest(
  SERVER_PROCESS,
  "a terminated backend rejects everything in flight with a typed error; the next query reconnects",
  async () => {
    await using sql = postgres(url, { max: 1, ...quiet });
    await using admin = postgres(url, { max: 1, ...quiet });
    const [{ pid }] = await sql`select pg_backend_pid() as pid`;
    const inflight = Array.from(
      { length: 200 },
      (_, i) => sql`select pg_sleep(0.001), ${i}::int as i`,
    );
    const settled = Promise.allSettled(inflight);
    await admin`select pg_terminate_backend(${pid})`;
    const outcomes = await settled;
    let rejected = 0;
    for (const [i, s] of outcomes.entries()) {
      if (s.status === "fulfilled") assert.equal(s.value[0].i, i);
      else {
        rejected++;
        assert.ok(s.reason instanceof ConnectionError, String(s.reason));
        assert.equal(s.reason.code, "CONNECTION_CLOSED");
        assert.ok(s.reason.outcome === "unknown" || s.reason.outcome === "not-sent");
      }
    }
    assert.ok(rejected > 0, "the backend was terminated while queries were in flight");
    const [{ pid: next }] = await sql`select pg_backend_pid() as pid`;
    assert.notEqual(next, pid);
  },
);

Deno.test("end() waits for queries in flight; later queries reject with CONNECTION_ENDED", async () => {
  const sql = postgres(url, { max: 1, ...quiet });
  const pending = Array.from({ length: 20 }, (_, i) => sql`select ${i}::int as i`.execute());
  const done = Promise.all(pending);
  await sql.end();
  assert.equal((await done)[19][0].i, 19);
  await assert.rejects(
    sql`select 1`,
    (e) => e instanceof ConnectionError && e.code === "CONNECTION_ENDED",
  );
});

Deno.test("startup errors reject with the server's error", async () => {
  const sql = postgres(url.replace(/\/[^/?]*(\?|$)/, "/no_such_database$1"), { max: 1, ...quiet });
  try {
    await assert.rejects(sql`select 1`, (e) => e instanceof PostgresError && e.code === "3D000");
  } finally {
    await sql.end();
  }
});

Deno.test("empty query", async () => {
  await using sql = postgres(url, { max: 1, ...quiet });
  const r = await sql``;
  assert.equal(r.length, 0);
  assert.equal(r.command, null);
});

Deno.test("past max_pipeline_bytes, requests wait locally; a request larger than the bound still goes", async () => {
  await using sql = postgres(url, { max: 1, max_pipeline_bytes: 1000, ...quiet });
  const big = "x".repeat(300);
  const rows = await Promise.all(
    Array.from({ length: 50 }, (_, i) => sql`select ${i}::int as i, length(${big + i}) as n`),
  );
  assert.deepEqual(rows.map((r) => r[0].i), Array.from({ length: 50 }, (_, i) => i));
  const [{ n }] = await sql`select length(${"y".repeat(5000)}) as n`;
  assert.equal(n, 5000);
});

Deno.test("row objects: any column name is a plain key, including quotes, __proto__ and duplicates", async () => {
  await using sql = postgres(url, { max: 1, ...quiet });
  const [row] = await sql.unsafe(
    `select 1 as "a""b", 2 as "c\\d", 3 as "new
line", 4 as "__proto__", 5 as "constructor", 6 as "é🐘", 7 as dup, 8 as dup, 9 as "}); throw 1; ({"`,
  );
  assert.equal(Object.getPrototypeOf(row), Object.prototype);
  assert.equal(row['a"b'], 1);
  assert.equal(row["c\\d"], 2);
  assert.equal(row["new\nline"], 3);
  assert.ok(Object.hasOwn(row, "__proto__"));
  assert.equal(Object.getOwnPropertyDescriptor(row, "__proto__")?.value, 4);
  assert.equal(row.constructor, 5);
  assert.equal(row["é🐘"], 6);
  assert.equal(row.dup, 8, "the later column wins, as in postgres.js");
  assert.equal(row["}); throw 1; ({"], 9);
  const [plain] = await sql`select 1 as a, 'x' as b`;
  assert.deepEqual(plain, { a: 1, b: "x" });
});
