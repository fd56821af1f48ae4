/**
 * Identifiers, helpers, fragments, raw queries, typed parameters, custom
 * types and transforms against a real server.
 */
import assert from "node:assert/strict";
import postgres, { type Options, PostgresError, QueryError, type Sql } from "./harness/postgres.ts";
import { databaseUrl } from "./harness/env.ts";

const url = databaseUrl();

function client(options: Options = {}): Sql {
  return postgres(url, { max: 1, onnotice: () => {}, ...options });
}

/** Asserts that `fn` throws (or rejects with) a QueryError with this code. */
async function rejectsWith(fn: () => unknown, code: string): Promise<void> {
  await assert.rejects(
    async () => await fn(),
    (e: unknown) => {
      assert.ok(e instanceof QueryError, `expected a QueryError, got ${e}`);
      assert.equal(e.code, code, e.message);
      return true;
    },
  );
}

/** The SQL text a query ran as. */
async function textOf(q: PromiseLike<{ statement: { text: string } | null }>): Promise<string> {
  return (await q).statement!.text;
}

// ---------------------------------------------------------------------------
// Identifiers

Deno.test("sql(name) escapes identifiers, splits dotted names and doubles quotes", async () => {
  await using sql = client();
  await sql`create temp table ${sql('we"ird')} (${sql("the id")} int)`;
  await sql`insert into ${sql('we"ird')} values (1)`;
  const rows = await sql`select ${sql("the id")} from ${sql('we"ird')}`;
  assert.deepEqual([...rows], [{ "the id": 1 }]);
  assert.equal(
    await textOf(sql`select ${sql("nspname")} from ${sql("pg_catalog.pg_namespace")} limit 1`),
    'select "nspname" from "pg_catalog"."pg_namespace" limit 1',
  );
  const [{ n }] = await sql<{ n: number }[]>`select count(*)::int as n from ${
    sql("pg_catalog.pg_type")
  }`;
  assert.ok(n > 0);
});

Deno.test("invalid identifiers throw INVALID_IDENTIFIER before anything is sent", async () => {
  await using sql = client();
  await rejectsWith(() => sql(""), "INVALID_IDENTIFIER");
  await rejectsWith(() => sql("a\0b"), "INVALID_IDENTIFIER");
  await rejectsWith(() => sql("a..b"), "INVALID_IDENTIFIER");
  await rejectsWith(() => sql("public."), "INVALID_IDENTIFIER");
  await rejectsWith(() => (sql as unknown as (x: unknown) => unknown)(5), "INVALID_IDENTIFIER");
  await rejectsWith(() => (sql as unknown as (x: unknown) => unknown)(null), "INVALID_IDENTIFIER");
  // A non-string in a column list fails the query that uses it.
  await rejectsWith(() => sql`select ${sql([1, 2])} from pg_type`, "INVALID_IDENTIFIER");
  const [{ ok }] = await sql`select true as ok`;
  assert.equal(ok, true);
});

Deno.test("awaiting an identifier or helper rejects with NOT_TAGGED_CALL", async () => {
  await using sql = client();
  await rejectsWith(() => sql("users"), "NOT_TAGGED_CALL");
  await rejectsWith(() => sql({ a: 1 }), "NOT_TAGGED_CALL");
});

Deno.test("sql(names) and sql(name, ...names) list columns after select", async () => {
  await using sql = client();
  const q = () => sql`select ${sql(["a", "b"])} from (select 1 as a, 2 as b, 3 as c) t`;
  assert.deepEqual([...await q()], [{ a: 1, b: 2 }]);
  assert.equal(await textOf(q()), 'select "a","b" from (select 1 as a, 2 as b, 3 as c) t');
  const rows = await sql`select ${sql("a", "c")} from (select 1 as a, 2 as b, 3 as c) t`;
  assert.deepEqual([...rows], [{ a: 1, c: 3 }]);
  await rejectsWith(() => sql`select ${sql([])} from pg_type`, "INVALID_HELPER");
});

// ---------------------------------------------------------------------------
// Insert, update, select and returning helpers

