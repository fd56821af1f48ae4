// deno-lint-ignore-file no-import-prefix -- npm packages are test-only imports, pinned here
/**
 * `sql.options.parsers` and `sql.options.serializers`: postgres.js's live tables of handlers by
 * type OID, which ORMs (Drizzle's postgres-js driver) change after the client is made. A change
 * applies to every later query: on connections opened before and after it, to statements
 * already prepared, in transactions, on reserved connections, in cursors and bulk reads.
 */
import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import postgresJs from "npm:postgres@3.4.9";
import postgres from "./harness/postgres.ts";
import { databaseUrl } from "./harness/env.ts";
import { POSTGRES_JS_REFERENCE, serverTest, SEVERAL_SESSIONS } from "./harness/pglite_mode.ts";
import { quiet } from "./harness/connect.ts";

const url = databaseUrl();
const identity = (text: string) => text;
const TS = "select '2024-01-02 03:04:05.123456+00'::timestamptz as t, 7::int4 as n";

/** The statement's result formats (1: binary), as the client bound them last. */
function formats(result: unknown): number[] {
  return (result as { statement: { formats: number[] } }).statement.formats;
}

/** Runs `fn` with a postgres.js client of the same server (nothing connects until a query). */
async function withPostgresJs<T>(
  options: postgresJs.Options<Record<string, postgresJs.PostgresType>>,
  fn: (sql: postgresJs.Sql) => T | Promise<T>,
): Promise<T> {
  const sql = postgresJs(url, { ...quiet, ...options });
  try {
    return await fn(sql);
  } finally {
    await sql.end();
  }
}

Deno.test("parsers and serializers hold postgres.js's default OIDs, and parse as its own do", async () => {
  await using sql = postgres(url, quiet);
  await withPostgresJs({}, (ref) => {
    for (const oid of Object.keys(ref.options.parsers)) {
      assert.equal(typeof sql.options.parsers[Number(oid)], "function", `parsers[${oid}]`);
    }
    for (const oid of Object.keys(ref.options.serializers)) {
      assert.equal(typeof sql.options.serializers[Number(oid)], "function", `serializers[${oid}]`);
    }
    const samples: [number, string][] = [
      [16, "t"],
      [17, "\\x00ff41"],
      [21, "-3"],
      [23, "42"],
      [26, "4294967295"],
      [700, "1.5"],
      [701, "-Infinity"],
      [114, '{"a":[1,null]}'],
      [3802, '"text"'],
      [1082, "2024-02-29"],
      [1184, "2024-01-02 03:04:05.123+00"],
    ];
    for (const [oid, text] of samples) {
      assert.deepStrictEqual(
        sql.options.parsers[oid](text),
        ref.options.parsers[oid](text),
        `parsers[${oid}](${text})`,
      );
    }
  });
  assert.deepEqual(sql.options.parsers[1007]("{1,NULL,3}"), [1, null, 3]);
  assert.equal(sql.options.serializers[114]("text"), '"text"');
  assert.equal(sql.options.serializers[1184](new Date(0)), "1970-01-01T00:00:00.000Z");
  assert.deepEqual(sql.options.types, {});
  const point = { to: 600, from: [600], parse: (t: string) => t.length };
  await using typed = postgres(url, { ...quiet, types: { point } });
  assert.equal(typed.options.types.point, point);
  assert.equal(typed.options.parsers[600], point.parse);
});

