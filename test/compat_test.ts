// deno-lint-ignore-file no-import-prefix no-explicit-any -- npm packages are test-only imports, pinned here
/**
 * postgres.js compatibility: each test is one behaviour postgres.js documents (its README and
 * types) or its own test suite relies on, checked against a real server. Code written for
 * postgres.js must get the same results, error codes and shapes from pgpipe.
 */
import assert from "node:assert/strict";
import legacyAssert from "node:assert";
import { Buffer } from "node:buffer";
import postgres, {
  ConnectionError,
  type Notice,
  PostgresError,
  QueryError,
  Result,
} from "./harness/postgres.ts";
import postgresJs from "npm:postgres@3.4.9";
import { databaseUrl } from "./harness/env.ts";
import { until, untilSleeping } from "./harness/wait.ts";
import {
  CANCEL,
  NOT_BUILT_IN,
  POSTGRES_JS_REFERENCE,
  SERVER_PROCESS,
  serverTest,
  SEVERAL_SESSIONS,
} from "./harness/pglite_mode.ts";

const url = databaseUrl();
const quiet = { onnotice: () => {} };

Deno.test("debug: true gives errors the caller's line and enumerable query details", async () => {
  await using sql = postgres(url, { max: 1, debug: true, ...quiet });
  const line = Number(new Error().stack!.split("\n")[1].match(/:(\d+):/)![1]) + 1;
  const err = await sql`select ${"x"}::int as wrong`.catch((e) => e);
  assert.ok(err instanceof PostgresError);
  assert.equal(err.code, "22P02");
  const keys = Object.keys(err);
  for (const key of ["query", "parameters", "args"]) assert.ok(keys.includes(key), key);
  assert.equal(err.query, "select $1::int as wrong");
  assert.deepEqual(err.parameters, ["x"]);
  assert.deepEqual(err.args, ["x"]);
  // The whole async stack of where the query was written follows the read loop's frames.
  assert.match(err.stack ?? "", new RegExp("compat_test\\.ts:" + line + ":"));
});

Deno.test("without debug the query details exist but are not enumerable", async () => {
  await using sql = postgres(url, { max: 1, ...quiet });
  const line = Number(new Error().stack!.split("\n")[1].match(/:(\d+):/)![1]) + 1;
  const err = await sql`select ${"x"}::int as wrong`.catch((e) => e);
  assert.ok(err instanceof PostgresError);
  assert.equal(err.query, "select $1::int as wrong");
  assert.deepEqual(err.args, ["x"]);
  assert.deepEqual(Object.keys(err).filter((k) => ["query", "parameters", "args"].includes(k)), []);
  // The last line of the stack is where the query was written, as postgres.js gives it.
  const lines = (err.stack ?? "").trim().split("\n");
  assert.match(lines.at(-1)!, new RegExp("compat_test\\.ts:" + line + ":"));
});

Deno.test("debug as a function sees each query; a wrong debug value is refused in postgres()", async () => {
  const seen: string[] = [];
  await using sql = postgres(url, {
    max: 1,
    debug: (_conn, query) => seen.push(query),
    ...quiet,
  });
  await sql`select 1 as x`;
  assert.deepEqual(seen, ["select 1 as x"]);
  assert.throws(
    () => postgres(url, { debug: "yes" as unknown as boolean }),
    (e) => e instanceof TypeError && /debug/.test(e.message),
  );
});

Deno.test("a debug hook that throws fails that query only; the client stays usable", async () => {
  let calls = 0;
  await using sql = postgres(url, {
    max: 1,
    debug: () => {
      if (++calls === 1) throw new Error("hook broke");
    },
    ...quiet,
  });
  await assert.rejects(sql`select 1`, /hook broke/);
  assert.equal((await sql`select 2 as x`)[0].x, 2);
});