Deno.test("insert helper: one object, rows, given columns, columns as an array", async () => {
  await using sql = client();
  await sql`create temp table users (name text, age int, note text)`;
  const one = sql`insert into users ${sql({ name: "Ada", age: 36 })} returning name`;
  assert.equal(await textOf(one), 'insert into users ("name","age") values ($1,$2) returning name');
  const rows = [{ name: "Alan", age: 41, junk: "x" }, { name: "Grace", age: 85, junk: "y" }];
  const many = await sql`insert into users ${sql(rows, "name", "age")}`;
  assert.equal(many.count, 2);
  assert.equal(many.statement!.text, 'insert into users ("name","age") values ($1,$2),($3,$4)');
  await sql`insert into users ${sql([{ name: "Edsger", age: 72 }], ["name", "age"])}`;
  const all = await sql`select name, age from users order by age`;
  assert.deepEqual([...all], [
    { name: "Ada", age: 36 },
    { name: "Alan", age: 41 },
    { name: "Edsger", age: 72 },
    { name: "Grace", age: 85 },
  ]);
});

Deno.test("insert helper: a key missing from a later row is an undefined value", async () => {
  {
    await using sql = client();
    await sql`create temp table t (a int, b int)`;
    await rejectsWith(
      () => sql`insert into t ${sql([{ a: 1, b: 2 }, { a: 3 }] as { a: number; b?: number }[])}`,
      "UNDEFINED_VALUE",
    );
    const [{ n }] = await sql`select count(*)::int as n from t`;
    assert.equal(n, 0);
  } // one client at a time: PGlite has one session (deno task test --pg=pglite)
  await using lenient = client({ transform: { undefined: null } });
  await lenient`create temp table t (a int, b int)`;
  await lenient`insert into t ${
    lenient([{ a: 1, b: 2 }, { a: 3 }] as { a: number; b?: number }[])
  }`;
  const rows = await lenient`select a, b from t order by a`;
  assert.deepEqual([...rows], [{ a: 1, b: 2 }, { a: 3, b: null }]);
});

Deno.test("update helper: object with and without a column list", async () => {
  await using sql = client();
  await sql`create temp table users (id int, name text, age int)`;
  await sql`insert into users values (1, 'Ada', 36)`;
  const user = { id: 1, name: "Ada L.", age: 37 };
  const q = sql`update users set ${sql(user, "name", "age")} where id = ${user.id}`;
  assert.equal(await textOf(q), 'update users set "name" = $1, "age" = $2 where id = $3');
  assert.deepEqual([...await sql`select * from users`], [{ id: 1, name: "Ada L.", age: 37 }]);
  await sql`UPDATE users SET ${sql({ age: 38 })} WHERE id = ${1}`;
  assert.deepEqual([...await sql`select age from users`], [{ age: 38 }]);
});

Deno.test("helper values may be fragments and identifiers", async () => {
  await using sql = client();
  await sql`create temp table c (id int, n int, m int)`;
  await sql`insert into c ${sql({ id: 1, n: sql`10 + 1`, m: sql`${5}::int * 2` })}`;
  await sql`update c set ${sql({ n: sql`${sql("n")} + ${1}` })} where id = ${1}`;
  assert.deepEqual([...await sql`select n, m from c`], [{ n: 12, m: 10 }]);
});

Deno.test("select helper with an object, and returning with column names", async () => {
  await using sql = client();
  const q = sql`select ${sql({ a: 1, b: "x" })}`;
  assert.equal(await textOf(q), 'select $1 as "a",$2 as "b"');
  assert.deepEqual([...await sql`select ${sql({ a: 1, b: "x" })}`], [{ a: "1", b: "x" }]);
  await sql`create temp table r (id int, name text)`;
  const rows = await sql`insert into r ${sql({ id: 7, name: "n" })} returning ${
    sql(["id", "name"])
  }`;
  assert.deepEqual([...rows], [{ id: 7, name: "n" }]);
});

// ---------------------------------------------------------------------------
// values and in