serverTest(
  SEVERAL_SESSIONS,
  "a parser set after postgres() applies to cached statements and new connections",
  async () => {
    await using sql = postgres(url, { ...quiet, max: 3 });
    const before = await sql.unsafe(TS, [], { prepare: true, simple: false });
    const again = await sql.unsafe(TS, [], { prepare: true, simple: false }); // binary now
    assert.deepEqual(formats(again), [1, 1]);
    assert.ok(before[0].t instanceof Date && again[0].t instanceof Date);

    const original = sql.options.parsers[1184];
    sql.options.parsers[1184] = identity;
    // The cached statement: described again from its known columns, the timestamp now in text.
    const after = await sql.unsafe(TS, [], { prepare: true, simple: false });
    assert.deepEqual(after[0], { t: "2024-01-02 03:04:05.123456+00", n: 7 });
    assert.deepEqual(formats(after), [0, 1], "only the column with a program's parser is text");
    // The connection from before and two opened since, each applying the parser.
    const reserved = await Promise.all([sql.reserve(), sql.reserve(), sql.reserve()]);
    try {
      const rows = await Promise.all(reserved.map((r) => r`${sql.unsafe(TS)}, pg_backend_pid()`));
      for (const [row] of rows) assert.equal(row.t, "2024-01-02 03:04:05.123456+00");
      assert.equal(new Set(rows.map(([r]) => r.pg_backend_pid)).size, 3, "three connections");
    } finally {
      for (const r of reserved) r.release();
    }

    sql.options.parsers[1184] = original; // pgpipe's own again: Dates, binary
    const restored = await sql.unsafe(TS, [], { prepare: true, simple: false });
    assert.ok(restored[0].t instanceof Date);
    assert.deepEqual(formats(restored), [1, 1]);
  },
);

serverTest(
  SEVERAL_SESSIONS,
  "parsers apply in transactions, on reserved connections, to cursors and copyTo",
  async () => {
    await using sql = postgres(url, { ...quiet, max: 2 });
    await sql.begin(async (tx) => {
      const [a] = await tx`select 5::int4 as n`;
      assert.equal(a.n, 5);
      sql.options.parsers[23] = (text: string) => `int:${text}`;
      const [b] = await tx`select 5::int4 as n`;
      assert.equal(b.n, "int:5");
    });
    await using reserved = await sql.reserve();
    assert.equal((await reserved`select 6::int4 as n`)[0].n, "int:6");
    delete sql.options.parsers[23];
    assert.equal((await reserved`select 6::int4 as n`)[0].n, "6", "deleted: the server's text");
    sql.options.parsers[16] = (text: string) => text === "t" ? "yes" : "no";
    const seen: unknown[] = [];
    await sql`select g % 2 = 0 as even from generate_series(1, 3) g`.cursor(2, (rows) => {
      seen.push(...rows.map((r) => r.even));
    });
    assert.deepEqual(seen, ["no", "yes", "no"]);
    const each: unknown[] = [];
    await sql`select true as b`.forEach((row) => each.push(row.b));
    assert.deepEqual(each, ["yes"]);
    sql.options.parsers[1184] = identity;
    const copied: unknown[] = [];
    for await (
      const batch of sql.copyTo(sql`select '2024-01-02 03:04:05.123456+00'::timestamptz t`)
    ) {
      copied.push(...batch.map((r) => r.t));
    }
    assert.deepEqual(copied, ["2024-01-02 03:04:05.123456+00"]);
  },
);

serverTest(
  POSTGRES_JS_REFERENCE,
  "array parsers follow their element; postgres.js's array flag",
  async () => {
    await using sql = postgres(url, { ...quiet, max: 1 });
    sql.options.parsers[23] = (text: string) => Number(text) * 10;
    const [{ a, m }] =
      await sql`select array[1, null, 3]::int4[] as a, array[[1],[2]]::int4[] as m`;
    assert.deepEqual(a, [10, null, 30]);
    assert.deepEqual(m, [[10], [20]]);
    const own = Object.assign((text: string) => text, { array: true });
    sql.options.parsers[1009] = own; // postgres.js hands an `array` parser the text after its "{"
    const [{ t }] = await sql`select array['a', 'b']::text[] as t`;
    assert.equal(t, "a,b}");
    await withPostgresJs({}, async (ref) => {
      await ref`select 1`; // its fetch_types would replace an array parser set before it ran
      ref.options.parsers[1009] = own;
      const [{ t: reference }] = await ref`select array['a', 'b']::text[] as t`;
      assert.equal(t, reference);
    });
  },
);