serverTest(CANCEL, "cancel() rejects with 57014 whether the query was sent or not", async () => {
  await using sql = postgres(url, { max: 1, ...quiet });
  const unsent = sql`select 1`;
  unsent.cancel();
  await assert.rejects(unsent, (e) => e instanceof PostgresError && e.code === "57014");
  const [{ pid }] = await sql`select pg_backend_pid() as pid`;
  const running = sql`select pg_sleep(5)`.execute();
  await using admin = postgres(url, { max: 1, ...quiet });
  await untilSleeping(admin, pid);
  running.cancel();
  await assert.rejects(running, (e) => e instanceof PostgresError && e.code === "57014");
  assert.equal((await sql`select 1 as x`)[0].x, 1);
});

serverTest(
  CANCEL,
  "end({ timeout: 0 }) rejects queries in flight with CONNECTION_DESTROYED",
  async () => {
    const sql = postgres(url, { max: 1, ...quiet });
    await using admin = postgres(url, { max: 1, ...quiet });
    const [{ pid }] = await sql`select pg_backend_pid() as pid`;
    const slow = sql`select pg_sleep(5)`.execute();
    const waiting = sql`select 1`.execute();
    await untilSleeping(admin, pid);
    await sql.end({ timeout: 0 });
    for (const q of [slow, waiting]) {
      await assert.rejects(
        q,
        (e) => e instanceof ConnectionError && e.code === "CONNECTION_DESTROYED",
      );
    }
    await assert.rejects(sql`select 1`, (e) => (e as ConnectionError).code === "CONNECTION_ENDED");
    await assert.rejects(
      sql.begin((tx) => tx`select 1`),
      (e) => (e as ConnectionError).code === "CONNECTION_ENDED",
    );
  },
);

serverTest(
  SEVERAL_SESSIONS,
  "a transaction whose connection closes while idle rejects with CONNECTION_CLOSED",
  async () => {
    await using sql = postgres(url, { max: 1, ...quiet });
    await using admin = postgres(url, { max: 1, ...quiet });
    const err = await sql.begin(async (tx) => {
      const [{ pid }] = await tx`select pg_backend_pid() as pid`;
      await admin`select pg_terminate_backend(${pid})`;
      // No query of ours is in flight when the connection goes.
      await until("the backend gone", async () => {
        const [{ n }] =
          await admin`select count(*)::int as n from pg_stat_activity where pid = ${pid}`;
        return n === 0;
      });
    }).catch((e) => e);
    assert.ok(err instanceof ConnectionError, String(err));
    assert.equal(err.code, "CONNECTION_CLOSED");
    assert.equal((await sql`select 1 as x`)[0].x, 1);
  },
);

serverTest(
  SEVERAL_SESSIONS,
  "sql`begin` outside sql.begin on a pool of many is UNSAFE_TRANSACTION",
  async () => {
    await using sql = postgres(url, { max: 2, ...quiet });
    await assert.rejects(
      sql`begin`,
      (e) => e instanceof QueryError && e.code === "UNSAFE_TRANSACTION",
    );
    await assert.rejects(
      sql.unsafe("start transaction"),
      (e) => (e as QueryError).code === "UNSAFE_TRANSACTION",
    );
    // One connection cannot be shared by surprise, so it is allowed there, as in postgres.js.
    await using one = postgres(url, { max: 1, ...quiet });
    await one`begin`;
    await one`rollback`;
    assert.equal((await sql`select 1 as x`)[0].x, 1);
  },
);

serverTest(
  SEVERAL_SESSIONS,
  "a transaction opened mid-text on a pool of many fails and its connection is closed",
  async () => {
    await using sql = postgres(url, { max: 2, ...quiet });
    await sql`create table if not exists compat_vac (x int)`;
    // The text does not start with begin, so only the server's answer shows the transaction.
    await assert.rejects(
      sql.unsafe("select 1; begin"),
      (e) => (e as QueryError).code === "UNSAFE_TRANSACTION",
    );
    // Left open, the next queries on that connection would run inside the transaction, where
    // VACUUM is refused (25001). The connection was closed instead, so each one runs.
    for (let i = 0; i < 4; i++) await sql.unsafe("vacuum compat_vac");
    await sql`drop table compat_vac`;
  },
);