Deno.test("values helper: rows of arrays, one row of values, an object", async () => {
  await using sql = client();
  const rows = [[1, "a"], [2, "b"]];
  const q = () => sql`select * from (values ${sql(rows)}) as t (id, name) order by id`;
  assert.equal(
    await textOf(q()),
    "select * from (values ($1,$2),($3,$4)) as t (id, name) order by id",
  );
  assert.deepEqual([...await q()], [{ id: "1", name: "a" }, { id: "2", name: "b" }]);
  const [{ a, b, c }] = await sql`select * from (values ${sql(["a", "b", "c"])}) as x(a, b, c)`;
  assert.deepEqual([a, b, c], ["a", "b", "c"]);
  const [row] = await sql`select * from (values ${sql({ x: 1, y: 2 })}) as v(x, y)`;
  assert.deepEqual(row, { x: "1", y: "2" });
  await rejectsWith(() => sql`select * from (values ${sql([])}) v`, "INVALID_HELPER");
});

Deno.test("in helper: a value list, rows of values, and an empty list that matches nothing", async () => {
  await using sql = client();
  await sql`create temp table n (id int, k int)`;
  await sql`insert into n select i, i % 3 from generate_series(1, 6) i`;
  const q = sql`select id from n where id in ${sql([2, 4, 9])} order by id`;
  assert.equal(await textOf(q), "select id from n where id in ($1,$2,$3) order by id");
  assert.deepEqual([...await sql`select id from n where id IN ${sql([2, 4, 9])} order by id`], [
    { id: 2 },
    { id: 4 },
  ]);
  // An empty list is `(null)`: valid SQL that no row matches (`not in` neither: SQL NULL rules).
  assert.equal((await sql`select id from n where id in ${sql([])}`).length, 0);
  assert.equal((await sql`select id from n where id not in ${sql([])}`).length, 0);
  const pairs = await sql`select id from n where (id, k) in ${
    sql([[1, 1], [2, 0], [3, 0]])
  } order by id`;
  assert.deepEqual([...pairs], [{ id: 1 }, { id: 3 }]);
});

// ---------------------------------------------------------------------------
// Keyword detection

Deno.test("keyword detection ignores case, newlines, comments and quoted text", async () => {
  await using sql = client();
  await sql`create temp table "values" (a int, note text)`;
  // The last keyword outside comments and quotes decides: here insert, not the `values` in them.
  await sql`
    INSERT
      INTO "values" -- then values?
      /* select in values */
      ${sql({ a: 1, note: "x" })}
  `;
  await sql`update "values" set note = 'select' , ${sql({ a: 2 })}`;
  assert.deepEqual([...await sql`select a, note from "values"`], [{ a: 2, note: "select" }]);
  await sql`insert into "values" (note) select * from (values ${sql(["y"])}) v`;
  assert.equal((await sql`select * from "values"`).length, 2);
  // `(` standing apart takes a column list.
  const [{ n }] = await sql`select count(${sql(["note"])})::int as n from "values"`;
  assert.equal(n, 2);
  await sql`insert into "values" (${sql(["a", "note"])}) values (4, 'z')`;
  assert.equal((await sql`select * from "values"`).length, 3);
});

Deno.test("an object helper after no keyword rejects with INVALID_HELPER", async () => {
  await using sql = client();
  await rejectsWith(() => sql`${sql({ a: 1 })}`, "INVALID_HELPER");
  await rejectsWith(() => sql`create temp table x ${sql({ a: 1 })}`, "INVALID_HELPER");
  await rejectsWith(() => sql`insert into x ${sql([])}`, "INVALID_HELPER");
  await rejectsWith(() => sql`insert into x ${sql({})}`, "INVALID_HELPER");
  await rejectsWith(() => sql`update x set ${sql([1, 2])}`, "INVALID_HELPER");
  await rejectsWith(
    () => sql`insert into x ${sql([{ a: 1 }, 5] as { a: number }[])}`,
    "INVALID_HELPER",
  );
  await rejectsWith(
    () => sql`update x set ${sql({ a: sql({ b: 1 }) as unknown as number })}`,
    "INVALID_HELPER",
  );
});

// ---------------------------------------------------------------------------
// Fragments

