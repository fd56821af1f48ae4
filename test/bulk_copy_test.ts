// sql.copyFrom and sql.copyTo against a real server: every supported type loaded through binary
// COPY stores exactly what a plain `insert ${sql(rows)}` stores and reads back as a select does;
// bad input, a throwing source and AbortSignal send CopyFail (table untouched, connection
// usable); transactions, reserved connections, transforms, custom types and the text fallback;
// and a 2,000,000-row streaming load whose memory is measured in a fresh process.
import assert from "node:assert/strict";
import * as net from "node:net";
import postgres, {
  CopyRowError,
  type Options,
  PostgresError,
  QueryError,
  type Sql,
  type TlsPath,
} from "./harness/postgres.ts";
import { databaseUrl, tlsCluster } from "./harness/env.ts";
import { serverVersion } from "./harness/util.ts";
import { until } from "./harness/wait.ts";
import { serverTest, SEVERAL_SESSIONS, WHOLE_ANSWERS } from "./harness/pglite_mode.ts";

const url = databaseUrl();
/** Session zone = this process's zone, so Dates cast on the server mean what JS means by them. */
const zone = Intl.DateTimeFormat().resolvedOptions().timeZone;
const utcProcess = new Date(2024, 0, 1).getTimezoneOffset() === 0 &&
  new Date(2024, 6, 1).getTimezoneOffset() === 0;

/** A single-connection client (temp tables live on it), ended afterwards. */
function client(options: Options = {}): Sql {
  return postgres(url, {
    max: 1,
    onnotice: () => {},
    connection: { TimeZone: zone },
    ...options,
  });
}

/** Every batch of an async iterable, flattened. */
async function collect<T>(batches: AsyncIterable<T[]>): Promise<T[]> {
  const out: T[] = [];
  for await (const batch of batches) out.push(...batch);
  return out;
}

async function count(sql: Sql, table: string): Promise<number> {
  const [{ n }] = await sql`select count(*)::int as n from ${sql(table)}`;
  return n as number;
}

/** The connection still answers, right after whatever happened to it. */
async function usable(sql: Sql): Promise<void> {
  const [{ x }] = await sql`select 42 as x`;
  assert.equal(x, 42);
}

const COLUMNS = `id int4 primary key,
  i2 int2, i4 int4, i8 int8, f4 float4, f8 float8, num numeric, num_s numeric(10,2), b bool,
  t text, vc varchar(20), bp char(5), by bytea, d date, ts timestamp, tstz timestamptz, u uuid,
  j json, jb jsonb, i4a int4[], i8a int8[], ta text[], numa numeric[], ba bool[], f8a float8[],
  tstza timestamptz[], ua uuid[], jba jsonb[], bya bytea[], i4aa int4[][], da date[], i2a int2[],
  f4a float4[], vca varchar[], tsa timestamp[], o oid, nm name`;

const day = (y: number, m: number, d: number) => new Date(Date.UTC(y, m - 1, d));

/** Rows of every type the binary encoders cover: edge values, NULLs, unicode, arrays. */
function typedRows(): Record<string, unknown>[] {
  const full = {
    id: 1,
    i2: -32768,
    i4: 2147483647,
    i8: "9223372036854775807",
    f4: 1.1,
    f8: 0.1 + 0.2,
    num: "123.4500",
    num_s: "1.005",
    b: true,
    t: "päivää ✓ 😀 \t tab\nline \\ backslash",
    vc: "",
    bp: "ab",
    by: new Uint8Array([0, 1, 127, 128, 255]),
    d: day(2024, 2, 29),
    ts: new Date(2024, 1, 29, 12, 34, 56, 789),
    tstz: new Date(Date.UTC(1999, 11, 31, 23, 59, 59, 999)),
    u: "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
    j: { a: [1, "x", null], é: true },
    jb: { nested: { deep: [1.5, false, "s"] }, n: null },
    i4a: [1, null, 3],
    i8a: ["1", "-9223372036854775808"],
    ta: ["a", "", null, 'q"u,o{te}', "NULL"],
    numa: ["1.50", "NaN", "-0.001"],
    ba: [true, false, null],
    f8a: [1.5, -0, Infinity, -Infinity],
    tstza: [new Date(0), null, new Date(Date.UTC(2038, 0, 19, 3, 14, 8))],
    ua: ["00000000-0000-0000-0000-000000000000", null],
    jba: [{ k: 1 }, "[1, 2]", '"str"', 3], // a JSON array element as text: a JS array is a dimension
    bya: [new Uint8Array([1, 2]), null, new Uint8Array(0)],
    i4aa: [[1, 2, 3], [4, 5, 6]],
    da: [day(2000, 1, 1), day(1970, 1, 1)],
    i2a: [],
    f4a: [0.5, 3.4028234663852886e38],
    vca: ["x y", "z"],
    tsa: [new Date(2000, 0, 1, 0, 0, 0, 1)],
    o: 4294967295,
    nm: "pg_class",
  };
  const nulls = Object.fromEntries(Object.keys(full).map((k) => [k, null]));
  const second = {
    ...full,
    id: 2,
    i2: 32767,
    i4: -2147483648,
    i8: -42,
    f4: -0,
    f8: NaN,
    num: 7,
    num_s: "-99999999.99",
    b: false,
    t: "",
    vc: "varchar",
    bp: "abcde",
    by: new Uint8Array(0),
    d: new Date(8.64e15),
    ts: new Date(-8.64e15),
    tstz: new Date(8.64e15),
    u: "{A0EEBC99-9C0B4EF8-BB6D6BB9-BD380A11}",
    j: { k: [] },
    jb: "[1, 2]",
    i4a: [],
    o: 0,
    nm: "",
  };
  return [full, { ...nulls, id: 3 }, second];
}