Deno.test("sql('...') awaited, caught or finally'd is NOT_TAGGED_CALL", async () => {
  await using sql = postgres(url, { max: 1, ...quiet });
  const call = sql as unknown as (s: string) => PromiseLike<unknown> & {
    catch(f: () => void): unknown;
    finally(f: () => void): unknown;
  };
  const notTagged = (e: unknown) => (e as QueryError).code === "NOT_TAGGED_CALL";
  await assert.rejects(async () => await call("select 1"), notTagged);
  assert.throws(() => call("select 1").catch(() => {}), notTagged);
  assert.throws(() => call("select 1").finally(() => {}), notTagged);
});

Deno.test("65534 parameters work; 65535 is MAX_PARAMETERS_EXCEEDED", async () => {
  await using sql = postgres(url, { max: 1, ...quiet });
  await sql`create temp table compat_params (x int)`;
  const rows = (n: number) => Array.from({ length: n }, (_, x) => ({ x }));
  await sql`insert into compat_params ${sql(rows(65534))}`;
  assert.equal((await sql`select count(*)::int as n from compat_params`)[0].n, 65534);
  await assert.rejects(
    sql`insert into compat_params ${sql(rows(65535))}`,
    (e) => (e as QueryError).code === "MAX_PARAMETERS_EXCEEDED",
  );
});

Deno.test("sql.unsafe with a text whose toString throws rejects with that error", async () => {
  await using sql = postgres(url, { max: 1, ...quiet });
  const text = {
    toString: () => {
      throw new Error("no text for you");
    },
  };
  await assert.rejects(
    sql.unsafe(text as unknown as string),
    (e) => (e as Error).message === "no text for you",
  );
  // Objects that stringify are run as text, as postgres.js does.
  assert.equal(
    (await sql.unsafe({ toString: () => "select 3 as x" } as unknown as string))[0].x,
    3,
  );
});

Deno.test("bytea is a Buffer: toString gives the text, Uint8Array code keeps working", async () => {
  await using sql = postgres(url, { max: 1, ...quiet });
  const [{ b }] = await sql`select ${Buffer.from("hello")}::bytea as b`;
  assert.ok(Buffer.isBuffer(b));
  assert.ok(b instanceof Uint8Array);
  assert.equal(b.toString(), "hello");
  const [{ c }] = await sql`select 'ab'::bytea as c`;
  assert.equal(c.toString("hex"), "6162");
});

Deno.test("sql.array of plain values round trips as postgres.js's text[], nested too", async () => {
  await using sql = postgres(url, { max: 1, ...quiet });
  assert.equal((await sql`select ${sql.array([1, 2, 3])} as x`)[0].x[2], "3");
  assert.equal((await sql`select ${sql.array([[1, 2], [3, 4]])} as x`)[0].x[1][1], "4");
  assert.equal(
    (await sql`select ${sql.array([[[1, 2], [3, 4]], [[5, 6], [7, 8]]])} as x`)[0].x[1][0][1],
    "6",
  );
  // With a type given, the elements are that type.
  assert.deepEqual((await sql`select ${sql.array([1, 2], 23)} as x`)[0].x, [1, 2]);
  // In an int context the server casts the text array.
  assert.equal((await sql`select (${sql.array([1, 2, 3])}::int[])[2] as x`)[0].x, 2);
});

Deno.test("point[] with a custom point type", async () => {
  await using sql = postgres(url, {
    max: 1,
    ...quiet,
    types: {
      point: {
        to: 600,
        from: [600],
        serialize: ([x, y]: number[]) => "(" + x + "," + y + ")",
        parse: (x: string) => x.slice(1, -1).split(",").map((n) => +n),
      },
    },
  });
  const [{ x }] = await sql`select ${
    sql.array([sql.types.point([1, 2]), sql.types.point([3, 4])])
  } as x`;
  assert.deepEqual(x, [[1, 2], [3, 4]]);
});