serverTest(
  SEVERAL_SESSIONS,
  "fetch_types adds the arrays of user-defined types to the table",
  async () => {
    await using admin = postgres(url, { ...quiet, max: 1 });
    await admin`drop type if exists pgpipe_handler_mood cascade`;
    await admin`create type pgpipe_handler_mood as enum ('sad', 'ok')`;
    try {
      await using sql = postgres(url, { ...quiet, max: 1 });
      const q = () => sql`select array['ok', 'sad']::pgpipe_handler_mood[] as moods`;
      // The connection's first query: sent ahead of the catalog query, it waits for its types.
      assert.deepEqual((await q())[0].moods, ["ok", "sad"]);
      const [{ oid, typarray }] = await sql`select oid::int4, typarray::int4 from pg_type
      where typname = 'pgpipe_handler_mood'`;
      assert.equal(typeof sql.options.parsers[typarray], "function");
      sql.options.parsers[oid] = (text: string) => text.toUpperCase();
      assert.deepEqual((await q())[0].moods, ["OK", "SAD"], "the array follows its element");
      assert.deepEqual(sql.options.parsers[typarray]("{ok}"), ["OK"]);
      sql.options.parsers[typarray] = identity;
      assert.equal((await q())[0].moods, "{ok,sad}");
    } finally {
      await admin`drop type pgpipe_handler_mood`;
    }
  },
);

serverTest(
  SEVERAL_SESSIONS,
  "fetch_types runs on each new connection: a type created later is known to it",
  async () => {
    await using admin = postgres(url, { ...quiet, max: 1 });
    await admin`drop type if exists pgpipe_later cascade`;
    try {
      await using sql = postgres(url, { ...quiet, max: 2, idle_timeout: 0 });
      await using first = await sql.reserve(); // opened before the type exists
      await admin`create type pgpipe_later as enum ('x', 'y')`;
      const [{ v }] = await sql`select array['x', 'y']::pgpipe_later[] as v`; // a new connection
      assert.deepEqual(v, ["x", "y"]);
      const [{ v: also }] = await first`select array['y']::pgpipe_later[] as v`;
      assert.deepEqual(also, ["y"], "what one connection found serves every connection");
    } finally {
      await admin`drop type if exists pgpipe_later`;
    }
  },
);

serverTest(
  POSTGRES_JS_REFERENCE,
  "serializers set after postgres() apply to values of their type, as in postgres.js",
  async () => {
    // deno-lint-ignore no-explicit-any
    const program = async (sql: any) => {
      const date = new Date("2024-01-02T03:04:05.678Z");
      sql.options.serializers[1184] = (d: Date) => d.toISOString().slice(0, 10);
      const [a] = await sql`select ${date}::timestamptz::text as t`;
      delete sql.options.serializers[17]; // postgres.js then sends `'' + value`
      const [b] = await sql`select ${new Uint8Array([1, 2])}::bytea as b`;
      return [a.t, b.b];
    };
    await using sql = postgres(url, { ...quiet, max: 1 });
    const mine = await program(sql);
    const theirs = await withPostgresJs({}, (ref) => program(ref));
    assert.deepStrictEqual(mine, theirs);
    assert.deepStrictEqual(mine[1], Buffer.from("1,2"));
    sql.options.serializers[25] = (s: string) => s.toUpperCase(); // a plain string is text
    assert.equal((await sql`select ${"abc"} as s`)[0].s, "ABC");
  },
);

Deno.test("assigning a table replaces its contents; bad entries are refused and change nothing", async () => {
  await using sql = postgres(url, { ...quiet, max: 1 });
  assert.throws(() => (sql.options.parsers as any)[23] = 5, TypeError);
  assert.throws(() => (sql.options.parsers as any).foo = identity, TypeError);
  assert.throws(() => (sql.options.serializers as any)[-1] = identity, TypeError);
  assert.throws(() => (sql.options as any).parsers = null, TypeError);
  assert.throws(() => (sql.options as any).parsers = { 16: identity, x: identity }, TypeError);
  const [row] = await sql`select 3::int4 as n, true as b`;
  assert.deepEqual(row, { n: 3, b: true }, "nothing changed");
  // A query behind the connection's fetch_types catalog query (the first one went ahead of it):
  // once it is answered, the types it found are in the table, and the assignment replaces them.
  await sql`select 1`;

  (sql.options as any).parsers = { 23: (text: string) => Number(text) * 2 };
  const [after] = await sql`select 3::int4 as n, true as b`;
  assert.deepEqual(after, { n: 6, b: "t" }, "an OID left out of the new table is text");
  assert.deepEqual(Object.keys(sql.options.parsers), ["23"]);
  const { parsers } = sql.options;
  parsers[16] = (text: string) => text === "t";
  assert.equal((await sql`select true as b`)[0].b, true, "the table object stays the same");
});