Deno.test("copyFrom: every type stores exactly what a plain insert stores, and reads back as a select does", async () => {
  await using sql = client();
  await sql.unsafe(
    `create temp table via_insert (${COLUMNS}); create temp table via_copy (${COLUMNS})`,
  );
  const rows = typedRows();
  await sql`insert into via_insert ${sql(rows)}`;
  assert.equal(await sql.copyFrom("via_copy", rows), 3);
  // The server's own text of each row: every stored bit compared, not just what JS decodes.
  const differing = await sql`
    select i.id, i::text as inserted, c::text as copied
    from via_insert i full join via_copy c using (id)
    where i::text is distinct from c::text`;
  if (utcProcess) assert.deepEqual([...differing], []);
  else {
    // Outside UTC a Date cast to date/timestamp on the server (the plain insert) takes the
    // session zone's day; binary COPY stores the UTC day and the local wall clock (what pgpipe
    // reads back). Everything else must still match.
    for (const r of differing) assert.ok(r.id === 1 || r.id === 2, `row ${r.id} differs`);
  }
  const selected = await sql`select * from via_copy order by id`;
  const rowsById = [rows[0], rows[2], rows[1]].map((r) => r.id);
  assert.deepEqual(selected.map((r) => r.id), [1, 2, 3].filter((id) => rowsById.includes(id)));
  // What was given comes back (in pgpipe's decoded forms).
  const first = selected[0];
  assert.equal(first.i8, "9223372036854775807");
  assert.equal(first.f4, 1.1);
  assert.equal(first.num, "123.4500");
  assert.equal(first.num_s, "1.01", "numeric(10,2) rounds as numeric_in does");
  assert.equal(first.bp, "ab   ");
  assert.deepEqual(first.ts, new Date(2024, 1, 29, 12, 34, 56, 789));
  assert.deepEqual(first.d, day(2024, 2, 29));
  assert.deepEqual(first.jba, [{ k: 1 }, [1, 2], "str", 3]);
  assert.deepEqual(first.i4aa, [[1, 2, 3], [4, 5, 6]]);
  assert.deepEqual(first.f4a, [0.5, 3.4028235e38]);
  assert.deepEqual(selected[1].d, new Date(8.64e15), "infinity");
  assert.deepEqual(selected[1].ts, new Date(-8.64e15), "-infinity");
  assert.ok(Number.isNaN(selected[1].f8));
  assert.deepEqual(selected[1].i4a, []);
  assert.ok(Object.values(selected[2]).every((v, i) => i === 0 || v === null));

  // copyTo reads the same rows a select gives, as objects and as arrays, whatever the batch.
  const copied = await collect(sql.copyTo(sql`select * from via_copy order by id`, { batch: 2 }));
  assert.deepEqual(copied, [...selected]);
  const byTable = (await collect(sql.copyTo("via_copy"))).sort((a, b) => a.id - b.id);
  assert.deepEqual(byTable, [...selected]);
  const values = await collect(
    sql.copyTo("via_copy", { values: true, columns: ["id", "jb", "u"] }),
  );
  const expected = await sql`select id, jb, u from via_copy`.values();
  assert.deepEqual(
    values.sort((a, b) => (a[0] as number) - (b[0] as number)),
    [...expected].sort((a, b) => (a[0] as number) - (b[0] as number)),
  );
});

Deno.test("copyFrom/copyTo: NULL in every column position, alone and as the only value missing", async () => {
  await using sql = client();
  await sql.unsafe(
    `create temp table nulls_insert (${COLUMNS}); create temp table nulls_copy (${COLUMNS})`,
  );
  const full = typedRows()[0];
  const keys = Object.keys(full).filter((k) => k !== "id");
  const rows: Record<string, unknown>[] = [];
  keys.forEach((k, i) => {
    rows.push({ ...full, id: 2 * i + 10, [k]: null }); // only this one NULL
    rows.push({ ...Object.fromEntries(keys.map((c) => [c, null])), id: 2 * i + 11, [k]: full[k] });
  });
  await sql`insert into nulls_insert ${sql(rows)}`;
  assert.equal(await sql.copyFrom("nulls_copy", rows), rows.length);
  // Outside UTC a Date cast on the server (the insert) takes the session zone's day and clock;
  // binary COPY stores the UTC day and the local wall clock. Those columns are left out there.
  const zoned = ["d", "ts", "da", "tsa"];
  const compared = utcProcess ? keys : keys.filter((k) => !zoned.includes(k));
  const list = (alias: string) => compared.map((k) => `${alias}.${k}`).join(", ");
  const differing = await sql.unsafe(`select i.id from nulls_insert i full join nulls_copy c
    using (id) where row(${list("i")})::text is distinct from row(${list("c")})::text`);
  assert.deepEqual([...differing], []);
  const selected = await sql`select * from nulls_copy order by id`;
  assert.deepEqual(await collect(sql.copyTo(sql`select * from nulls_copy order by id`)), [
    ...selected,
  ]);
  const values = await collect(sql.copyTo(sql`select * from nulls_copy order by id`, {
    values: true,
  }));
  assert.deepEqual(values, [...await sql`select * from nulls_copy order by id`.values()]);
  // Each column is NULL exactly where it was given as null.
  for (const row of selected) {
    const i = Math.floor((row.id - 10) / 2);
    const alone = row.id % 2 === 0;
    for (const [j, k] of keys.entries()) {
      assert.equal(row[k] === null, alone ? j === i : j !== i, `row ${row.id} column ${k}`);
    }
  }
});