Deno.test("a custom serialize that throws rejects that query only, also in a transaction", async () => {
  await using sql = postgres(url, {
    max: 1,
    ...quiet,
    types: {
      bad: {
        to: 25,
        from: [],
        serialize: () => {
          throw new Error("cannot serialize");
        },
        parse: String,
      },
    },
  });
  await assert.rejects(sql`select ${sql.types.bad("x")} as x`, /cannot serialize/);
  const out = await sql.begin(async (tx) => {
    await assert.rejects(tx`select ${tx.types.bad("x")} as x`, /cannot serialize/);
    return (await tx`select 1 as x`)[0].x;
  }).catch((e) => e);
  // The failed serialize never reached the server, so the transaction goes on.
  assert.equal(out, 1);
  assert.equal((await sql`select 2 as x`)[0].x, 2);
});

Deno.test("columns tell their table oid and column number, in results and describe()", async () => {
  await using sql = postgres(url, { max: 1, ...quiet });
  await sql`create temp table compat_cols (a int, b text)`;
  const [{ oid }] = await sql`select 'compat_cols'::regclass::oid as oid`;
  const rows = await sql`select b, a, 1 as c from compat_cols`;
  assert.deepEqual(
    rows.columns!.map(({ name, table, number }) => ({ name, table, number })),
    [
      { name: "b", table: oid, number: 2 },
      { name: "a", table: oid, number: 1 },
      { name: "c", table: 0, number: 0 },
    ],
  );
  const d = await sql`select a from compat_cols`.describe();
  assert.equal(d.columns[0].table, oid);
  assert.equal(d.columns[0].number, 1);
});

/** A result's completion details, as a program reads them (no rows). */
function completion(r: Result<unknown>) {
  return {
    count: r.count,
    command: r.command,
    columns: r.columns.map((c) => c.name),
    text: r.statement.text,
    string: r.statement.string,
    pid: r.state.pid > 0,
    status: r.state.status,
  };
}

Deno.test("every result has a count, a command, columns, a statement and a state (postgres.js's types)", async () => {
  await using sql = postgres(url, { max: 1, ...quiet });
  const at = (
    text: string,
    count: number | null,
    command: string | null,
    columns: string[] = [],
  ) => ({
    count,
    command,
    columns,
    text,
    string: text,
    pid: true,
    status: "I",
  });
  const select = "select x from generate_series(1, 3) as x";
  assert.deepEqual(completion(await sql.unsafe(select, [])), at(select, 3, "SELECT", ["x"]));
  // A tag without a count (CREATE TABLE, SET, ...): count null, as postgres.js leaves it.
  const create = "create temp table compat_done (a int)";
  assert.deepEqual(completion(await sql.unsafe(create, [])), at(create, null, "CREATE TABLE"));
  const set = "set application_name = 'compat'";
  assert.deepEqual(completion(await sql.unsafe(set)), at(set, null, "SET")); // simple protocol
  const insert = "insert into compat_done values (1), (2)";
  assert.deepEqual(completion(await sql.unsafe(insert, [])), at(insert, 2, "INSERT"));
  // An empty query: command and count null, as postgres.js leaves both.
  assert.deepEqual(completion(await sql``), at("", null, null));
  // Several statements: one complete result each, each with the connection's state.
  const results = await sql.unsafe(
    "select 1 as a; delete from compat_done; show DateStyle",
  ) as unknown as Result<unknown>[];
  assert.deepEqual(results.map((r) => [r.count, r.command, r.columns.map((c) => c.name)]), [
    [1, "SELECT", ["a"]],
    [2, "DELETE", []],
    [null, "SHOW", ["DateStyle"]], // SHOW's tag carries no count
  ]);
  assert.ok(results.every((r) => r.state.pid > 0 && r.statement.text.startsWith("select 1")));
  // A COPY's result: its count and its text as the statement.
  const copy = sql`copy (select 1 union all select 2) to stdout`;
  for await (const _ of await copy.readable()) { /* drain */ }
  assert.deepEqual(
    completion(await copy),
    at("copy (select 1 union all select 2) to stdout", 2, "COPY"),
  );
  // forEach, values(), and a transaction's state.
  const each = await sql`select 1 as x`.forEach(() => {});
  assert.deepEqual([each.count, each.command, each.columns.length], [1, "SELECT", 1]);
  assert.equal((await sql`select 1 as x`.values()).count, 1);
  const status = await sql.begin(async (tx) => (await tx`select 1`).state.status);
  assert.equal(status, "T");
  // A Result made by hand has the same shape, with nothing in it (no tag: no count, no command).
  const made = new Result();
  assert.deepEqual(
    [made.count, made.command, made.columns, made.statement.text, made.state.pid],
    [null, null, [], "", 0],
  );
});