serverTest(
  POSTGRES_JS_REFERENCE,
  "a Drizzle-style table: text for the changed date types, the rest unchanged",
  async () => {
    const utc = { connection: { TimeZone: "UTC" } };
    await using sql = postgres(url, { ...quiet, ...utc, max: 1 });
    for (const oid of [1184, 1082, 1083, 1114, 1182, 1185, 1115, 1231]) {
      sql.options.parsers[oid] = identity;
      sql.options.serializers[oid] = identity;
    }
    sql.options.serializers[114] = identity;
    sql.options.serializers[3802] = identity;
    const q = () =>
      sql.unsafe(
        `select '2024-01-02 03:04:05.123456+05:30'::timestamptz as tz,
        '2024-01-02 03:04:05.123456'::timestamp as ts, '2024-01-02'::date as d,
        array['2024-01-02'::date] as ds, array[1.50]::numeric[] as ns, 1::int4 as i,
        '{"a":1}'::jsonb as j, '\\x01'::bytea as b, $1::jsonb as p`,
        ['{"sent":"as is"}'],
        { prepare: true },
      );
    await q();
    const [row] = await q();
    assert.deepStrictEqual({ ...row }, {
      tz: "2024-01-01 21:34:05.123456+00",
      ts: "2024-01-02 03:04:05.123456",
      d: "2024-01-02",
      ds: "{2024-01-02}",
      ns: "{1.50}",
      i: 1,
      j: { a: 1 },
      b: Buffer.from([1]),
      p: { sent: "as is" },
    });
    await withPostgresJs(utc, async (ref) => {
      for (const oid of [1184, 1082, 1083, 1114, 1182, 1185, 1115, 1231]) {
        ref.options.parsers[oid] = identity;
        ref.options.serializers[oid] = identity;
      }
      ref.options.serializers[114] = identity;
      ref.options.serializers[3802] = identity;
      const [theirs] = await ref.unsafe(
        `select '2024-01-02 03:04:05.123456+05:30'::timestamptz as tz,
        '2024-01-02 03:04:05.123456'::timestamp as ts, '2024-01-02'::date as d,
        array['2024-01-02'::date] as ds, array[1.50]::numeric[] as ns, 1::int4 as i,
        '{"a":1}'::jsonb as j, '\\x01'::bytea as b, $1::jsonb as p`,
        ['{"sent":"as is"}'],
      );
      assert.deepStrictEqual({ ...row }, { ...theirs });
    });
    assert.deepEqual(formats(await q()), [0, 0, 0, 0, 0, 1, 0, 1, 0]);
  },
);

serverTest(
  SEVERAL_SESSIONS,
  "the unnamed statement, described at every run, follows parser changes and each client's transforms",
  async () => {
    await using sql = postgres(url, { ...quiet, max: 1 });
    await using camel = postgres(url, { ...quiet, max: 1, transform: postgres.camel });
    const text = "select 5::int4 as some_number, true as is_true";
    const run = (c: typeof sql) => c.unsafe(text, [], { simple: false }).then((r) => ({ ...r[0] }));
    assert.deepEqual(await run(sql), { some_number: 5, is_true: true });
    assert.deepEqual(
      await run(sql),
      { some_number: 5, is_true: true },
      "the same description again",
    );
    assert.deepEqual(
      await run(camel),
      { someNumber: 5, isTrue: true },
      "the same bytes, its transform",
    );
    sql.options.parsers[23] = (t: string) => `n${t}`;
    assert.deepEqual(await run(sql), { some_number: "n5", is_true: true }, "the parser, at once");
    assert.deepEqual(await run(camel), { someNumber: 5, isTrue: true }, "another client's tables");
    const simple = await sql.unsafe(text); // the simple protocol describes each statement too
    assert.deepEqual({ ...simple[0] }, { some_number: "n5", is_true: true });
  },
);