Deno.test("nested fragments renumber parameters across all levels", async () => {
  await using sql = client();
  const inner = sql`${3}::int`;
  const middle = sql`${2}::int as b, ${inner} as c`;
  const q = () => sql`select ${1}::int as a, ${middle}, ${4}::int as d`;
  assert.equal(await textOf(q()), "select $1::int as a, $2::int as b, $3::int as c, $4::int as d");
  assert.deepEqual([...await q()], [{ a: 1, b: 2, c: 3, d: 4 }]);
});

Deno.test("arrays of fragments are joined; a non-fragment among them is refused", async () => {
  await using sql = client();
  const parts = [sql`select 1 as x`, sql`union all`, sql`select ${2}::int`];
  const q = () => sql`${parts} order by x`;
  assert.equal(await textOf(q()), "select 1 as x union all select $1::int order by x");
  assert.deepEqual([...await q()], [{ x: 1 }, { x: 2 }]);
  const filters = [sql`and x > ${0}`, sql`and x < ${5}`];
  const rows = await sql`select x from generate_series(1, 9) x where true ${filters}`;
  assert.equal(rows.length, 4);
  await rejectsWith(() => sql`select ${[sql`1`, 2]}`, "INVALID_FRAGMENT");
});

Deno.test("one template is right both with and without fragments (text cache)", async () => {
  await using sql = client();
  const pick = (x: unknown) => sql`select ${x} as v`;
  assert.deepEqual([...await pick(sql`'frag'::text`)], [{ v: "frag" }]);
  assert.deepEqual([...await pick("param")], [{ v: "param" }]);
  assert.deepEqual([...await pick(sql`${"nested"}::text`)], [{ v: "nested" }]);
  assert.equal(await textOf(pick(1)), "select $1 as v");
});

Deno.test("helpers and fragments pipeline like any query", async () => {
  await using sql = client();
  const results = await Promise.all(
    Array.from(
      { length: 50 },
      (_, i) =>
        sql`select * from (values ${sql([[i, `r${i}`]])}) t(a, b) where a::int in ${sql([i, -1])}`,
    ),
  );
  results.forEach((r, i) => assert.deepEqual([...r], [{ a: String(i), b: `r${i}` }]));
});

// ---------------------------------------------------------------------------
// unsafe, simple, file

Deno.test("sql.unsafe without args uses the simple protocol: one result per statement", async () => {
  await using sql = client();
  const single = await sql.unsafe("select 1 as a");
  assert.deepEqual([...single], [{ a: 1 }]);
  const multi = await sql.unsafe("select 1::int as a; select 'x' as b, 2::int as c");
  assert.ok(Array.isArray(multi) && multi.length === 2);
  const [first, second] = multi as unknown as { a?: number; b?: string; c?: number }[][];
  assert.deepEqual([...first], [{ a: 1 }]);
  assert.deepEqual([...second], [{ b: "x", c: 2 }]);
  await assert.rejects(
    sql.unsafe("select 1; select 1/0"),
    (e: PostgresError) => e.code === "22012",
  );
  const [{ ok }] = await sql.unsafe("select true as ok");
  assert.equal(ok, true);
});

Deno.test("sql.unsafe with args uses the unnamed statement unless prepare: true", async () => {
  await using sql = client();
  const r = await sql.unsafe("select $1::int + $2::int as n", [1, 2]);
  assert.deepEqual([...r], [{ n: 3 }]);
  assert.equal(r.statement!.name, "");
  const p = await sql.unsafe("select $1::int * 2 as n", [21], { prepare: true });
  assert.deepEqual([...p], [{ n: 42 }]);
  assert.notEqual(p.statement!.name, "");
  // Extended protocol without args when asked: typed results.
  const e = await sql.unsafe("select 1 as a", { simple: false });
  assert.deepEqual([...e], [{ a: 1 }]);
  await assert.rejects(sql.unsafe("select $1::int", []), PostgresError); // no value for $1
});