serverTest(
  POSTGRES_JS_REFERENCE,
  "a result's keys are its rows: count, command, columns, statement and state are not enumerable",
  async () => {
    const program = async (sql: any) => {
      const result: any = await sql`select 1 as a union all select 2`;
      const seen = {
        keys: Object.keys(result),
        spread: { ...result },
        details: [result.count, result.command, "state" in result, "statement" in result],
      };
      // What tests written for postgres.js assert (loosely: a Result is not an Array's prototype).
      legacyAssert.deepEqual(result, [{ a: 1 }, { a: 2 }]);
      return seen;
    };
    await using sql = postgres(url, { max: 1, ...quiet });
    const mine = await program(sql);
    assert.deepEqual(mine.keys, ["0", "1"]);
    const ref = postgresJs(url, { max: 1, ...quiet });
    try {
      assert.deepEqual(mine, await program(ref));
    } finally {
      await ref.end();
    }
  },
);

Deno.test("postgres.js's spellings: END, describe().name, statement.string, numeric connection settings", async () => {
  await using sql = postgres(url, {
    max: 1,
    ...quiet,
    connection: { statement_timeout: 1234, jit: false },
    // Accepted and ignored, as the README says.
    keep_alive: 60,
    backoff: () => 100,
    onclose: () => {},
  });
  assert.equal(sql.END, sql.CLOSE);
  const described = await sql`select ${1}::int as n`.describe();
  assert.deepEqual([described.name, described.string, described.types], [
    "",
    "select $1::int as n",
    [23],
  ]);
  const [{ statement_timeout, jit }] =
    await sql`select current_setting('statement_timeout') as statement_timeout,
    current_setting('jit') as jit`;
  assert.deepEqual([statement_timeout, jit], ["1234ms", "off"]);
});

Deno.test("forEach hands the result as the second argument", async () => {
  await using sql = postgres(url, { max: 1, ...quiet });
  const seen: unknown[] = [];
  const result = await sql`select * from generate_series(1, 2) as x`.forEach((row, res) => {
    seen.push([row.x, typeof res]);
    if (row.x === 2) assert.ok(Array.isArray(res));
  });
  assert.deepEqual(seen, [[1, "object"], [2, "object"]]);
  assert.equal(result.count, 2);
});

Deno.test("notices are objects with postgres.js's field names; the default logs them", async () => {
  const notices: Notice[] = [];
  {
    await using sql = postgres(url, { max: 1, onnotice: (n) => notices.push(n) });
    await sql`do $$ begin raise notice 'hello there'; end $$`;
  } // one client at a time: PGlite has one session (deno task test --pg=pglite)
  assert.equal(notices.length, 1);
  const [n] = notices;
  assert.equal(n.severity, "NOTICE");
  assert.equal(n.severity_local, "NOTICE");
  assert.equal(n.code, "00000");
  assert.equal(n.message, "hello there");
  assert.equal(typeof n.routine, "string");

  const logged: unknown[] = [];
  const original = console.log;
  console.log = (...args: unknown[]) => void logged.push(args);
  try {
    await using plain = postgres(url, { max: 1 });
    await plain`do $$ begin raise notice 'to the log'; end $$`;
  } finally {
    console.log = original;
  }
  assert.equal(logged.length, 1);
  assert.equal((logged[0] as Notice[])[0].message, "to the log");
});