serverTest(
  POSTGRES_JS_REFERENCE,
  "an entry made with Object.defineProperty counts, enumerable or not, as postgres.js reads it",
  async () => {
    const program = async (sql: any) => {
      // New keys, so not enumerable: postgres.js reads them all the same.
      Object.defineProperty(sql.options.parsers, 1700, { value: (text: string) => `num:${text}` });
      Object.defineProperty(sql.options.serializers, 20, { value: (n: bigint) => `${n * 2n}` });
      return { ...(await sql`select 1.5::numeric as n, ${21n}::int8::text as b`)[0] };
    };
    await using sql = postgres(url, { ...quiet, max: 1 });
    const mine = await program(sql);
    assert.deepEqual(mine, { n: "num:1.5", b: "42" });
    assert.deepEqual(mine, await withPostgresJs({}, program));
  },
);

Deno.test("a handler that throws rejects its own query only: neighbours, the connection and the read loop go on", async () => {
  await using sql = postgres(url, { ...quiet, max: 1 });
  const [{ pid }] = await sql`select pg_backend_pid() as pid`;
  sql.options.parsers[23] = (text: string) => {
    if (text === "2") throw new Error(`parser refused ${text}`);
    return Number(text);
  };
  sql.options.serializers[1184] = () => {
    throw new Error("serializer refused");
  };
  const outcomes = await Promise.allSettled([
    sql`select 1::int4 as n`,
    sql`select 2::int4 as n`, // the parser throws
    sql`select array[1, 2]::int4[] as a`, // for an element
    sql`select ${new Date(0)}::timestamptz as t`, // the serializer throws
    sql.unsafe("select 3::int4 as n; select 2::int4 as m"), // in the second statement
    sql`select g::int4 as n from generate_series(1, 3) g`.cursor(1, () => {}),
    sql`select 3::int4 as n`,
  ]);
  const seen = outcomes.map((o) =>
    o.status === "fulfilled" ? JSON.stringify(o.value) : (o.reason as Error).message
  );
  assert.deepEqual(seen, [
    '[{"n":1}]',
    "parser refused 2",
    "parser refused 2",
    "serializer refused",
    "parser refused 2",
    "parser refused 2",
    '[{"n":3}]',
  ]);
  await assert.rejects(async () => {
    for await (const _ of sql.copyTo(sql`select 2::int4 as n`)) { /* the parser throws */ }
  }, /parser refused 2/);
  await assert.rejects(
    sql.begin((tx) => tx`select 2::int4 as n`),
    /parser refused 2/,
  );
  const [after] = await sql`select pg_backend_pid() as pid, 4::int4 as n`;
  assert.deepEqual({ ...after }, { pid, n: 4 }, "the same connection, still reading");
});

serverTest(
  SEVERAL_SESSIONS,
  "a parser whose array flag throws when fetch_types recompiles the tables: the new connection reads on",
  async () => {
    await using sql = postgres(url, { ...quiet, max: 1 });
    await sql`drop type if exists th_mood cascade`;
    await sql`create type th_mood as enum ('ok')`;
    let reads = 0;
    const parser = Object.defineProperty((text: string) => text, "array", {
      get() {
        if (reads++ > 0) throw new Error("the array flag refused");
        return false;
      },
    });
    sql.options.parsers[25] = parser; // compiled now: the flag's first read
    // The next connection's fetch_types finds th_mood and recompiles inside the read loop.
    const [{ pid }] = await sql`select pg_backend_pid() as pid`;
    await sql`select pg_terminate_backend(${pid})`.catch(() => {});
    const [{ moods }] = await sql`select array['ok']::th_mood[]::text as moods`;
    assert.equal(moods, "{ok}");
    const [{ again }] = await sql`select pg_backend_pid() as again`;
    assert.notEqual(again, pid);
    assert.equal((await sql`select pg_backend_pid() as p`)[0].p, again, "the connection lived on");
    assert.ok(reads > 1, "the recompile read the flag");
    await sql`drop type th_mood cascade`;
  },
);