Deno.test("copyFrom/copyTo: numeric edge cases store and read back as a plain insert and select do", async () => {
  await using sql = client();
  const version = await serverVersion(sql);
  // Infinity is a numeric from PostgreSQL 14, a negative scale from 15.
  const negativeScale = version >= 150000 ? ", ns numeric(5,-2)" : "";
  await sql.unsafe(`create temp table num_insert (id int4, n numeric, na numeric[]${negativeScale});
    create temp table num_copy (like num_insert)`);
  let seed = 3;
  const digits = (n: number) =>
    Array.from({ length: n }, () => (seed = (seed * 1103515245 + 12345) % 2147483648) % 10)
      .join("");
  const long = "7" + digits(999);
  const values: unknown[] = [
    "NaN",
    "nan",
    long,
    `-${long}.${digits(1000)}`,
    `0.${"0".repeat(500)}${digits(500)}1`,
    "-0.000",
    " 12.50 ",
    "1e5",
    "1.5E-7",
    1e-7,
    0.1 + 0.2,
    2 ** 53,
    -(2 ** 53) + 1,
    1e21,
    12345678901234567890123456789n,
    -42n,
    0,
  ];
  if (version >= 140000) values.push("Infinity", "-inf", Infinity, -Infinity);
  const rows = values.map((n, id) => ({
    id,
    n,
    na: [n, null],
    ...(negativeScale ? { ns: id % 3 === 0 ? null : (id * 12345) % 99999 } : {}),
  }));
  // A bigint parameter is sent as int8; its decimal text is the same numeric.
  const text = (n: unknown) => typeof n === "bigint" ? String(n) : n;
  await sql`insert into num_insert ${
    sql(rows.map((r) => ({ ...r, n: text(r.n), na: r.na.map(text) })))
  }`;
  assert.equal(await sql.copyFrom("num_copy", rows), rows.length);
  const differing = await sql`select i.id from num_insert i full join num_copy c using (id)
    where i::text is distinct from c::text`;
  assert.deepEqual([...differing], []);
  const selected = await sql`select * from num_copy order by id`;
  assert.deepEqual(await collect(sql.copyTo(sql`select * from num_copy order by id`)), [
    ...selected,
  ]);
  assert.equal(selected[2].n, long);
  if (negativeScale) {
    assert.equal(selected[1].ns, String(Math.round(12345 / 100) * 100), "rounded to hundreds");
  }
});