Deno.test("a cached statement that fails with 42804 after a type change is re-prepared", async () => {
  await using sql = postgres(url, { max: 1, ...quiet });
  await sql`create temp table compat_retype (name text)`;
  const insert = () => sql`insert into compat_retype (name) values (${"1"}) returning name`;
  await insert();
  await sql`alter table compat_retype alter column name type int using name::integer`;
  // The cached plan assigns text to int: 42804 (transformAssignedExpr); parsed again, it works.
  assert.equal((await insert())[0].name, 1);
  // A statement that is wrong from the start still reports 42804, also in a transaction.
  const err = await sql.begin((tx) => tx`insert into compat_retype (name) values (${false})`)
    .catch((e) => e);
  assert.equal(err.code, "42804");
});

Deno.test("no_prepare is the deprecated alias of prepare: false", async () => {
  await using sql = postgres(url, { max: 1, no_prepare: true, ...quiet });
  await sql`select 1 as x`;
  await sql`select 1 as x`;
  const [{ n }] = await sql`select count(*)::int as n from pg_prepared_statements`;
  assert.equal(n, 0);
});

Deno.test("sql.PostgresError is the class server errors are instances of", async () => {
  await using sql = postgres(url, { max: 1, ...quiet });
  const err = await sql`select 1/0`.catch((e) => e);
  assert.ok(err instanceof sql.PostgresError);
  assert.equal(sql.PostgresError, PostgresError);
});

serverTest(
  NOT_BUILT_IN,
  "tx.prepare(name) inside begin makes a two-phase transaction",
  async () => {
    await using sql = postgres(url, { max: 1, ...quiet });
    await sql`create table if not exists compat_2pc (x int)`;
    await sql`truncate compat_2pc`;
    const name = "compat_2pc_" + crypto.randomUUID().slice(0, 8);
    await sql.begin(async (tx) => {
      await tx`insert into compat_2pc values (1)`;
      await tx.prepare(name);
    });
    const [{ n }] = await sql`select count(*)::int as n from pg_prepared_xacts where gid = ${name}`;
    assert.equal(n, 1);
    assert.equal((await sql`select count(*)::int as n from compat_2pc`)[0].n, 0);
    await sql.unsafe(`commit prepared '${name}'`);
    assert.equal((await sql`select count(*)::int as n from compat_2pc`)[0].n, 1);
    await sql`drop table compat_2pc`;
  },
);

serverTest(
  SERVER_PROCESS,
  "listen: state reports the new connection after a reconnect",
  async () => {
    await using sql = postgres(url, { max: 1, ...quiet });
    const got: string[] = [];
    let listens = 0;
    const handle = await sql.listen("compat_state", (x) => got.push(x), () => listens++);
    const before = handle.state.pid;
    await sql`select pg_terminate_backend(${before})`;
    await until("listening again", () => listens === 2);
    assert.notEqual(handle.state.pid, before);
    await sql.notify("compat_state", "after");
    await until("the notification", () => got.length > 0);
    assert.deepEqual(got, ["after"]);
  },
);

Deno.test("an error's parameters are the values as bound, as postgres.js gives them", async () => {
  await using sql = postgres(url, { max: 1, ...quiet });
  const err = await sql`selec ${1}, ${"a"}, ${null}`.catch((e) => e);
  assert.ok(err instanceof PostgresError);
  assert.deepEqual(err.parameters, [1, "a", null]);
  assert.deepEqual(err.args, [1, "a", null]);
});

Deno.test("a custom serializer for text applies to plain string parameters", async () => {
  const seen: unknown[] = [];
  await using sql = postgres(url, {
    max: 1,
    ...quiet,
    types: {
      text: {
        from: [25],
        to: 25,
        parse: (x: string) => x,
        serialize: (x: unknown) => {
          seen.push(x);
          if (x === "boom") throw new Error("watSerialize");
          return String(x).toUpperCase();
        },
      },
    },
  });
  assert.equal((await sql`select ${"wat"}::text as x`)[0].x, "WAT");
  await assert.rejects(sql`select ${"boom"}`, /watSerialize/);
  assert.deepEqual(seen, ["wat", "boom"]);
  assert.equal((await sql`select 1 as x`)[0].x, 1);
});