Deno.test("sql.unsafe nests as raw text, but not with its own parameters", async () => {
  await using sql = client();
  const op = ">";
  const rows = await sql`select x from generate_series(1, 5) x where x ${sql.unsafe(op)} ${3}`;
  assert.deepEqual([...rows], [{ x: 4 }, { x: 5 }]);
  await rejectsWith(() => sql`select ${sql.unsafe("$1::int", [1])}`, "INVALID_FRAGMENT");
  // Any value is converted with String(), as in postgres.js: here to text the server refuses.
  await assert.rejects(async () => await sql.unsafe(5 as unknown as string), { code: "42601" });
});

Deno.test("query.simple() runs several statements; with parameters it is refused", async () => {
  await using sql = client();
  const results =
    await sql`create temp table s (a int); insert into s values (1), (2); select count(*)::int as n from s`
      .simple();
  const list = results as unknown as { command: string; count: number | null }[];
  assert.deepEqual(list.map((r) => r.command), ["CREATE TABLE", "INSERT", "SELECT"]);
  assert.equal(list[1].count, 2);
  await rejectsWith(() => sql`select ${1}`.simple(), "SIMPLE_QUERY_PARAMETERS");
});

Deno.test("sql.file reads the file when the query runs", async () => {
  await using sql = client();
  const dir = await Deno.makeTempDir();
  try {
    const multi = `${dir}/multi.sql`;
    const q = sql.file(multi); // lazy: the file does not exist yet
    await Deno.writeTextFile(multi, "select 1::int as a;\nselect 2::int as b;\n");
    const results = await q as unknown as Record<string, number>[][];
    assert.deepEqual(results.map((r) => [...r]), [[{ a: 1 }], [{ b: 2 }]]);
    await Deno.writeTextFile(`${dir}/args.sql`, "select $1::int + $2::int as n");
    assert.deepEqual([...await sql.file(`${dir}/args.sql`, [2, 3])], [{ n: 5 }]);
    const fileUrl = new URL(`file://${dir}/args.sql`);
    assert.deepEqual([...await sql.file(fileUrl, [4, 5], { prepare: false })], [{ n: 9 }]);
    await assert.rejects(sql.file(`${dir}/missing.sql`), Deno.errors.NotFound);
    await rejectsWith(() => sql`select ${sql.file(multi)}`, "INVALID_FRAGMENT");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("sql.file cancelled while its file is being read is never sent", async () => {
  await using sql = client();
  const dir = await Deno.makeTempDir();
  const table = `file_cancel_${Date.now()}`;
  try {
    await sql.unsafe(`create table ${table} (n int)`);
    const insert = `${dir}/insert.sql`;
    await Deno.writeTextFile(insert, `insert into ${table} values (1)`);
    const cancelled = sql.file(insert);
    const running = cancelled.execute(); // the file is read asynchronously: nothing sent yet
    cancelled.cancel();
    await assert.rejects(running, (e) => e instanceof PostgresError && e.code === "57014");
    const controller = new AbortController();
    const aborted = sql.file(insert).signal(controller.signal).execute();
    controller.abort(new Error("user left"));
    await assert.rejects(aborted, /user left/);
    const early = sql.file(insert).signal(AbortSignal.abort(new Error("never"))).execute();
    await assert.rejects(early, /never/);
    const [{ count }] = await sql.unsafe(`select count(*)::int as count from ${table}`);
    assert.equal(count, 0, "a cancelled sql.file query ran");
    assert.equal((await sql.file(insert)).count, 1); // the client and the file still work
  } finally {
    await sql.unsafe(`drop table if exists ${table}`);
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("sql.file without --allow-read rejects with FILE_PERMISSION", async () => {
  const script = `
    import postgres from ${JSON.stringify(new URL("../mod.ts", import.meta.url).href)};
    const sql = postgres("postgres://nobody@127.0.0.1:1/none", { onnotice: () => {} });
    try {
      await sql.file("/tmp/pgpipe-some-file.sql");
      console.log("resolved");
    } catch (e) {
      console.log(e.name + ":" + e.code);
    }
    await sql.end();
  `;
  const dir = await Deno.makeTempDir();
  try {
    await Deno.writeTextFile(`${dir}/main.ts`, script);
    // No --allow-read: the read is refused before anything connects.
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["run", "--no-prompt", "--no-config", `${dir}/main.ts`],
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert.equal(new TextDecoder().decode(out.stdout).trim(), "QueryError:FILE_PERMISSION");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

// ---------------------------------------------------------------------------
// json, array, typed

Deno.test("sql.json sends jsonb text, even for strings; null is SQL NULL", async () => {
  await using sql = client();
  const [r] = await sql`select ${sql.json({ a: [1, 2] })} as j, pg_typeof(${
    sql.json(1)
  })::text as t, ${sql.json("s")} as s, ${sql.json(null)}::jsonb is null as n`;
  assert.deepEqual(r, { j: { a: [1, 2] }, t: "jsonb", s: "s", n: true });
  await sql`create temp table j (doc json)`;
  await sql`insert into j values (${sql.json({ k: "v" })})`;
  assert.deepEqual([...await sql`select doc from j`], [{ doc: { k: "v" } }]);
});

Deno.test("sql.array types arrays by element or array OID, or infers text[]", async () => {
  await using sql = client();
  const [r] = await sql`select
    ${sql.array([1, 2, 3], 23)} as a, pg_typeof(${sql.array([1], 23)})::text as at,
    pg_typeof(${sql.array([1], 1016)})::text as bt,
    ${sql.array(["x", 'q"uote', null, "a,b"])} as s, pg_typeof(${sql.array(["x"])})::text as st,
    ${sql.array([[1, 2], [3, 4]], 21)} as m,
    pg_typeof(${sql.array([true])})::text as bool`;
  assert.deepEqual(r, {
    a: [1, 2, 3],
    at: "integer[]",
    bt: "bigint[]",
    s: ["x", 'q"uote', null, "a,b"],
    st: "text[]",
    m: [[1, 2], [3, 4]],
    bool: "boolean[]",
  });
  const ids = await sql`select x from generate_series(1, 5) x where x = any(${
    sql.array([2, 4], 23)
  })`;
  assert.deepEqual([...ids], [{ x: 2 }, { x: 4 }]);
  // Untyped numbers make text[], as in postgres.js (so its programs see the same strings).
  const [{ n, nt }] = await sql`select ${sql.array([1, 2, 3])} as n, pg_typeof(${
    sql.array([1])
  })::text as nt`;
  assert.deepEqual(n, ["1", "2", "3"]);
  assert.equal(nt, "text[]");
  await rejectsWith(() => sql.array(5 as unknown as number[]), "INVALID_TYPE");
  await rejectsWith(() => sql.array([1], -3), "INVALID_TYPE");
  await rejectsWith(() => sql`select ${sql.array([1, undefined])}`, "UNDEFINED_VALUE");
});

Deno.test("sql.typed sends a value with a type OID", async () => {
  await using sql = client();
  const [r] = await sql`select pg_typeof(${sql.typed("1 day", 1186)})::text as t, ${
    sql.typed("1 day", 1186)
  } + interval '1 hour' as i, ${sql.typed(5, 25)} || 'x' as s`;
  assert.deepEqual(r, { t: "interval", i: "1 day 01:00:00", s: "5x" });
  const [j] = await sql`select ${[sql.json({ a: 1 }), sql.json("s")]}::jsonb[] as js`;
  assert.deepEqual(j, { js: [{ a: 1 }, "s"] });
  assert.equal(sql.types, sql.typed);
  await rejectsWith(() => sql.typed(1, 1.5), "INVALID_TYPE");
  await rejectsWith(() => sql`select ${sql.typed(undefined, 25)}`, "UNDEFINED_VALUE");
});

// ---------------------------------------------------------------------------
// Custom types

interface Point {
  x: number;
  y: number;
}

const point = {
  to: 600,
  from: [600],
  serialize: (p: Point) => `(${p.x},${p.y})`,
  parse: (text: string): Point => {
    const [x, y] = text.slice(1, -1).split(",").map(Number);
    return { x, y };
  },
};

Deno.test("types option: serialize for sql.typed.<name>, parse for results and their arrays", async () => {
  await using sql = client({ types: { point } });
  const [r] = await sql`select ${sql.typed.point({ x: 1, y: 2 })} as p, pg_typeof(${
    sql.types.point({ x: 0, y: 0 })
  })::text as t, array[point(3, 4), null] as ps`;
  assert.deepEqual(r, { p: { x: 1, y: 2 }, t: "point", ps: [{ x: 3, y: 4 }, null] });
  const [a] = await sql`select ${sql.array([{ x: 5, y: 6 }], 600)} as pa`;
  assert.deepEqual(a, { pa: [{ x: 5, y: 6 }] });
  await sql`create temp table shapes (p point)`;
  await sql`insert into shapes ${sql({ p: sql.typed.point({ x: 7, y: 8 }) })}`;
  assert.deepEqual([...await sql`select p from shapes`], [{ p: { x: 7, y: 8 } }]);
});

Deno.test("types option: a custom serializer applies to values inferred as its type", async () => {
  const date = {
    to: 1184,
    from: [],
    serialize: (d: Date) => d.toISOString().slice(0, 10) + " 12:00Z",
  };
  await using sql = client({ types: { date } });
  const [{ t }] = await sql`select ${new Date(
    "2020-05-06T01:02:03Z",
  )}::timestamptz = '2020-05-06 12:00Z' as t`;
  assert.equal(t, true);
});

Deno.test("types: { bigint: postgres.BigInt } returns int8 (and int8[]) as bigint", async () => {
  await using sql = client({ types: { bigint: postgres.BigInt } });
  const [r] = await sql`select 9007199254740993::int8 as n, array[1, null]::int8[] as a, ${
    sql.typed.bigint(5n)
  } as p, ${1234567890123456789n}::numeric as q`;
  assert.deepEqual(r, { n: 9007199254740993n, a: [1n, null], p: 5n, q: "1234567890123456789" });
});

Deno.test("a malformed types option is refused when the client is made", () => {
  assert.throws(
    () => postgres(url, { types: { bad: { to: -1, from: [] } } }),
    (e: QueryError) => e.code === "INVALID_TYPE",
  );
  assert.throws(
    () => postgres(url, { types: { bad: { to: 1, from: [1], parse: 5 as unknown as () => 1 } } }),
    (e: QueryError) => e.code === "INVALID_TYPE",
  );
});

// ---------------------------------------------------------------------------
// Transforms

Deno.test("postgres.camel: results and json keys to camelCase, helper names to snake_case", async () => {
  await using sql = client({ transform: postgres.camel });
  await sql`create temp table camel_case (a_test int, b_test text, doc_json jsonb)`;
  await sql`insert into camel_case ${sql([{ aTest: 1, bTest: "1", docJson: { inner_key: 1 } }])}`;
  const data = await sql`select ${sql("aTest", "bTest")}, doc_json from camel_case`;
  assert.deepEqual([...data], [{ aTest: 1, bTest: "1", docJson: { innerKey: 1 } }]);
  await sql`update camel_case set ${sql({ bTest: "2" })}`;
  const [row] = await sql`select * from ${sql("camel_case")} where ${sql("aTest")} = ${1}`;
  assert.equal(row.bTest, "2");
  const [v] = await sql`select 1 as x_y`.values();
  assert.deepEqual(v, [1]);
});

Deno.test("one-way presets: toCamel shapes results only, fromCamel helper names only", async () => {
  {
    await using to = client({ transform: postgres.toCamel });
    await to`create temp table c (a_test int)`;
    await to`insert into c ${to([{ a_test: 1 }])}`;
    assert.deepEqual([...await to`select a_test from c`], [{ aTest: 1 }]);
  } // one client at a time: PGlite has one session (deno task test --pg=pglite)
  await using from = client({ transform: postgres.fromCamel });
  await from`create temp table c (a_test int)`;
  await from`insert into c ${from([{ aTest: 1 }])}`;
  assert.deepEqual([...await from`select ${from("aTest")} from c`], [{ a_test: 1 }]);
});

Deno.test("pascal and kebab presets and the case functions", async () => {
  assert.equal(postgres.toCamel("user_id_x"), "userIdX");
  assert.equal(postgres.fromCamel("userIdX"), "user_id_x");
  assert.equal(postgres.toPascal("user_id"), "UserId");
  assert.equal(postgres.fromPascal("UserId"), "user_id");
  assert.equal(postgres.toKebab("user_id"), "user-id");
  assert.equal(postgres.fromKebab("user-id"), "user_id");
  assert.equal(postgres.PostgresError, PostgresError);
  {
    await using pascal = client({ transform: postgres.pascal });
    assert.deepEqual([...await pascal`select ${pascal({ UserId: 1 })}`], [{ UserId: "1" }]);
  } // one client at a time: PGlite has one session (deno task test --pg=pglite)
  await using kebab = client({ transform: { ...postgres.kebab, undefined: null } });
  await kebab`create temp table k (user_id int, note text)`;
  await kebab`insert into k ${kebab({ "user-id": 1, note: undefined })}`;
  assert.deepEqual([...await kebab`select * from k`], [{ "user-id": 1, note: null }]);
});

Deno.test("custom column, value and row transforms", async () => {
  {
    await using sql = client({
      transform: {
        column: { from: (c) => c.toUpperCase(), to: (c) => c.toLowerCase() },
        value: (v) => (typeof v === "number" ? v * 10 : v),
        row: (r) => ({ ...r, seen: true }),
      },
    });
    const rows = await sql`select 1 as a, 'x' as b, ${sql("C")} from (select 2 as c) t`;
    assert.deepEqual([...rows], [{ A: 10, B: "x", C: 20, seen: true }]);
  } // one client at a time: PGlite has one session (deno task test --pg=pglite)
  await using fnOnly = client({ transform: { column: (c) => "k_" + c } });
  assert.deepEqual([...await fnOnly`select 1 as a`], [{ k_a: 1 }]);
  assert.throws(
    () => postgres(url, { transform: { column: { from: 5 as unknown as () => string } } }),
    (e: QueryError) => e.code === "INVALID_TRANSFORM",
  );
});

Deno.test("transform.undefined replaces undefined parameters, elements and typed values", async () => {
  await using sql = client({ transform: { undefined: null } });
  const [r] = await sql`select ${undefined}::int as a, ${[1, undefined]}::int[] as b, ${
    sql.typed(undefined, 25)
  } as c`;
  assert.deepEqual(r, { a: null, b: [1, null], c: null });
  await using strict = client();
  await rejectsWith(() => strict`select ${undefined}::int`, "UNDEFINED_VALUE");
});

Deno.test("transactions and reserved connections get the helpers and the client's transforms", async () => {
  await using sql = client({ transform: postgres.camel });
  const rows = await sql.begin(async (tx) => {
    await tx.unsafe("create temp table t (user_id int, full_name text) on commit drop");
    await tx`insert into t ${tx([{ userId: 1, fullName: "Ada" }])}`;
    return await tx`select * from t where ${tx("userId")} in ${tx([1, 2])}`;
  });
  assert.deepEqual([...rows], [{ userId: 1, fullName: "Ada" }]);
  await using reserved = await sql.reserve();
  const [r] = await reserved`select ${reserved.json({ a_b: 1 })} as the_doc, ${
    reserved.typed("7", 23)
  } as n`;
  assert.deepEqual(r, { theDoc: { aB: 1 }, n: 7 });
});

Deno.test("transform presets rename keys inside json columns only", async () => {
  await using sql = postgres(databaseUrl(), {
    max: 1,
    transform: postgres.camel,
    onnotice: () => {},
  });
  const [row] = await sql`
    select '{"first_name": {"last_seen": 1}}'::jsonb as user_data,
      now() as created_at, '\\x0102'::bytea as raw_bytes, 'a_b' as plain_text`;
  assert.deepEqual(row.userData, { firstName: { lastSeen: 1 } });
  assert.ok(row.createdAt instanceof Date);
  assert.deepEqual([...(row.rawBytes as Uint8Array)], [1, 2]);
  assert.ok(row.rawBytes instanceof Uint8Array);
  assert.equal(row.plainText, "a_b");
});