Deno.test("copyFrom: a value only the client can see is wrong (a look-alike uuid digit, a numeric out of range, a ragged array) rejects with CopyRowError; nothing stored", async () => {
  await using sql = client();
  await sql`create temp table checked (id int4, u uuid, n numeric, t text[])`;
  const good = { id: 1, u: "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", n: "1.5", t: ["a"] };
  const cases: [Record<string, unknown>, string, RegExp][] = [
    [{ u: "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a1\u00e1" }, "u", /a uuid string/],
    [{ n: "1e131072" }, "n", /numeric's range/],
    [{ n: "12abc" }, "n", /decimal number/],
    [{ t: ["a", ["b"]] }, "t", /rectangular/],
    [{ t: ["a", 5n, {}] }, "t", /array element 2: expected a string/],
  ];
  for (const [bad, column, pattern] of cases) {
    await assert.rejects(
      sql.copyFrom("checked", [good, good, { ...good, ...bad }]),
      (e) =>
        e instanceof CopyRowError && e.row === 2 && e.column === column && pattern.test(e.message),
      column,
    );
  }
  assert.equal(await count(sql, "checked"), 0);
  await usable(sql);
});

Deno.test("copyFrom/copyTo: without code generation (a restrictive embedder) the fallback loops store and read the same rows", async () => {
  await using sql = client();
  await sql.unsafe(`create temp table gen_on (${COLUMNS}); create temp table gen_off (${COLUMNS})`);
  const rows = typedRows();
  await sql.copyFrom("gen_on", rows);
  const selected = [...await sql`select * from gen_on order by id`];
  // The row encoders and decoders are compiled with `new Function`; where that throws, loops
  // over the columns' codecs do the same work.
  const original = globalThis.Function;
  globalThis.Function = function () {
    throw new EvalError("code generation from strings disallowed");
  } as unknown as FunctionConstructor;
  let copied: unknown[];
  try {
    assert.equal(await sql.copyFrom("gen_off", rows), rows.length);
    await assert.rejects(
      sql.copyFrom("gen_off", [{ ...rows[0], i4: "x" }]),
      (e) => e instanceof CopyRowError && e.row === 0 && e.column === "i4",
    );
    copied = await collect(sql.copyTo(sql`select * from gen_on order by id`));
  } finally {
    globalThis.Function = original;
  }
  const differing = await sql`select i.id from gen_on i full join gen_off c using (id)
    where i::text is distinct from c::text`;
  assert.deepEqual([...differing], []);
  assert.deepEqual(copied, selected.map((r) => ({ ...r })));
});

Deno.test("copyFrom: array rows in table order, a column list, ReadableStream and iterable sources", async () => {
  await using sql = client();
  await sql`create temp table pairs (id int8, label text, score float8 default 1.5)`;
  assert.equal(await sql.copyFrom("pairs", [[1, "a", 0.5], [2n, "b", null]]), 2);
  assert.equal(
    await sql.copyFrom(
      "pairs",
      ReadableStream.from([{ id: 3, label: "c" }, { id: 4, label: "d" }]),
    ),
    2,
  );
  function* gen() {
    for (let i = 5; i <= 7; i++) yield ["x" + i, i];
  }
  assert.equal(await sql.copyFrom("pairs", gen(), { columns: ["label", "id"] }), 3);
  assert.equal(await sql.copyFrom("pairs", new Set([[8, "h", 8]])), 1);
  assert.equal(await sql.copyFrom("pairs", [], { columns: ["id"] }), 0, "empty: nothing sent");
  const rows = await sql`select id, label, score from pairs order by id`.values();
  assert.deepEqual([...rows], [
    ["1", "a", 0.5],
    ["2", "b", null],
    ["3", "c", 1.5],
    ["4", "d", 1.5],
    ["5", "x5", 1.5],
    ["6", "x6", 1.5],
    ["7", "x7", 1.5],
    ["8", "h", 8],
  ]);
  // Types given: no catalog lookup, and a schema-qualified name.
  await sql`create temp table given (a int8, b jsonb)`;
  const [{ schema }] = await sql`select nspname as schema from pg_namespace
    where oid = pg_my_temp_schema()`;
  assert.equal(
    await sql.copyFrom(`${schema}.given`, [[1, { x: 1 }]], {
      columns: ["a", "b"],
      types: ["int8", 3802],
    }),
    1,
  );
  // The column's type is known: a JS array for jsonb is a JSON array (a parameter would be sent
  // as a PostgreSQL array literal, as postgres.js does).
  assert.equal(await sql.copyFrom("given", [[2, [1, { y: [] }]]]), 1);
  assert.deepEqual([...await sql`select * from given order by a`], [
    { a: "1", b: { x: 1 } },
    { a: "2", b: [1, { y: [] }] },
  ]);
  await usable(sql);
});

Deno.test("copyFrom: user types: enums, domains, arrays of them, in binary", async () => {
  await using sql = client();
  const suffix = crypto.randomUUID().slice(0, 8);
  const mood = `mood_${suffix}`;
  const pos = `posint_${suffix}`;
  const ints = `intarr_${suffix}`;
  await sql.unsafe(`create type ${mood} as enum ('sad', 'ok', 'happy');
    create domain ${pos} as int4 check (value > 0);
    create domain ${ints} as int4[];
    create temp table ut_insert (id int4, m ${mood}, ma ${mood}[], p ${pos}, pa ${pos}[], ia ${ints});
    create temp table ut_copy (like ut_insert)`);
  try {
    const rows = [
      { id: 1, m: "happy", ma: ["sad", null, "ok"], p: 5, pa: [1, 2], ia: [[1], [2]] },
      { id: 2, m: null, ma: [], p: null, pa: null, ia: [] },
    ];
    await sql`insert into ut_insert ${sql(rows)}`;
    assert.equal(await sql.copyFrom("ut_copy", rows), 2);
    const differing = await sql`select i.id from ut_insert i full join ut_copy c using (id)
      where i::text is distinct from c::text`;
    assert.deepEqual([...differing], []);
    // The domain's check still runs on binary input.
    await assert.rejects(
      sql.copyFrom("ut_copy", [{ id: 3, p: -1 }]),
      (e) => e instanceof PostgresError && e.code === "23514",
    );
    const back = await collect(sql.copyTo(sql`select * from ut_copy order by id`));
    assert.deepEqual(back, [...await sql`select * from ut_copy order by id`]);
  } finally {
    await sql.unsafe(`drop table ut_insert, ut_copy; drop domain ${ints}; drop domain ${pos};
      drop type ${mood}`);
  }
});

Deno.test("copyFrom/copyTo: types without a binary encoder and custom types switch to text COPY", async () => {
  const point = {
    to: 600,
    from: [600],
    serialize: (p: { x: number; y: number }) => `(${p.x},${p.y})`,
    parse: (text: string) => {
      const [x, y] = text.slice(1, -1).split(",").map(Number);
      return { x, y };
    },
  };
  await using sql = client({ types: { point } });
  await sql`create temp table shapes (id int4, p point, span interval, addr inet, tags text[], note text)`;
  const rows = [
    {
      id: 1,
      p: { x: 1, y: -2.5 },
      span: "1 day 02:00:00",
      addr: "10.0.0.1",
      tags: ["a\tb", null],
      note: "x\\y\nz",
    },
    { id: 2, p: null, span: null, addr: null, tags: [], note: null },
  ];
  await sql`create temp table shapes_insert (like shapes)`;
  // A plain insert applies the custom serializer to typed values only.
  const typed = rows.map((r) => ({ ...r, p: r.p === null ? null : sql.typed.point(r.p) }));
  await sql`insert into shapes_insert ${sql(typed)}`;
  assert.equal(await sql.copyFrom("shapes", rows), 2);
  const differing = await sql`select i.id from shapes_insert i full join shapes c using (id)
    where i::text is distinct from c::text`;
  assert.deepEqual([...differing], []);
  const back = await collect(sql.copyTo("shapes"));
  assert.deepEqual(back, [...await sql`select * from shapes`]);
  assert.deepEqual(back[0].p, { x: 1, y: -2.5 }, "the custom parser ran");
  // A bad value the server parses (text format) names the line and column.
  await assert.rejects(
    sql.copyFrom("shapes", [{ id: 3, addr: "not an address" }]),
    (e) => e instanceof PostgresError && e.code === "22P02" && /line 1/.test(e.where ?? ""),
  );
  assert.equal(await count(sql, "shapes"), 2);
});

Deno.test("copyFrom: postgres.BigInt keeps int8 binary, as bigint both ways", async () => {
  await using sql = client({ types: { bigint: postgres.BigInt } });
  await sql`create temp table big (n int8, m int8[])`;
  assert.equal(await sql.copyFrom("big", [[9223372036854775807n, [1n, -2n]], ["-5", null]]), 2);
  const rows = await collect(sql.copyTo("big", { values: true }));
  assert.deepEqual(rows, [[9223372036854775807n, [1n, -2n]], [-5n, null]]);
  assert.deepEqual(rows, [...await sql`select n, m from big`.values()]);
});

Deno.test("copyFrom/copyTo: numeric infinities in binary from PostgreSQL 14; refused by the server, nothing stored, before it", async () => {
  await using sql = client();
  await sql`create temp table infinite (n numeric, a numeric[])`;
  const rows = [["Infinity", ["-Infinity", "1.5"]], [-Infinity, null], ["NaN", []]];
  if (await serverVersion(sql) >= 140000) {
    assert.equal(await sql.copyFrom("infinite", rows), 3);
    const expected = [["Infinity", ["-Infinity", "1.5"]], ["-Infinity", null], ["NaN", []]];
    assert.deepEqual(await collect(sql.copyTo("infinite", { values: true })), expected);
    assert.deepEqual([...await sql`select n, a from infinite`.values()], expected);
  } else {
    // numeric_recv before 14 knows no infinity sign: the server's error, and the COPY is void.
    await assert.rejects(
      sql.copyFrom("infinite", rows),
      (e) => e instanceof PostgresError && e.code === "22P03",
    );
    assert.equal(await count(sql, "infinite"), 0);
    await usable(sql);
  }
});

Deno.test("copyFrom: a value of the wrong kind names its row and column, sends CopyFail, leaves the table untouched", async () => {
  await using sql = client();
  await sql`create temp table strict_t (id int4, name text, n int8)`;
  const isRowError =
    (code: string, row: number, column: string | null, pattern: RegExp) => (e: unknown) =>
      e instanceof CopyRowError && e instanceof QueryError && e.code === code && e.row === row &&
      e.column === column && pattern.test(e.message);

  await assert.rejects(
    sql.copyFrom("strict_t", [[1, "a", 1], [2, "b", 2], ["x", "c", 3]]),
    isRowError(
      "INVALID_VALUE",
      2,
      "id",
      /row 2, column "id" \(int4\): expected an integer .* got "x"/,
    ),
  );
  await assert.rejects(
    sql.copyFrom("strict_t", [[1, "a", 1], [2, "b"]]),
    isRowError("INVALID_ROW", 1, null, /row 1: an array row needs 3 values, this one has 2/),
  );
  await assert.rejects(
    sql.copyFrom("strict_t", [{ id: 1, name: "a", n: 1 }, { id: 2, name: undefined, n: 2 }]),
    isRowError("UNDEFINED_VALUE", 1, "name", /undefined/),
  );
  await assert.rejects(
    sql.copyFrom("strict_t", [{ id: 1, name: "a", n: 1 }, { id: 2, n: 2 }]),
    isRowError("UNDEFINED_VALUE", 1, "name", /undefined/),
    "a key missing from a later row is undefined",
  );
  await assert.rejects(
    sql.copyFrom("strict_t", [[1, "a", 1], 7]),
    isRowError("INVALID_ROW", 1, null, /got number/),
  );
  await assert.rejects(
    sql.copyFrom("strict_t", [[1, "a", 2 ** 70]]),
    isRowError("INVALID_VALUE", 0, "n", /int8's range/),
  );
  // The bad row comes after many chunks have already reached the server: still nothing stored.
  const many: unknown[][] = Array.from({ length: 60_000 }, (_, i) => [i, "row " + i, i]);
  many.push([60_000, { not: "text" }, 1]);
  await assert.rejects(
    sql.copyFrom("strict_t", many),
    isRowError("INVALID_VALUE", 60_000, "name", /expected a string/),
  );
  assert.equal(await count(sql, "strict_t"), 0);
  await usable(sql);
  // Unknown columns are refused before anything is sent.
  await assert.rejects(
    sql.copyFrom("strict_t", [{ id: 1, nope: 2 }]),
    (e) => e instanceof QueryError && e.code === "UNDEFINED_COLUMN" && /"nope"/.test(e.message),
  );
  await assert.rejects(
    sql.copyFrom("no_such_table", [[1]]),
    (e) => e instanceof PostgresError && e.code === "42P01",
  );
  await assert.rejects(
    sql.copyFrom("strict_t", 5 as never),
    (e) => e instanceof QueryError && e.code === "INVALID_ARGUMENTS",
  );
  await assert.rejects(
    sql.copyFrom("strict_t", [[1]], { types: ["int4"] }),
    (e) => e instanceof QueryError && e.code === "INVALID_ARGUMENTS",
  );
  await assert.rejects(
    sql.copyFrom("strict_t", [[1]], { columns: ["id"], types: ["int99"] }),
    (e) => e instanceof QueryError && e.code === "INVALID_TYPE",
  );
  assert.equal(await sql.copyFrom("strict_t", [[1, "ok", "2"]]), 1, "and a good load still works");
});

Deno.test("copyFrom: server-side failures (a duplicate key, a too-long varchar) reject with the server's error; nothing is stored", async () => {
  await using sql = client();
  await sql`create temp table keyed (id int4 primary key, code varchar(2))`;
  await assert.rejects(
    sql.copyFrom("keyed", Array.from({ length: 30_000 }, (_, i) => [i % 20_000, "ab"])),
    (e) => e instanceof PostgresError && e.code === "23505",
  );
  await assert.rejects(
    sql.copyFrom("keyed", [[1, "abc"]]),
    (e) => e instanceof PostgresError && e.code === "22001",
  );
  assert.equal(await count(sql, "keyed"), 0);
  await usable(sql);
});

Deno.test("copyFrom: a throwing source and an AbortSignal cancel the COPY; the table stays untouched", async () => {
  await using sql = client();
  await sql`create temp table streamed (id int4, payload text)`;
  let closed = false;
  async function* endless(failAt = Infinity) {
    try {
      for (let i = 0;; i++) {
        if (i === failAt) throw new Error("source broke");
        yield [i, "x".repeat(100)];
      }
    } finally {
      closed = true;
    }
  }
  await assert.rejects(sql.copyFrom("streamed", endless(50_000)), /source broke/);
  assert.equal(await count(sql, "streamed"), 0);

  // Abort while rows are flowing.
  const controller = new AbortController();
  closed = false;
  let yielded = 0;
  const rows = (async function* () {
    for await (const row of endless()) {
      if (++yielded === 40_000) controller.abort(new Error("user stopped the import"));
      yield row;
    }
  })();
  await assert.rejects(
    sql.copyFrom("streamed", rows, { signal: controller.signal }),
    /user stopped the import/,
  );
  assert.equal(await count(sql, "streamed"), 0);
  await usable(sql);
  await until("the source closed (its finally ran)", () => closed, 5000);

  // Abort while the source itself is stuck: the promise does not wait for it.
  let stuck = 0;
  const stalled = (async function* () {
    for (; stuck < 5_000; stuck++) yield [stuck, "y"];
    await new Promise(() => {}); // never yields again
  })();
  await assert.rejects(
    sql.copyFrom("streamed", stalled, { signal: AbortSignal.timeout(200) }),
    (e) => e instanceof DOMException && e.name === "TimeoutError",
  );
  assert.equal(await count(sql, "streamed"), 0);
  await usable(sql);

  // Aborted before it starts: nothing is sent.
  await assert.rejects(
    sql.copyFrom("streamed", [[1, "z"]], { signal: AbortSignal.abort(new Error("too late")) }),
    /too late/,
  );
  assert.equal(await count(sql, "streamed"), 0);
});

Deno.test("copyFrom: with chunks already sent and one in flight, a bad row still rejects before it is sent, and a lost connection rejects the load; nothing is stored, the pool recovers", async () => {
  await using sql = client();
  await sql`create table if not exists in_flight (id int4, payload text)`;
  await sql`truncate in_flight`;
  const payload = "p".repeat(200); // about 220 bytes a row: a 128 KiB chunk every ~600 rows
  async function* rows(bad: number, onRow?: (i: number) => Promise<void>) {
    for (let i = 0; i < 100_000; i++) {
      await onRow?.(i);
      yield i === bad ? ["not a number", payload] : [i, payload];
    }
  }
  await assert.rejects(
    sql.copyFrom("in_flight", rows(60_000)),
    (e) => e instanceof CopyRowError && e.row === 60_000 && e.column === "id",
  );
  assert.equal(await count(sql, "in_flight"), 0);
  await usable(sql);

  // The backend is terminated while rows are flowing: the load rejects (no hang, no stray
  // rejection of the chunk in flight) and the next query gets a new connection.
  await using admin = client();
  const [{ pid }] = await sql`select pg_backend_pid() as pid`;
  const load = sql.copyFrom(
    "in_flight",
    rows(-1, async (i) => {
      if (i === 30_000) await admin`select pg_terminate_backend(${pid})`;
    }),
  );
  await assert.rejects(load, (e) => e instanceof Error && !(e instanceof CopyRowError));
  await usable(sql);
  assert.equal(await count(sql, "in_flight"), 0);
  await sql`drop table in_flight`;
});

serverTest(
  SEVERAL_SESSIONS,
  "copyFrom/copyTo: in a transaction (rolled back with it), on a reserved connection, and concurrently on a pool",
  async () => {
    await using sql = postgres(url, { max: 4, onnotice: () => {} });
    const table = `bulk_tx_${crypto.randomUUID().slice(0, 8)}`;
    await sql`create table ${sql(table)} (id int4, v text)`;
    try {
      class Rollback extends Error {}
      let seen: unknown[] = [];
      await assert.rejects(
        sql.begin(async (tx) => {
          assert.equal(await tx.copyFrom(table, [[1, "a"], [2, "b"]]), 2);
          seen = await collect(tx.copyTo(table, { values: true }));
          throw new Rollback();
        }),
        Rollback,
      );
      assert.deepEqual(seen, [[1, "a"], [2, "b"]]);
      assert.equal(await count(sql, table), 0, "rolled back with the transaction");

      // A failed COPY inside a transaction fails the transaction, which rolls back.
      await assert.rejects(
        sql.begin(async (tx) => {
          await tx.copyFrom(table, [[1, "a"]]);
          await tx.copyFrom(table, [["two", "b"]]);
        }),
        CopyRowError,
      );
      assert.equal(await count(sql, table), 0);

      {
        await using reserved = await sql.reserve();
        assert.equal(await reserved.copyFrom(table, [{ id: 10, v: "r" }]), 1);
        assert.deepEqual(await collect(reserved.copyTo(table)), [{ id: 10, v: "r" }]);
      }
      const loads = [0, 1, 2].map((k) =>
        sql.copyFrom(table, Array.from({ length: 5000 }, (_, i) => [k * 5000 + i, "p"]))
      );
      assert.deepEqual(await Promise.all(loads), [5000, 5000, 5000]);
      assert.equal(await count(sql, table), 15_001);
    } finally {
      await sql`drop table ${sql(table)}`;
    }
  },
);

Deno.test("copyFrom/copyTo: the client's transform maps names, fills undefined, and shapes rows", async () => {
  await using sql = client({ transform: { ...postgres.camel, undefined: null } });
  await sql`create temp table people (user_id int4, display_name text, born date)`;
  assert.equal(
    await sql.copyFrom("people", [{ userId: 1, displayName: "Ada" }, {
      userId: 2,
      displayName: undefined,
    }]),
    2,
  );
  assert.equal(
    await sql.copyFrom("people", [["Alan", 3]], { columns: ["displayName", "userId"] }),
    1,
  );
  const rows = await collect(sql.copyTo("people", { columns: ["userId", "displayName"] }));
  assert.deepEqual(rows, [
    { userId: 1, displayName: "Ada" },
    { userId: 2, displayName: null },
    { userId: 3, displayName: "Alan" },
  ]);
  assert.deepEqual(rows, [...await sql`select user_id, display_name from people`]);
});

Deno.test("copyTo: batches of the given size; break, the signal and bad arguments leave the connection usable", async () => {
  await using sql = client();
  await sql`create temp table seq as select g as n, md5(g::text) as h from generate_series(1, 2500) g`;
  const sizes: number[] = [];
  let last = 0;
  for await (const rows of sql.copyTo("seq", { batch: 1000 })) {
    sizes.push(rows.length);
    for (const r of rows) assert.equal(r.n, ++last);
  }
  assert.deepEqual(sizes, [1000, 1000, 500]);
  assert.equal(last, 2500);

  // break early on a large read: the COPY is cancelled, the next query runs.
  let read = 0;
  for await (
    const rows of sql.copyTo(sql`select g from generate_series(1, 5000000) g`, { batch: 100 })
  ) {
    read += rows.length;
    if (read >= 300) break;
  }
  assert.equal(read, 300);
  await usable(sql);

  // The same inside a transaction (the rest is read and dropped instead), which carries on.
  const inTx = await sql.begin(async (tx) => {
    for await (const rows of tx.copyTo(sql`select g from generate_series(1, 200000) g`)) {
      assert.equal(rows.length, 1000);
      break;
    }
    const [{ x }] = await tx`select 7 as x`;
    return x;
  });
  assert.equal(inTx, 7);

  const controller = new AbortController();
  await assert.rejects(
    (async () => {
      for await (
        const _ of sql.copyTo(sql`select g from generate_series(1, 5000000) g`, {
          signal: controller.signal,
        })
      ) {
        controller.abort(new Error("enough"));
      }
    })(),
    /enough/,
  );
  await usable(sql);

  // Aborted while the consumer is busy elsewhere (not waiting in next()): the COPY stops at once,
  // so the connection serves the next query before the iterator is touched again.
  const later = new AbortController();
  const it = sql.copyTo(sql`select g from generate_series(1, 5000000) g`, { signal: later.signal })
    [Symbol.asyncIterator]();
  assert.equal((await it.next()).value?.length, 1000);
  later.abort(new Error("consumer left"));
  await usable(sql);
  await assert.rejects(it.next(), /consumer left/);
  assert.deepEqual(await it.next(), { done: true, value: undefined });

  await assert.rejects(
    collect(sql.copyTo(sql`select * from seq where n > ${1}`)),
    (e) => e instanceof QueryError && e.code === "COPY_PARAMETERS",
  );
  await assert.rejects(
    collect(sql.copyTo("seq", { columns: ["nope"] })),
    (e) => e instanceof QueryError && e.code === "UNDEFINED_COLUMN",
  );
  assert.throws(() => sql.copyTo("seq", { batch: 0 }), QueryError);
  assert.throws(() => sql.copyTo(sql`select 1`, { columns: ["a"] }), QueryError);
  await assert.rejects(
    collect(sql.copyTo("no_such_table")),
    (e) => e instanceof PostgresError && e.code === "42P01",
  );
  await usable(sql);
});

// Each way the bytes can come: plain TCP, Deno's native TLS (the CA given), and node:tls (a TLS
// server without a CA: Deno's native check cannot pass, so pgpipe takes node:tls, whose TLS layer
// went on reading the TCP socket beneath while pgpipe had stopped reading), over a socket of its
// own or one the `socket` option returns.
const tls = tlsCluster();
const onTls = tls !== undefined && !Deno.env.get("DATABASE_URL");
const readPaths: { name: string; path: TlsPath | null; options: Options }[] = [
  { name: "plain", path: null, options: { ssl: false } },
  ...(onTls
    ? [
      {
        name: "native TLS",
        path: "native",
        options: { ssl: { mode: "verify-ca", ca: tls.caCert! } },
      },
      { name: "node:tls", path: "node", options: { ssl: "require" } },
      {
        name: "node:tls over the socket option's net.Socket",
        path: "node",
        options: { ssl: "require", socket: () => net.connect({ host: tls.host, port: tls.port }) },
      },
      {
        name: "node:tls over the socket option's Deno.Conn",
        path: "node",
        options: {
          ssl: "require",
          socket: () => Deno.connect({ hostname: tls.host, port: tls.port }),
        },
      },
    ] satisfies typeof readPaths
    : []),
];

for (const { name, path, options } of readPaths) {
  serverTest(
    WHOLE_ANSWERS,
    `copyTo (${name}): a consumer that stops asking stops the read: only the batch it holds is decoded, and the server waits on the client`,
    async () => {
      {
        // A process's first connection to a server takes node:tls: take that turn first, so the
        // native variant runs on native TLS.
        await using first = client(options);
        await first`select 1`;
      }
      let decoded = 0; // values through the client's transform, which runs as each value is decoded
      await using sql = client({
        ...options,
        transform: { value: (v: unknown) => (decoded++, v) },
      });
      await using admin = client();
      const started = await sql`select pg_backend_pid() as pid`;
      assert.equal(started.state!.tls, path);
      const pid = started[0].pid;
      decoded = 0;
      // ~100 MB of COPY data: far more than the socket buffers and what copyTo may read ahead.
      const rows = 200_000;
      const it = sql.copyTo(
        sql.unsafe(`select g, repeat('x', 500) as pad from generate_series(1, ${rows}) g`),
      )[Symbol.asyncIterator]();
      try {
        const first = await it.next();
        assert.equal(first.value?.length, 1000);
        // Wait until the server is blocked writing to us (what a bounded read-ahead leads to) or is
        // done sending (what reading everything ahead would lead to).
        const state = await until("the server blocked writing, or done", async () => {
          const [row] =
            await admin`select state, wait_event from pg_stat_activity where pid = ${pid}`;
          return row.state !== "active" || row.wait_event === "ClientWrite" ? row : null;
        });
        assert.deepEqual({ ...state }, { state: "active", wait_event: "ClientWrite" });
        // Nothing the consumer has not asked for was decoded: the rows read ahead wait as bytes.
        assert.equal(decoded, 2 * 1000);
        let read = 1000;
        let last = 0;
        for (let next = await it.next(); !next.done; next = await it.next()) {
          read += next.value.length;
          assert.ok(decoded <= 2 * read, `${decoded / 2} rows decoded, ${read} handed out`);
          last = (next.value[next.value.length - 1] as { g: number }).g;
        }
        assert.equal(read, rows);
        assert.equal(last, rows);
        assert.equal(decoded, 2 * rows);
      } finally {
        await it.return?.(); // a failed check must not leave the COPY holding the connection
      }
      await usable(sql);
    },
  );
}

serverTest(
  WHOLE_ANSWERS,
  "copyFrom then copyTo: 2,000,000 rows streamed from an async generator in bounded memory (measured in a fresh process)",
  async () => {
    const probe = new URL("./harness/bulk_memory_probe.ts", import.meta.url).pathname;
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", "--no-lock", probe, url, "2000000"],
      stdout: "piped",
      stderr: "piped",
    }).output();
    const stderr = new TextDecoder().decode(out.stderr);
    assert.equal(out.code, 0, stderr);
    const lines = new TextDecoder().decode(out.stdout).trim().split("\n");
    const r = JSON.parse(lines[lines.length - 1]) as {
      loaded: number;
      read: number;
      stored: number;
      loadRss: number[];
      readRss: number[];
      loadPeakRss: number;
      peakRss: number;
    };
    assert.equal(r.loaded, 2_000_000);
    assert.equal(r.stored, 2_000_000);
    assert.equal(r.read, 2_000_000);
    const mib = (b: number) => b / 1048576;
    // Unbounded buffering would hold the whole ~200 MB of COPY data (or 2M decoded rows, more).
    // The load's bound is the target's 150 MiB; reading (over TLS when the test cluster has it,
    // whose node:tls path makes more garbage) gets more room, and must be flat like the load.
    const samples = `load ${r.loadRss.map(mib).map(Math.round)}, read ${
      r.readRss.map(mib).map(Math.round)
    }`;
    assert.ok(mib(r.loadPeakRss) < 150, `load peak RSS ${mib(r.loadPeakRss)} MiB (${samples})`);
    assert.ok(mib(r.peakRss) < 256, `peak RSS ${mib(r.peakRss)} MiB (${samples})`);
    // Flat, not growing with the rows: V8 sizes its heap up early on, then the second half of
    // each phase (another million rows) adds next to nothing. Buffering would add ~100 MB there
    // (the read's million rows are ~100 MB of COPY data, more decoded). One doubling of V8's young
    // generation (+32 MiB at once, 16 to 32 MiB halves) sometimes lands after the midpoint on a
    // loaded machine, so the bound sits above that and well below buffering.
    for (const samples of [r.loadRss, r.readRss]) {
      const half = samples[Math.floor(samples.length / 2)];
      const growth = mib(samples[samples.length - 1] - half);
      assert.ok(
        growth < 40,
        `RSS grew ${growth.toFixed(1)} MiB in the second half: ${samples.map(mib)}`,
      );
    }
  },
);
