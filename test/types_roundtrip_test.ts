// Type round trips against a real server: every built-in type the driver decodes, read from
// server-side literals and sent back as parameters, including NULLs, arrays and edge values.
// Run with `deno task test test/types_roundtrip_test.ts` (the runner starts PostgreSQL).
//
// Semantics these tests pin down:
// - int8 is a string unless `bigint: true`; numeric, uuid and the text types are strings.
// - date decodes to UTC midnight; timestamp (without time zone) decodes its wall clock in the
//   JS process's local zone, whatever the session TimeZone; timestamptz is an exact instant
//   in every session zone. Fractions beyond milliseconds are truncated, not rounded.
// - ±infinity map to new Date(±8.64e15) and back.
// - Date parameters are sent as timestamptz, so casting one to date or timestamp on the server
//   happens in the session TimeZone.
// - JS arrays are always PostgreSQL arrays, never JSON; objects are JSON.
import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import postgres, { type Options, PostgresError, type Query, type Sql } from "./harness/postgres.ts";
import { databaseUrl } from "./harness/env.ts";
import { serverVersion } from "./harness/util.ts";

// ---------------------------------------------------------------------------------------
// helpers

function findUrl(): string | undefined {
  try {
    return databaseUrl();
  } catch {
    return undefined;
  }
}

const url = findUrl();

/** Registers a test that gets a fresh single-connection client, ended afterwards. */
function dbTest(name: string, fn: (sql: Sql) => Promise<void>, options: Options = {}): void {
  Deno.test({
    name: `types roundtrip: ${name}`,
    ignore: url === undefined,
    fn: async () => {
      const sql = postgres(url, { max: 1, ...options });
      try {
        await fn(sql);
      } finally {
        await sql.end();
      }
    },
  });
}

/** The only row of a query, as an array of values. */
async function row(query: Query): Promise<unknown[]> {
  const rows = await query.values();
  assert.equal(rows.length, 1, "expected exactly one row");
  return rows[0];
}

/** The only value of a single-row, single-column query. */
async function one(query: Query): Promise<unknown> {
  const values = await row(query);
  assert.equal(values.length, 1, "expected exactly one column");
  return values[0];
}

/** Milliseconds since the epoch of a UTC wall clock; works for years 0..99 and BC years. */
function utc(y: number, mo = 1, d = 1, h = 0, mi = 0, s = 0, ms = 0): number {
  const date = new Date(0);
  date.setUTCFullYear(y, mo - 1, d);
  date.setUTCHours(h, mi, s, ms);
  return date.getTime();
}

/** A Date from {@link utc}'s arguments. */
function utcDate(y: number, mo = 1, d = 1, h = 0, mi = 0, s = 0, ms = 0): Date {
  return new Date(utc(y, mo, d, h, mi, s, ms));
}

/** Asserts a Date with exactly this time value (works for Invalid Dates, unlike deepEqual). */
function assertTime(actual: unknown, expected: number, message?: string): void {
  assert.ok(actual instanceof Date, `${message ?? "value"}: expected a Date, got ${actual}`);
  assert.ok(
    Object.is(actual.getTime(), expected),
    `${message ?? "value"}: expected time ${expected}, got ${actual.getTime()}`,
  );
}

/** Local wall-clock fields [y, mo, d, h, mi, s, ms] of a Date, month 1-based. */
function localFields(d: Date): number[] {
  return [
    d.getFullYear(),
    d.getMonth() + 1,
    d.getDate(),
    d.getHours(),
    d.getMinutes(),
    d.getSeconds(),
    d.getMilliseconds(),
  ];
}

async function sha256Hex(data: Uint8Array): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", data as BufferSource));
  return Array.from(digest, (b) => b.toString(16).padStart(2, "0")).join("");
}

function randomBytes(n: number): Uint8Array {
  const out = new Uint8Array(n);
  // getRandomValues fills at most 65536 bytes per call.
  for (let i = 0; i < n; i += 65536) crypto.getRandomValues(out.subarray(i, i + 65536));
  return out;
}

const ALL_BYTES = Uint8Array.from({ length: 256 }, (_, i) => i);

/**
 * The expected value with its byte arrays as Buffers: bytea decodes to a
 * Buffer (a Uint8Array subclass), as in postgres.js, and deepEqual compares
 * prototypes.
 */
function buffers<T>(x: T): T {
  if (x instanceof Uint8Array) return (x instanceof Buffer ? x : Buffer.from(x)) as T;
  if (Array.isArray(x)) return x.map(buffers) as T;
  if (x !== null && typeof x === "object" && Object.getPrototypeOf(x) === Object.prototype) {
    return Object.fromEntries(Object.entries(x).map(([k, v]) => [k, buffers(v)])) as T;
  }
  return x;
}

/** Sets a session setting with a bound value (SET itself cannot take parameters). */
async function setConfig(sql: Sql, name: string, value: string): Promise<void> {
  assert.equal(await one(sql`select set_config(${name}, ${value}, false)`), value);
}

/** Asserts that `promise` rejects with a server error of SQLSTATE `code`. */
async function rejectsWith(promise: PromiseLike<unknown>, code: string): Promise<PostgresError> {
  try {
    await promise;
  } catch (e) {
    assert.ok(e instanceof PostgresError, `expected PostgresError ${code}, got ${e}`);
    assert.equal(e.code, code, e.message);
    return e;
  }
  assert.fail(`expected PostgresError ${code}, but the query succeeded`);
}

/** Asserts a client-side parameter error (nothing reaches the server) with this code. */
async function rejectsClientSide(promise: PromiseLike<unknown>, code: string): Promise<void> {
  try {
    await promise;
  } catch (e) {
    assert.ok(!(e instanceof PostgresError), `expected a client-side error, got ${e}`);
    assert.ok(e instanceof TypeError, `expected a TypeError subclass, got ${e}`);
    assert.equal((e as { code?: unknown }).code, code);
    return;
  }
  assert.fail(`expected a client-side ${code} error, but the query succeeded`);
}

// Strings that stress quoting in array literals and the UTF-8 path.
const TRICKY_STRINGS: string[] = [
  "",
  "plain",
  "NULL",
  "null",
  "Null",
  " ",
  " leading and trailing ",
  "a,b",
  "a;b",
  '"',
  '"quoted"',
  "'single'",
  "\\",
  "back\\slash",
  '\\"',
  "{",
  "}",
  "{}",
  "{a,b}",
  "[0:1]={1,2}",
  "=",
  "tab\there",
  "new\nline",
  "cr\r\nlf",
  "\u000b\f",
  "ctrl\u0001\u001f",
  "ünïcødé",
  "日本語テキスト",
  "مرحبا",
  "e\u0301",
  "🐘",
  "👩‍👩‍👧‍👦 family",
  "\u{10FFFF}",
  "\u00a0nbsp\u00a0", // not whitespace to array_in
  "line\u2028separator",
];

// ---------------------------------------------------------------------------------------
// NULL

dbTest("SQL NULL of every type and array type decodes to null", async (sql) => {
  const values = await row(sql`select
    null::bool, null::int2, null::int4, null::int8, null::oid, null::float4, null::float8,
    null::numeric, null::text, null::varchar, null::name, null::bpchar, null::"char",
    null::uuid, null::bytea, null::date, null::timestamp, null::timestamptz, null::json,
    null::jsonb, null::bool[], null::int4[], null::int8[], null::float8[], null::text[],
    null::bytea[], null::date[], null::timestamptz[], null::jsonb[]`);
  assert.equal(values.length, 29);
  assert.deepEqual(values, new Array(29).fill(null));
});

dbTest("null parameters are SQL NULL for every type", async (sql) => {
  const values = await row(sql`select
    ${null}::bool, ${null}::int2, ${null}::int4, ${null}::int8, ${null}::oid,
    ${null}::float4, ${null}::float8, ${null}::numeric, ${null}::text, ${null}::varchar,
    ${null}::name, ${null}::bpchar, ${null}::"char", ${null}::uuid, ${null}::bytea,
    ${null}::date, ${null}::timestamp, ${null}::timestamptz, ${null}::json, ${null}::jsonb,
    ${null}::int4[], ${null}::text[], ${null} as untyped, ${null}::int4 is null as isnull`);
  assert.deepEqual(values, [...new Array(23).fill(null), true]);
});

dbTest("int8 NULL stays null with bigint: true", async (sql) => {
  assert.deepEqual(await row(sql`select null::int8, array[null, 1]::int8[]`), [null, [null, 1n]]);
}, { bigint: true });

// ---------------------------------------------------------------------------------------
// bool and numbers

dbTest("bool both ways", async (sql) => {
  assert.deepEqual(await row(sql`select true, false, 't'::bool, 'off'::bool`), [
    true,
    false,
    true,
    false,
  ]);
  // Booleans are sent typed as bool, so no cast is needed.
  assert.deepEqual(await row(sql`select ${true} as t, ${false} as f`), [true, false]);
  assert.deepEqual(await row(sql`select ${true} and ${false}, ${true} or ${false}`), [
    false,
    true,
  ]);
  // Strings are cast by the server's rules.
  assert.deepEqual(await row(sql`select ${"yes"}::bool, ${"0"}::bool`), [true, false]);
});

dbTest("int2, int4 and oid decode to numbers, bounds included", async (sql) => {
  assert.deepEqual(
    await row(sql`select
      (-32768)::int2, 32767::int2, 0::int2,
      (-2147483648)::int4, 2147483647::int4,
      0::oid, 4294967295::oid`),
    [-32768, 32767, 0, -2147483648, 2147483647, 0, 4294967295],
  );
  // Parameters: numbers and numeric strings.
  assert.deepEqual(
    await row(sql`select ${-32768}::int2, ${32767}::int2, ${-2147483648}::int4,
      ${2147483647}::int4, ${4294967295}::oid, ${"42"}::int4, ${-0}::int4`),
    [-32768, 32767, -2147483648, 2147483647, 4294967295, 42, 0],
  );
  await rejectsWith(sql`select ${32768}::int2`, "22003");
  await rejectsWith(sql`select ${2147483648}::int4`, "22003");
  await rejectsWith(sql`select ${1.5}::int4 as not_an_integer_literal`, "22P02");
  // The connection survived the errors.
  assert.equal(await one(sql`select ${7}::int4 as x`), 7);
});

dbTest("float4 decodes to the shortest decimal of the float32", async (sql) => {
  const values = await row(sql`select 1.1::float4, '3.4028235e38'::float4,
    '-3.4028235e38'::float4, '1.17549435e-38'::float4, '1.4e-45'::float4, '-0'::float4,
    'NaN'::float4, 'Infinity'::float4, '-Infinity'::float4, 16777217::float4`);
  assert.deepEqual(values, [
    1.1,
    3.4028235e38,
    -3.4028235e38,
    1.1754944e-38,
    1e-45,
    -0,
    NaN,
    Infinity,
    -Infinity,
    16777216,
  ]);
  // Sending a float32 value back gives the same float32.
  for (const v of [Math.fround(1.1), Math.fround(Math.PI), Math.fround(1e-40), -0, NaN]) {
    const got = await one(sql`select ${v}::float4 as x`);
    assert.equal(typeof got, "number");
    assert.ok(Object.is(Math.fround(got as number), Math.fround(v)), `float4 ${v} -> ${got}`);
  }
});

dbTest("float8 round trips exactly, including NaN, ±Infinity and -0", async (sql) => {
  const numbers = [
    0,
    -0,
    1,
    -1,
    0.1,
    0.1 + 0.2,
    Math.PI,
    -Math.E,
    1 / 3,
    5e-324,
    -5e-324,
    2.2250738585072014e-308,
    1.7976931348623157e308,
    -1.7976931348623157e308,
    1e21,
    1e-7,
    123456789.12345679,
    Number.MAX_SAFE_INTEGER,
    Number.MIN_SAFE_INTEGER,
    2 ** 53 + 2,
    NaN,
    Infinity,
    -Infinity,
  ];
  const scalars = await Promise.all(numbers.map((n) => one(sql`select ${n}::float8 as x`)));
  for (let i = 0; i < numbers.length; i++) {
    assert.ok(Object.is(scalars[i], numbers[i]), `float8 ${numbers[i]} came back ${scalars[i]}`);
  }
  // Literals written by the server.
  assert.deepEqual(
    await row(sql`select 'NaN'::float8, 'Infinity'::float8, '-Infinity'::float8, '-0'::float8`),
    [NaN, Infinity, -Infinity, -0],
  );
  // The server saw the sign of zero (not just our decoder).
  assert.equal(await one(sql`select ${-0}::float8::text`), "-0");
  // The whole list as one float8[] parameter.
  assert.deepEqual(await one(sql`select ${numbers}::float8[] as a`), numbers);
});

dbTest("int8 decodes to a string by default", async (sql) => {
  assert.deepEqual(
    await row(sql`select 9223372036854775807::int8, (-9223372036854775808)::int8, 0::int8,
      count(*) from generate_series(1, 3)`),
    ["9223372036854775807", "-9223372036854775808", "0", "3"],
  );
  // bigint parameters are typed int8 and need no cast.
  assert.deepEqual(
    await row(sql`select ${9223372036854775807n} as max, ${-9223372036854775808n} as min,
      ${"123456789012345678"}::int8 as s, ${2 ** 53}::int8 as n`),
    ["9223372036854775807", "-9223372036854775808", "123456789012345678", "9007199254740992"],
  );
  await rejectsWith(sql`select ${2n ** 63n} as too_big`, "22003");
  await rejectsWith(sql`select ${-(2n ** 63n) - 1n} as too_small`, "22003");
  assert.deepEqual(
    await one(sql`select ${[1n, null, -9223372036854775808n]} as a`),
    ["1", null, "-9223372036854775808"],
  );
});

dbTest("int8 decodes to BigInt with bigint: true", async (sql) => {
  assert.deepEqual(
    await row(sql`select 9223372036854775807::int8, (-9223372036854775808)::int8, 0::int8,
      count(*) from generate_series(1, 3)`),
    [9223372036854775807n, -9223372036854775808n, 0n, 3n],
  );
  const extremes = [9223372036854775807n, -9223372036854775808n, 0n, -1n, 2n ** 53n + 1n];
  for (const v of extremes) {
    assert.equal(await one(sql`select ${v} as x`), v);
    assert.equal(await one(sql`select ${String(v)}::int8 as x`), v);
  }
  // Other integer types stay numbers.
  assert.deepEqual(await row(sql`select 1::int2, 1::int4, 1::oid`), [1, 1, 1]);
}, { bigint: true });

dbTest("numeric stays an exact string, NaN and infinities included", async (sql) => {
  const big = "123456789012345678901234567890.123456789012345678901234567890";
  if (await serverVersion(sql) >= 140000) {
    assert.deepEqual(
      await row(sql`select 'Infinity'::numeric, '-Infinity'::numeric,
        ${"Infinity"}::numeric, ${-Infinity}::numeric, ${["Infinity", "-1"]}::numeric[]`),
      ["Infinity", "-Infinity", "Infinity", "-Infinity", ["Infinity", "-1"]],
    );
  } else {
    // numeric has no infinities before PostgreSQL 14: the server refuses them, cleanly.
    await rejectsWith(sql`select 'Infinity'::numeric`, "22P02");
    await rejectsWith(sql`select ${Infinity}::numeric`, "22P02");
    assert.equal(await one(sql`select 1::numeric as n`), "1", "the connection stays usable");
  }
  assert.deepEqual(
    await row(sql`select 'NaN'::numeric,
      ${big}::numeric, '-0.000'::numeric, 1e-20::numeric, 0.1::numeric(10, 4),
      (2::numeric ^ 200)::numeric(1000, 0)`),
    [
      "NaN",
      big,
      "0.000",
      "0.00000000000000000001",
      "0.1000",
      "1606938044258990275541962092341162602522202993782792835301376",
    ],
  );
  // Numbers are sent as String(n): exponents are accepted.
  assert.deepEqual(
    await row(sql`select ${0.1}::numeric, ${1e21}::numeric, ${1e-7}::numeric, ${NaN}::numeric,
      ${-12.5}::numeric`),
    ["0.1", "1000000000000000000000", "0.0000001", "NaN", "-12.5"],
  );
  assert.deepEqual(
    await one(sql`select ${[big, null, "NaN", "-1.50"]}::numeric[] as a`),
    [big, null, "NaN", "-1.50"],
  );
});

// ---------------------------------------------------------------------------------------
// strings

dbTest("text and varchar round trip arbitrary strings exactly", async (sql) => {
  const results = await Promise.all(
    TRICKY_STRINGS.map((s) =>
      row(sql`select ${s}::text as t, ${s}::varchar as v, char_length(${s}::text) as n,
        octet_length(${s}::text) as b, ${s}::text = ${s}::varchar as eq`)
    ),
  );
  const encoder = new TextEncoder();
  for (let i = 0; i < TRICKY_STRINGS.length; i++) {
    const s = TRICKY_STRINGS[i];
    // Length in code points and bytes proves the server received the very same string.
    assert.deepEqual(results[i], [s, s, [...s].length, encoder.encode(s).length, true], s);
  }
  // Server-side literals with quotes and backslashes (\\ in the template is one \ in SQL).
  assert.deepEqual(
    await row(sql`select 'it''s', E'back\\\\slash\\nnew', '', U&'\\0441\\043B\\043E\\043D'`),
    ["it's", "back\\slash\nnew", "", "слон"],
  );
});

dbTest("a NUL character is rejected by the server and the connection survives", async (sql) => {
  await rejectsWith(sql`select ${"a\0b"}::text`, "22021");
  assert.equal(await one(sql`select ${"ok"}::text`), "ok");
});

dbTest('varchar(n), name, char(n)/bpchar and "char" keep the server\'s semantics', async (sql) => {
  assert.deepEqual(
    await row(sql`select ${"abcdef"}::varchar(3), ${"ab"}::char(5), ${"ab"}::bpchar,
      'ab  '::bpchar, ${"ab  "}::char(2), ${"é"}::char(3), ${"x"}::"char", ${"xyz"}::"char",
      ''::"char", ${"'"}::"char", ${"\\"}::"char"`),
    ["abc", "ab   ", "ab", "ab  ", "ab", "é  ", "x", "x", "", "'", "\\"],
  );
  // name truncates to 63 bytes, never in the middle of a character.
  assert.deepEqual(
    await row(sql`select ${"x".repeat(100)}::name, ${"é".repeat(40)}::name,
      ${'🐘 quoted " and \\'}::name, 'pg_catalog'::regnamespace::name`),
    ["x".repeat(63), "é".repeat(31), '🐘 quoted " and \\', "pg_catalog"],
  );
  // Catalog columns of type name.
  assert.equal(
    await one(sql`select typname from pg_type where oid = ${1184}::oid`),
    "timestamptz",
  );
});

dbTest("uuid decodes to its canonical lowercase string", async (sql) => {
  const id = "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11";
  assert.deepEqual(
    await row(sql`select ${id}::uuid, ${id.toUpperCase()}::uuid,
      ${"{a0eebc999c0b4ef8bb6d6bb9bd380a11}"}::uuid, '00000000-0000-0000-0000-000000000000'::uuid`),
    [id, id, id, "00000000-0000-0000-0000-000000000000"],
  );
  const random = await one(sql`select gen_random_uuid() as u`);
  assert.match(
    random as string,
    /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/,
  );
  assert.deepEqual(await one(sql`select ${[id, null]}::uuid[] as a`), [id, null]);
  await rejectsWith(sql`select ${"not-a-uuid"}::uuid`, "22P02");
});

// ---------------------------------------------------------------------------------------
// bytea

/** Byte arrays that cover the edges: empty, every value, escape-relevant bytes, 1 MB. */
function byteaSamples(): Uint8Array[] {
  return [
    new Uint8Array(0),
    ALL_BYTES,
    ALL_BYTES.slice().reverse(),
    new Uint8Array([92]), // backslash
    new Uint8Array([92, 120, 48, 48]), // the text "\x00" as bytes
    new TextEncoder().encode('quote " and \\ and {,}'),
    new Uint8Array([0, 0, 0]),
    ALL_BYTES.subarray(250), // a view with a byteOffset: only its bytes may be sent
    randomBytes(4096).subarray(1000, 3000),
    randomBytes(1024 * 1024),
  ];
}

async function checkBytea(sql: Sql): Promise<void> {
  for (const bytes of byteaSamples()) {
    const [back, length, digest] = await row(
      sql`select ${bytes} as b, length(${bytes}), encode(sha256(${bytes}), 'hex')`,
    );
    assert.ok(back instanceof Buffer, "bytea decodes to a Buffer, as in postgres.js");
    assert.deepEqual(back, buffers(bytes));
    // The server saw exactly these bytes.
    assert.equal(length, bytes.length);
    assert.equal(digest, await sha256Hex(bytes));
  }
  // Server-side literals and functions.
  assert.deepEqual(
    await row(sql`select '\\x'::bytea, '\\x00ff10'::bytea, decode('68656c6c6f', 'hex'),
      convert_to('é', 'UTF8'), 'abc'::bytea`),
    buffers([
      new Uint8Array(0),
      new Uint8Array([0, 255, 16]),
      new TextEncoder().encode("hello"),
      new Uint8Array([0xc3, 0xa9]),
      new Uint8Array([97, 98, 99]),
    ]),
  );
  const generated = await one(
    sql`select string_agg(set_byte('\\x00'::bytea, 0, g), '' order by g) from generate_series(0, 255) g`,
  );
  assert.deepEqual(generated, buffers(ALL_BYTES));
}

dbTest("bytea (hex output) round trips empty, all 256 byte values and 1 MB", async (sql) => {
  assert.equal(await one(sql`show bytea_output`), "hex");
  await checkBytea(sql);
});

dbTest("bytea (escape output) decodes the same bytes", async (sql) => {
  await setConfig(sql, "bytea_output", "escape");
  await checkBytea(sql);
  const arrays = [new Uint8Array(0), ALL_BYTES, null, new Uint8Array([92, 34, 123])];
  assert.deepEqual(await one(sql`select ${arrays} as a`), buffers(arrays));
});

// ---------------------------------------------------------------------------------------
// date / timestamp / timestamptz

const MAX = 8.64e15;

dbTest("date decodes to UTC midnight, BC and year 10000+ included", async (sql) => {
  const values = await row(sql`select '2024-02-29'::date, '1970-01-01'::date,
    '1969-12-31'::date, '0001-01-01'::date, '0001-12-31 BC'::date, '0044-03-15 BC'::date,
    '4713-01-01 BC'::date, '0099-06-30'::date, '0001-02-29 BC'::date, '9999-12-31'::date, '10000-01-01'::date,
    '123456-07-08'::date, '275760-09-12'::date`);
  const expected = [
    utc(2024, 2, 29),
    0,
    -864e5,
    utc(1),
    utc(0, 12, 31),
    utc(-43, 3, 15),
    utc(-4712),
    utc(99, 6, 30),
    utc(0, 2, 29),
    utc(9999, 12, 31),
    utc(10000),
    utc(123456, 7, 8),
    utc(275760, 9, 12),
  ];
  values.forEach((v, i) => assertTime(v, expected[i], `date #${i}`));
  // Later than a JS Date can hold: an Invalid Date rather than an error.
  assertTime(await one(sql`select '275760-09-14'::date as d`), NaN);
  // Session time zone does not change a date.
  await setConfig(sql, "TimeZone", "Pacific/Kiritimati");
  assertTime(await one(sql`select '2024-02-29'::date as d`), utc(2024, 2, 29));
});

dbTest("date parameters: UTC midnight round trips when the session zone is UTC", async (sql) => {
  await setConfig(sql, "TimeZone", "UTC");
  const dates = [utcDate(2024, 2, 29), utcDate(1), utcDate(-43, 3, 15), utcDate(12345, 6, 7)];
  for (const d of dates) {
    assertTime(await one(sql`select ${d}::date as d`), d.getTime(), d.toISOString());
  }
  // Strings are the zone-independent way to send a date.
  assertTime(await one(sql`select ${"2024-02-29"}::date as d`), utc(2024, 2, 29));
  // A Date is a timestamptz, so the server takes its date in the session zone: west of UTC,
  // UTC midnight is still the previous day.
  await setConfig(sql, "TimeZone", "America/New_York");
  assertTime(await one(sql`select ${utcDate(2024, 1, 1)}::date as d`), utc(2023, 12, 31));
  assertTime(await one(sql`select ${"2024-01-01"}::date as d`), utc(2024, 1, 1));
});

dbTest("timestamp decodes its wall clock as local time, whatever the session zone", async (sql) => {
  const cases: [string, number[]][] = [
    ["2024-01-15 12:34:56.789", [2024, 1, 15, 12, 34, 56, 789]],
    ["2024-07-01 00:00:00", [2024, 7, 1, 0, 0, 0, 0]],
    ["2024-01-01 23:59:59.999999", [2024, 1, 1, 23, 59, 59, 999]], // truncated, not rounded
    ["2024-01-01 00:00:00.0005", [2024, 1, 1, 0, 0, 0, 0]],
    ["2024-01-01 00:00:00.1", [2024, 1, 1, 0, 0, 0, 100]],
    ["0001-01-01 00:00:00", [1, 1, 1, 0, 0, 0, 0]],
    ["0050-06-01 08:00:00", [50, 6, 1, 8, 0, 0, 0]],
    ["0044-03-15 12:00:00 BC", [-43, 3, 15, 12, 0, 0, 0]],
    ["0001-12-31 23:59:59.5 BC", [0, 12, 31, 23, 59, 59, 500]],
    ["0001-02-29 12:00:00 BC", [0, 2, 29, 12, 0, 0, 0]], // 1 BC is a leap year
    ["0004-02-29 00:00:00", [4, 2, 29, 0, 0, 0, 0]],
    ["9999-12-31 23:59:59.999", [9999, 12, 31, 23, 59, 59, 999]],
    ["12345-06-07 08:09:10.123", [12345, 6, 7, 8, 9, 10, 123]],
  ];
  for (const zone of ["UTC", "Asia/Kolkata", "America/Los_Angeles"]) {
    await setConfig(sql, "TimeZone", zone);
    for (const [text, fields] of cases) {
      const got = await one(sql`select ${text}::timestamp as t`);
      assert.ok(got instanceof Date);
      assert.deepEqual(localFields(got), fields, `${text} in session zone ${zone}`);
    }
  }
});

dbTest(
  "timestamp parameters: a Date round trips when the session zone is the local zone",
  async (sql) => {
    const localZone = Intl.DateTimeFormat().resolvedOptions().timeZone;
    await setConfig(sql, "TimeZone", localZone);
    const dates = [
      new Date(2024, 0, 15, 12, 34, 56, 789),
      new Date(2024, 6, 1),
      utcDate(1970),
      utcDate(-43, 3, 15, 12),
      utcDate(12345, 6, 7, 8, 9, 10, 11),
    ];
    for (const d of dates) {
      assertTime(await one(sql`select ${d}::timestamp as t`), d.getTime(), d.toISOString());
    }
    const back = await one(sql`select ${dates}::timestamp[] as a`);
    assert.deepEqual(back, dates);
  },
);

/** Instants worth checking in every zone: DST edges, LMT eras, BC, huge years, epoch ±1. */
const INSTANTS: number[] = [
  utc(2024, 1, 15, 12, 34, 56, 789),
  utc(2024, 7, 1, 23, 59, 59, 999),
  utc(2024, 3, 10, 7), // America/New_York springs forward
  utc(2024, 11, 3, 5, 30), // 01:30 EDT
  utc(2024, 11, 3, 6, 30), // 01:30 EST, the repeated hour
  utc(2024, 3, 31, 1), // Europe springs forward
  0,
  -1,
  utc(1900, 1, 1), // local mean time in many zones (offsets with seconds)
  utc(1847, 12, 1, 0, 1, 14),
  utc(1, 1, 1),
  utc(0, 12, 31, 23, 59, 59, 999), // 1 BC
  utc(-43, 3, 15, 12),
  utc(-4712, 1, 1), // 4713 BC, near the server's lower limit
  utc(9999, 12, 31, 23, 59, 59, 999),
  utc(10000, 1, 1),
  utc(12345, 6, 7, 8, 9, 10, 500),
  utc(275760, 9, 12),
];

const ZONES = [
  "UTC",
  "Asia/Kolkata",
  "Asia/Kathmandu",
  "America/St_Johns",
  "America/New_York",
  "Europe/Amsterdam",
  "Pacific/Chatham",
  "Pacific/Kiritimati",
  "Etc/GMT+12",
];

dbTest(
  "timestamptz: a Date parameter comes back as the same instant in every zone",
  async (sql) => {
    for (const zone of ZONES) {
      await setConfig(sql, "TimeZone", zone);
      const dates = INSTANTS.map((t) => new Date(t));
      const results = await Promise.all(
        dates.map((d) =>
          row(sql`select ${d}::timestamptz as t, (extract(epoch from ${d}) * 1000)::int8 as ms,
          ${d}::timestamptz::text as text`)
        ),
      );
      for (let i = 0; i < dates.length; i++) {
        const [back, ms, text] = results[i];
        const label = `${dates[i].toISOString()} in ${zone} (server text ${text})`;
        assertTime(back, INSTANTS[i], label);
        // The server itself saw the right instant, independently of our decoder.
        assert.equal(ms, String(INSTANTS[i]), label);
      }
      assert.deepEqual(await one(sql`select ${dates}::timestamptz[] as a`), dates);
    }
  },
);

dbTest("timestamptz: literals with explicit offsets decode to their instant", async (sql) => {
  const cases: [string, number][] = [
    ["2024-01-15 12:34:56.789+00", utc(2024, 1, 15, 12, 34, 56, 789)],
    ["2024-01-15 12:34:56.789+05:30", utc(2024, 1, 15, 7, 4, 56, 789)],
    ["2024-01-15 12:34:56.789-03:30", utc(2024, 1, 15, 16, 4, 56, 789)],
    ["2024-01-15 00:00:00.123999+00", utc(2024, 1, 15, 0, 0, 0, 123)],
    ["2024-01-15 00:00:00.999999+00", utc(2024, 1, 15, 0, 0, 0, 999)],
    ["2024-01-15 00:00:00.000001+00", utc(2024, 1, 15)],
    // Dublin Mean Time (-00:25:21) until 1916 in every tz database. (Amsterdam's +00:19:32 is
    // only in those built with backzone, as Debian's; PostgreSQL's own build, as in the npm
    // packages, makes Amsterdam a link to Brussels, +00:00 in 1900.)
    ["1900-01-01 00:00:00 Europe/Dublin", utc(1900, 1, 1, 0, 25, 21)],
    ["0044-03-15 12:00:00+00 BC", utc(-43, 3, 15, 12)],
    ["4714-11-24 00:00:00+00 BC", utc(-4713, 11, 24)],
    ["10000-01-01 00:00:00+00", utc(10000)],
    ["12345-06-07 08:09:10.5-01", utc(12345, 6, 7, 9, 9, 10, 500)],
  ];
  for (const zone of ["UTC", "Asia/Kolkata", "America/New_York", "Europe/Amsterdam"]) {
    await setConfig(sql, "TimeZone", zone);
    for (const [text, expected] of cases) {
      assertTime(await one(sql`select ${text}::timestamptz as t`), expected, `${text} in ${zone}`);
    }
  }
  // Beyond what a JS Date can hold: an Invalid Date rather than an error.
  assertTime(await one(sql`select '294276-12-31 23:59:59+00'::timestamptz as t`), NaN);
});

dbTest("infinity and -infinity round trip for date, timestamp and timestamptz", async (sql) => {
  const values = await row(sql`select 'infinity'::date, '-infinity'::date,
    'infinity'::timestamp, '-infinity'::timestamp, 'infinity'::timestamptz,
    '-infinity'::timestamptz`);
  values.forEach((v, i) => assertTime(v, i % 2 === 0 ? MAX : -MAX, `#${i}`));

  const inf = new Date(MAX);
  const negInf = new Date(-MAX);
  assert.deepEqual(
    await row(sql`select ${inf}::timestamptz = 'infinity', ${negInf}::timestamptz = '-infinity',
      ${inf}::timestamp = 'infinity', ${negInf}::date = '-infinity', isfinite(${inf}::timestamptz),
      ${inf}::text`),
    [true, true, true, true, false, "infinity"],
  );
  assertTime(await one(sql`select ${inf}::timestamptz as t`), MAX);
  assertTime(await one(sql`select ${negInf}::date as t`), -MAX);
  assert.deepEqual(
    await one(sql`select ${[inf, null, negInf]}::timestamptz[] as a`),
    [inf, null, negInf],
  );
  assert.deepEqual(
    await one(sql`select array['infinity', null, '-infinity', '2024-01-01']::date[] as a`),
    [inf, null, negInf, utcDate(2024)],
  );
});

dbTest("Date parameters the server cannot store are rejected per query", async (sql) => {
  // Before 4714-11-24 BC: representable in JS, not in PostgreSQL.
  await rejectsWith(sql`select ${new Date(-8.6e15)}::timestamptz`, "22008");
  await rejectsClientSide(sql`select ${new Date(NaN)}::timestamptz`, "INVALID_DATE");
  assertTime(await one(sql`select ${new Date(0)}::timestamptz as t`), 0);
});

// ---------------------------------------------------------------------------------------
// json / jsonb

dbTest("json and jsonb read: objects, arrays, scalars, nested, unicode", async (sql) => {
  for (const type of ["json", "jsonb"]) {
    const cases: [string, unknown][] = [
      ['{"a":1,"b":[true,false,null],"c":{"d":"e"}}', {
        a: 1,
        b: [true, false, null],
        c: { d: "e" },
      }],
      ['[1, 2.5, -3e2, "x", [], {}]', [1, 2.5, -300, "x", [], {}]],
      ['"a string with \\"quotes\\", \\\\ and \\n"', 'a string with "quotes", \\ and \n'],
      ["42", 42],
      ["-0.5", -0.5],
      ["true", true],
      ["false", false],
      ['""', ""],
      ["{}", {}],
      ["[]", []],
      ['"\\u00e9\\ud83d\\udc18 ü 🐘 日本"', "é🐘 ü 🐘 日本"],
      ['{"deep":[{"deeper":[[[{"deepest":"yes"}]]]}]}', {
        deep: [{ deeper: [[[{ deepest: "yes" }]]] }],
      }],
      ['{"ключ":"значение","emoji🐘":"🐘"}', { "ключ": "значение", "emoji🐘": "🐘" }],
    ];
    for (const [text, expected] of cases) {
      const query = type === "json"
        ? sql`select ${text}::json as j`
        : sql`select ${text}::jsonb as j`;
      assert.deepEqual(await one(query), expected, `${type} ${text}`);
    }
  }
  // JSON null and SQL NULL both read as null; the server tells them apart.
  assert.deepEqual(
    await row(sql`select 'null'::jsonb, 'null'::jsonb is null, null::jsonb is null,
      jsonb_typeof('null'), 'null'::json`),
    [null, false, true, "null", null],
  );
  // JSON.parse: numbers beyond double precision lose digits (the server keeps them).
  assert.deepEqual(
    await row(
      sql`select '{"n":12345678901234567890}'::jsonb, ('{"n":12345678901234567890}'::jsonb->>'n')`,
    ),
    [{ n: 12345678901234567000 }, "12345678901234567890"],
  );
});

dbTest("json and jsonb parameters: objects are sent as JSON", async (sql) => {
  const objects: Record<string, unknown>[] = [
    {},
    { a: 1 },
    { nested: { list: [1, "two", null, { three: 3 }], flag: false }, n: -1.5e-10 },
    { text: 'quote " backslash \\ newline \n tab \t', braces: "{a,b}", nul: "NULL" },
    { unicode: "ünïcødé 日本 مرحبا", emoji: "🐘👩‍👩‍👧", "key with spaces": " v " },
    { date: new Date(utc(2024, 1, 2, 3, 4, 5, 6)), skipped: undefined },
    { nullValue: null, empty: "", zero: 0, big: 9007199254740991 },
  ];
  for (const obj of objects) {
    // JSON.stringify semantics: Dates become ISO strings, undefined properties vanish.
    const expected = JSON.parse(JSON.stringify(obj));
    const [json, jsonb, keys] = await row(
      sql`select ${obj}::json, ${obj}::jsonb, (select array_agg(k order by k)
        from jsonb_object_keys(${obj}::jsonb) k)`,
    );
    assert.deepEqual(json, expected);
    assert.deepEqual(jsonb, expected);
    const sortedKeys = Object.keys(expected).sort((a, b) => a < b ? -1 : a > b ? 1 : 0);
    assert.deepEqual(keys ?? [], sortedKeys, "the server parsed the same keys");
  }
  assert.equal(
    await one(sql`select ${{ k: '🐘 "x"' }}::jsonb ->> 'k' as v`),
    '🐘 "x"',
  );
  // Untyped, an object is just JSON text.
  assert.equal(await one(sql`select ${{ a: [1, 2] }} as t`), '{"a":[1,2]}');
  // json keeps the text as sent, so a NUL escape survives; jsonb refuses it.
  assert.deepEqual(await one(sql`select ${{ a: "x\0y" }}::json as j`), { a: "x\0y" });
  await rejectsWith(sql`select ${{ a: "x\0y" }}::jsonb as j`, "22P05");
  // Scalars: strings are sent verbatim (so they must already be JSON text); numbers work.
  assert.deepEqual(
    await row(sql`select ${JSON.stringify("str")}::jsonb, ${42}::jsonb, ${"null"}::jsonb,
      ${"null"}::jsonb is null, ${null}::jsonb is null, ${JSON.stringify([1, [2]])}::jsonb`),
    ["str", 42, null, false, true, [1, [2]]],
  );
  // JS arrays are PostgreSQL arrays, never JSON.
  await rejectsWith(sql`select ${[1, 2]}::jsonb`, "22P02");
  assert.equal(await one(sql`select ${"ok"}::text`), "ok");
});

dbTest("untyped parameters bind to the column types of a table", async (sql) => {
  await sql`create temp table every_type (
    b bool, i2 int2, i4 int4, i8 int8, o oid, f4 float4, f8 float8, n numeric, t text,
    vc varchar(10), nm name, c char(3), ch "char", u uuid, by bytea, d date, ts timestamp,
    tz timestamptz, j json, jb jsonb, ia int4[], ta text[], ja jsonb[], ba bytea[]
  )`;
  const date = utcDate(2024, 2, 29, 12, 30, 15, 250);
  const obj = { a: [1, { b: "c" }], "🐘": null };
  const values = [
    true,
    -5,
    123456,
    9007199254740993n,
    4000000000,
    0.5,
    -1e-300,
    "3.14159265358979323846264338327950288",
    "text 🐘",
    "varchar",
    "name",
    "ab",
    "z",
    "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
    ALL_BYTES,
    "2024-02-29",
    "2024-02-29 12:30:15.25",
    date,
    obj,
    obj,
    [1, null, 3],
    ["a,b", null, "NULL", ""],
    [obj, null, { x: '"{}"' }],
    [ALL_BYTES, null, new Uint8Array(0)],
  ];
  const [inserted] = await sql`insert into every_type values (
    ${values[0]}, ${values[1]}, ${values[2]}, ${values[3]}, ${values[4]}, ${values[5]},
    ${values[6]}, ${values[7]}, ${values[8]}, ${values[9]}, ${values[10]}, ${values[11]},
    ${values[12]}, ${values[13]}, ${values[14]}, ${values[15]}, ${values[16]}, ${values[17]},
    ${values[18]}, ${values[19]}, ${values[20]}, ${values[21]}, ${values[22]}, ${values[23]}
  ) returning *`;
  assert.deepEqual(
    inserted,
    buffers({
      b: true,
      i2: -5,
      i4: 123456,
      i8: "9007199254740993",
      o: 4000000000,
      f4: 0.5,
      f8: -1e-300,
      n: "3.14159265358979323846264338327950288",
      t: "text 🐘",
      vc: "varchar",
      nm: "name",
      c: "ab ",
      ch: "z",
      u: "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
      by: ALL_BYTES,
      d: utcDate(2024, 2, 29),
      ts: new Date(2024, 1, 29, 12, 30, 15, 250),
      tz: date,
      j: obj,
      jb: obj,
      ia: [1, null, 3],
      ta: ["a,b", null, "NULL", ""],
      ja: [obj, null, { x: '"{}"' }],
      ba: [ALL_BYTES, null, new Uint8Array(0)],
    }),
  );
  // A NULL in every column.
  const [nulls] = await sql`insert into every_type default values returning *`;
  assert.ok(Object.values(nulls).every((v) => v === null));
  assert.equal(Object.keys(nulls).length, 24);
});

// ---------------------------------------------------------------------------------------
// arrays

for (const prepare of [true, false]) {
  dbTest(
    `one-dimensional arrays of every type with NULL elements (prepare: ${prepare})`,
    async (sql) => {
      const [
        bools,
        int2s,
        int4s,
        int8s,
        oids,
        float4s,
        float8s,
        numerics,
        texts,
        varchars,
        names,
        bpchars,
        chars,
        uuids,
        byteas,
        dates,
        timestamps,
        timestamptzs,
        jsons,
        jsonbs,
      ] = await row(sql`select
      '{t,f,NULL}'::bool[],
      '{-32768,NULL,32767}'::int2[],
      array[-2147483648, null, 2147483647]::int4[],
      array[-9223372036854775808, null, 9223372036854775807]::int8[],
      '{0,NULL,4294967295}'::oid[],
      '{1.5,NULL,NaN,-Infinity}'::float4[],
      '{-0,NULL,NaN,Infinity,-Infinity,5e-324,1.7976931348623157e308}'::float8[],
      array['NaN', null, '12345678901234567890.0123456789']::numeric[],
      array['a', null, 'NULL', '', 'x y', 'q"q', 'b\\s', '{}', ',']::text[],
      array['v', null, ' ']::varchar[],
      array['n', null, 'NULL']::name[],
      array['a', null, 'a,b']::char(3)[],
      array['a', null, '"', '\\', ' ', ',']::"char"[],
      array['a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', null]::uuid[],
      array['\\x'::bytea, null, '\\x00ff5c22'::bytea],
      array['2024-02-29', null, '0044-03-15 BC', '12345-01-01']::date[],
      array['2024-02-29 12:00:00.123456', null]::timestamp[],
      array['2024-02-29 12:00:00.5+05:30', null, '0044-03-15 12:00:00+00 BC']::timestamptz[],
      array['{"a":"b,c"}', null, 'null', '"NULL"', '[1,{"x":"}"}]']::json[],
      array['{"a":"b,c"}', null, 'null', '"x\\"y"', '[1,{"x":"}"}]', '1.5']::jsonb[]`);
      assert.deepEqual(bools, [true, false, null]);
      assert.deepEqual(int2s, [-32768, null, 32767]);
      assert.deepEqual(int4s, [-2147483648, null, 2147483647]);
      assert.deepEqual(int8s, ["-9223372036854775808", null, "9223372036854775807"]);
      assert.deepEqual(oids, [0, null, 4294967295]);
      assert.deepEqual(float4s, [1.5, null, NaN, -Infinity]);
      assert.deepEqual(float8s, [
        -0,
        null,
        NaN,
        Infinity,
        -Infinity,
        5e-324,
        1.7976931348623157e308,
      ]);
      assert.deepEqual(numerics, ["NaN", null, "12345678901234567890.0123456789"]);
      assert.deepEqual(texts, ["a", null, "NULL", "", "x y", 'q"q', "b\\s", "{}", ","]);
      assert.deepEqual(varchars, ["v", null, " "]);
      assert.deepEqual(names, ["n", null, "NULL"]);
      assert.deepEqual(bpchars, ["a  ", null, "a,b"]);
      assert.deepEqual(chars, ["a", null, '"', "\\", " ", ","]);
      assert.deepEqual(uuids, ["a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", null]);
      assert.deepEqual(
        byteas,
        buffers([new Uint8Array(0), null, new Uint8Array([0, 255, 92, 34])]),
      );
      assert.deepEqual(dates, [utcDate(2024, 2, 29), null, utcDate(-43, 3, 15), utcDate(12345)]);
      assert.deepEqual(timestamps, [new Date(2024, 1, 29, 12, 0, 0, 123), null]);
      assert.deepEqual(timestamptzs, [
        utcDate(2024, 2, 29, 6, 30, 0, 500),
        null,
        utcDate(-43, 3, 15, 12),
      ]);
      // JSON null elements read as null, like SQL NULL elements.
      assert.deepEqual(jsons, [{ a: "b,c" }, null, null, "NULL", [1, { x: "}" }]]);
      assert.deepEqual(jsonbs, [{ a: "b,c" }, null, null, 'x"y', [1, { x: "}" }], 1.5]);
    },
    { prepare },
  );
}

dbTest("empty arrays", async (sql) => {
  assert.deepEqual(
    await row(sql`select '{}'::int4[], array[]::text[], '{}'::jsonb[], '{}'::bytea[],
      ${[]}::int4[], ${[]}::text[], cardinality(${[]}::int4[]), '{}'::int4[] = ${[]}::int4[]`),
    [[], [], [], [], [], [], 0, true],
  );
  // Empty sub-arrays: refused before PostgreSQL 17, read as one empty array since.
  const empties = sql`select ${[[], []]}::int4[] as a`;
  if (await serverVersion(sql) < 170000) await rejectsWith(empties, "22P02");
  else assert.deepEqual(await one(empties), []);
});

dbTest("text[] elements needing quotes round trip and reach the server intact", async (sql) => {
  const list: (string | null)[] = [...TRICKY_STRINGS, null];
  // Encoder: the server sees each element as sent.
  const elements = await sql`select e, i from unnest(${list}::text[]) with ordinality u(e, i)
    order by i`.values();
  assert.deepEqual(elements.map(([e]) => e), list);
  assert.deepEqual(elements.map(([, i]) => i), list.map((_, i) => String(i + 1)));
  // Decoder: an array built on the server (from JSON, not from our array encoder).
  const built = await one(sql`select array_agg(e order by i)
    from jsonb_array_elements_text(${JSON.stringify(list)}::jsonb) with ordinality u(e, i)`);
  assert.deepEqual(built, list);
  // Both directions for varchar[] and name[], and straight back.
  assert.deepEqual(await one(sql`select ${list}::text[] as a`), list);
  assert.deepEqual(await one(sql`select ${list}::varchar[] as a`), list);
  const short = list.map((s) => s === null ? null : s.slice(0, 20));
  assert.deepEqual(await one(sql`select ${short}::name[] as a`), short);
});

dbTest("multi-dimensional arrays", async (sql) => {
  assert.deepEqual(
    await row(sql`select '{{1,2},{3,NULL}}'::int4[],
      '{{{1,2},{3,4}},{{5,6},{7,8}}}'::int4[],
      '{{"a,b",NULL},{"NULL",""}}'::text[],
      '{{t,f},{NULL,t}}'::bool[],
      array[array['2024-01-01'::date, null], array[null, '0001-01-01 BC'::date]],
      array_dims('{{{1,2},{3,4}},{{5,6},{7,8}}}'::int4[])`),
    [
      [[1, 2], [3, null]],
      [[[1, 2], [3, 4]], [[5, 6], [7, 8]]],
      [["a,b", null], ["NULL", ""]],
      [[true, false], [null, true]],
      [[utcDate(2024), null], [null, utcDate(0)]],
      "[1:2][1:2][1:2]",
    ],
  );
  // Nested parameters become real dimensions on the server.
  const cube = [[[1, 2], [3, null]], [[5, 6], [7, 8]]];
  assert.deepEqual(
    await row(
      sql`select ${cube}::int4[], array_dims(${cube}::int4[]), (${cube}::int4[])[1][2][2] is null`,
    ),
    [cube, "[1:2][1:2][1:2]", true],
  );
  const words = [["a b", '"q"', "\\"], ["NULL", null, "{x}"]];
  assert.deepEqual(
    await row(sql`select ${words}::text[], (${words}::text[])[2][1], (${words}::text[])[1][3]`),
    [words, "NULL", "\\"],
  );
  const bigs = [[1n, null], [-9223372036854775808n, 9223372036854775807n]];
  assert.deepEqual(
    await row(sql`select ${bigs}, array_dims(${bigs})`),
    [[["1", null], ["-9223372036854775808", "9223372036854775807"]], "[1:2][1:2]"],
  );
  const bools = [[true, null], [false, true]];
  assert.deepEqual(await one(sql`select ${bools} as a`), bools);
  // Ragged arrays are not arrays to PostgreSQL.
  await rejectsWith(sql`select ${[[1], [2, 3]]}::int4[]`, "22P02");
});

dbTest("arrays with non-default lower bounds decode from index 0", async (sql) => {
  assert.deepEqual(
    await row(sql`select '[0:1]={1,2}'::int4[], '[0:1]={1,2}'::int4[]::text,
      '[-2:-1][3:4]={{a,b},{c,d}}'::text[], '[5:6]={"x=y","[1:2]={}"}'::text[],
      '[0:2]={2024-01-01,NULL,infinity}'::date[], '[3:3]={"{\\"a\\": 1}"}'::jsonb[]`),
    [
      [1, 2],
      "[0:1]={1,2}",
      [["a", "b"], ["c", "d"]],
      ["x=y", "[1:2]={}"],
      [utcDate(2024), null, new Date(MAX)],
      [{ a: 1 }],
    ],
  );
  // Arrays whose bounds come from assignment and functions, checked against the server.
  await sql`create temp table bounds (a int4[])`;
  assert.deepEqual(
    await row(sql`insert into bounds values ('{1,2}') returning a, array_lower(a, 1)`),
    [[1, 2], 1],
  );
  assert.deepEqual(
    await row(sql`update bounds set a[-1] = 9 returning a, a::text`),
    [[9, null, 1, 2], "[-1:2]={9,NULL,1,2}"],
  );
  assert.deepEqual(
    await row(
      sql`select array_fill(7, array[2], array[-3]), array_fill(7, array[2], array[-3])::text`,
    ),
    [[7, 7], "[-3:-2]={7,7}"],
  );
});

dbTest("bytea[] parameters and results", async (sql) => {
  const list = [new Uint8Array(0), ALL_BYTES, null, new Uint8Array([92, 34, 44, 123, 125])];
  const [back, lengths] = await row(
    sql`select ${list}, (select array_agg(length(e) order by i) from unnest(${list}::bytea[])
      with ordinality u(e, i))`,
  );
  assert.deepEqual(back, buffers(list));
  assert.deepEqual(lengths, [0, 256, null, 5]);
  const nested = [[ALL_BYTES, null], [new Uint8Array([1]), new Uint8Array(0)]];
  assert.deepEqual(await one(sql`select ${nested} as a`), buffers(nested));
});

dbTest("date and timestamptz arrays as parameters", async (sql) => {
  const instants = [
    utcDate(2024, 2, 29, 12, 30, 15, 250),
    null,
    utcDate(-43, 3, 15, 12),
    utcDate(12345, 6, 7),
    new Date(MAX),
    new Date(-MAX),
  ];
  for (const zone of ["UTC", "Asia/Kolkata", "America/St_Johns"]) {
    await setConfig(sql, "TimeZone", zone);
    // Typed timestamptz[] by inference: no cast needed.
    assert.deepEqual(await one(sql`select ${instants} as a`), instants, zone);
  }
  await setConfig(sql, "TimeZone", "UTC");
  const days = [utcDate(2024, 2, 29), null, utcDate(-43, 3, 15), utcDate(10000, 1, 1)];
  assert.deepEqual(await one(sql`select ${days}::date[] as a`), days);
  assert.deepEqual(
    await one(sql`select ${["2024-02-29", null, "0044-03-15 BC"]}::date[] as a`),
    [utcDate(2024, 2, 29), null, utcDate(-43, 3, 15)],
  );
});

dbTest("json[] and jsonb[] parameters", async (sql) => {
  const docs = [
    { a: 1, s: 'q " \\ , { } NULL' },
    null,
    { nested: [[1, 2], { x: null }] },
    { emoji: "🐘", empty: "" },
  ];
  assert.deepEqual(await one(sql`select ${docs}::jsonb[] as a`), docs);
  assert.deepEqual(await one(sql`select ${docs}::json[] as a`), docs);
  assert.deepEqual(
    await one(sql`select array_agg(e->>'s' order by i) from unnest(${docs}::jsonb[])
      with ordinality u(e, i)`),
    ['q " \\ , { } NULL', null, null, null],
  );
});

dbTest("int8[] with bigint: true", async (sql) => {
  const list = [9223372036854775807n, null, -9223372036854775808n, 0n];
  assert.deepEqual(await one(sql`select ${list} as a`), list);
  assert.deepEqual(
    await one(sql`select '{{1,NULL},{-9223372036854775808,9223372036854775807}}'::int8[] as a`),
    [[1n, null], [-9223372036854775808n, 9223372036854775807n]],
  );
  assert.deepEqual(await one(sql`select ${["1", "2"]}::int8[] as a`), [1n, 2n]);
  assert.deepEqual(await one(sql`select array[1, 2]::int4[] as a`), [1, 2]);
}, { bigint: true });

// ---------------------------------------------------------------------------------------
// parameters

dbTest("parameter types: inferred OIDs as the server sees them", async (sql) => {
  const result = await sql`select ${"s"} as string, ${1.5} as number, ${1n} as bigint,
    ${true} as boolean, ${utcDate(2024)} as date, ${new Uint8Array([1, 2])} as bytes,
    ${null} as nothing, ${[1n, null]} as bigints, ${[true]} as bools,
    ${[utcDate(2024)]} as dates, ${[new Uint8Array([3])]} as byteas, ${{ a: 1 }} as object,
    ${[[null], [false]]} as nested`;
  assert.deepEqual(
    result.columns!.map((c) => c.type),
    [25, 25, 20, 16, 1184, 17, 25, 1016, 1000, 1185, 1001, 25, 1000],
  );
  // Untyped strings and numbers come back as text.
  assert.deepEqual(
    result[0],
    buffers({
      string: "s",
      number: "1.5",
      bigint: "1",
      boolean: true,
      date: utcDate(2024),
      bytes: new Uint8Array([1, 2]),
      nothing: null,
      bigints: ["1", null],
      bools: [true],
      dates: [utcDate(2024)],
      byteas: [new Uint8Array([3])],
      object: '{"a":1}',
      nested: [[null], [false]],
    }),
  );
  assert.deepEqual(
    await row(sql`select pg_typeof(${1n})::text, pg_typeof(${false})::text,
      pg_typeof(${new Date(0)})::text, pg_typeof(${new Uint8Array(0)})::text,
      pg_typeof(${[new Date(0)]})::text, pg_typeof(${[[null], [1n]]})::text`),
    [
      "bigint",
      "boolean",
      "timestamp with time zone",
      "bytea",
      "timestamp with time zone[]",
      "bigint[]",
    ],
  );
  // Arrays of strings, numbers or nulls only are untyped: a cast decides.
  assert.deepEqual(
    await row(sql`select ${[1, 2]}::int2[], ${["1", "2"]}::int4[], ${[null, null]}::text[],
      ${[1.5, NaN, -0]}::float8[], ${[["1"], ["2"]]}::numeric[]`),
    [[1, 2], [1, 2], [null, null], [1.5, NaN, -0], [["1"], ["2"]]],
  );
});

dbTest("undefined rejects with UNDEFINED_VALUE and the connection stays usable", async (sql) => {
  await rejectsClientSide(sql`select ${undefined} as x`, "UNDEFINED_VALUE");
  try {
    await sql`select ${1}::int4, ${undefined}::int4`;
    assert.fail("should reject");
  } catch (e) {
    assert.match((e as Error).message, /undefined/i);
  }
  await rejectsClientSide(sql`select ${[1, undefined]}::int4[]`, "UNDEFINED_VALUE");
  await rejectsClientSide(sql`select ${[[null], [undefined]]}::int4[]`, "UNDEFINED_VALUE");
  assert.equal(await one(sql`select ${1}::int4 as x`), 1);
  // Among pipelined neighbours only the bad one fails.
  const results = await Promise.allSettled([
    sql`select ${1}::int4 as x`,
    sql`select ${undefined}::int4 as x`,
    sql`select ${3}::int4 as x`,
  ]);
  assert.equal(results[0].status, "fulfilled");
  assert.equal(results[1].status, "rejected");
  assert.equal(results[2].status, "fulfilled");
  assert.deepEqual(
    results.map((r) =>
      r.status === "fulfilled" ? r.value[0].x : (r.reason as { code: string }).code
    ),
    [1, "UNDEFINED_VALUE", 3],
  );
  // undefined inside a JSON object is JSON.stringify's business: the key is dropped.
  assert.deepEqual(await one(sql`select ${{ a: undefined, b: 1 }}::jsonb as j`), { b: 1 });
});

dbTest(
  "a value the server rejects fails that query only; pipelined neighbours succeed",
  async (sql) => {
    const query = (v: string) => sql`select ${v}::int4 as x`;
    const results = await Promise.allSettled([
      query("1"),
      sql`select ${"before"}::text as t`,
      query("abc"),
      sql`select ${"after"}::text as t`,
      query("4"),
    ]);
    assert.deepEqual(results.map((r) => r.status), [
      "fulfilled",
      "fulfilled",
      "rejected",
      "fulfilled",
      "fulfilled",
    ]);
    const failure = (results[2] as PromiseRejectedResult).reason;
    assert.ok(failure instanceof PostgresError);
    assert.equal(failure.code, "22P02");
    assert.match(failure.message, /integer/);
    const ok = results.filter((r) => r.status === "fulfilled").map((r) => r.value[0]);
    assert.deepEqual(ok, [{ x: 1 }, { t: "before" }, { t: "after" }, { x: 4 }]);
    // The same statement still works afterwards, with good and bad values.
    assert.equal(await one(query("5")), 5);
    await rejectsWith(query("6.5"), "22P02");
    assert.equal(await one(query("7")), 7);
    // Other kinds of server-side value errors.
    await rejectsWith(sql`select ${"2024-02-30"}::date`, "22008");
    await rejectsWith(sql`select ${"{1,2"}::int4[]`, "22P02");
    await rejectsWith(sql`select ${"{not json"}::jsonb`, "22P02");
    await rejectsWith(sql`select ${"\\xZZ"}::bytea`, "22023");
    assert.equal(await one(query("8")), 8);
  },
);

// ---------------------------------------------------------------------------------------
// size

dbTest("a 16 MB text value round trips exactly", async (sql) => {
  const unit = "0123456789abcdef ünï 🐘 \"'\\\n{,}"; // mixes 1-, 2- and 4-byte characters
  const encoder = new TextEncoder();
  const unitBytes = encoder.encode(unit).length;
  const text = unit.repeat(Math.ceil((16 * 1024 * 1024) / unitBytes));
  const bytes = encoder.encode(text);
  assert.ok(bytes.length >= 16 * 1024 * 1024);
  const [back, octets, digest] = await row(
    sql`select ${text}::text, octet_length(${text}::text),
      encode(sha256(convert_to(${text}::text, 'UTF8')), 'hex')`,
  );
  assert.equal(octets, bytes.length);
  assert.equal(digest, await sha256Hex(bytes));
  assert.ok(back === text, "the 16 MB string came back different");
  // Generated on the server, read back.
  const generated = await one(sql`select repeat(${unit}, ${1000000}::int4) as t`);
  assert.ok(generated === unit.repeat(1000000));
});

dbTest("a 16 MB bytea round trips exactly", async (sql) => {
  const bytes = randomBytes(16 * 1024 * 1024);
  const [back, length, digest] = await row(
    sql`select ${bytes}, length(${bytes}), encode(sha256(${bytes}), 'hex')`,
  );
  assert.equal(length, bytes.length);
  assert.equal(digest, await sha256Hex(bytes));
  assert.ok(back instanceof Uint8Array);
  assert.equal(back.length, bytes.length);
  assert.ok(back.every((b, i) => b === bytes[i]), "the 16 MB bytea came back different");
});

dbTest("a 100,000-row result is complete and in order", async (sql) => {
  const rows = await sql`select g, 'row' || g as t from generate_series(1, 100000) g`;
  assert.equal(rows.length, 100000);
  assert.equal(rows.count, 100000);
  for (let i = 0; i < rows.length; i++) {
    const r = rows[i];
    if (r.g !== i + 1 || r.t !== "row" + (i + 1)) {
      assert.fail(`row ${i} is ${JSON.stringify(r)}`);
    }
  }
  const values = await sql`select g, 'row' || g as t from generate_series(1, 100000) g`.values();
  assert.equal(values.length, 100000);
  assert.deepEqual(values[0], [1, "row1"]);
  assert.deepEqual(values[99999], [100000, "row100000"]);
  assert.ok(values.every((v, i) => v[0] === i + 1 && v[1] === "row" + (i + 1)));
});

// ---------------------------------------------------------------------------------------
// timestamp in a non-UTC process

Deno.test({
  name: "types roundtrip: timestamp uses the process time zone (TZ=America/New_York subprocess)",
  ignore: url === undefined,
  fn: async () => {
    // The harness's postgres(): on PGlite (--pg=pglite, inherited) it maps the URL there too.
    const mod = new URL("./harness/postgres.ts", import.meta.url).href;
    const script = `
      import postgres from ${JSON.stringify(mod)};
      const sql = postgres(Deno.env.get("DATABASE_URL"), { max: 1 });
      const fields = (d) => [d.getFullYear(), d.getMonth() + 1, d.getDate(), d.getHours(),
        d.getMinutes(), d.getSeconds(), d.getMilliseconds()];
      const out = { zone: Intl.DateTimeFormat().resolvedOptions().timeZone };
      try {
        const texts = ["2024-01-15 12:34:56.789", "2024-07-01 00:00:00", "0050-06-01 08:00:00",
          "1850-01-01 00:00:00", "0044-03-15 12:00:00 BC",
          // 02:30 on 1950-04-30 is in New York's DST gap, but on 0050-04-30 it exists.
          "0050-04-30 02:30:00"];
        out.local = [];
        for (const zone of ["UTC", "Asia/Kolkata"]) {
          await sql\`select set_config('TimeZone', \${zone}, false)\`;
          for (const t of texts) {
            const [{ v }] = await sql\`select \${t}::timestamp as v\`;
            out.local.push(fields(v));
          }
        }
        const [{ winter, summer, day, tz }] = await sql\`select
          '2024-01-15 12:00:00'::timestamp as winter, '2024-07-15 12:00:00'::timestamp as summer,
          '2024-01-15'::date as day, '2024-01-15 12:00:00+00'::timestamptz as tz\`;
        out.times = [winter.getTime(), summer.getTime(), day.getTime(), tz.getTime()];
        const d = new Date(Date.UTC(2024, 0, 15, 17, 0, 0, 5));
        await sql\`select set_config('TimeZone', 'America/New_York', false)\`;
        const [{ same }] = await sql\`select \${d}::timestamp as same\`;
        await sql\`select set_config('TimeZone', 'UTC', false)\`;
        const [{ shifted }] = await sql\`select \${d}::timestamp as shifted\`;
        out.roundTrip = [same.getTime(), shifted.getTime()];
      } finally {
        await sql.end();
      }
      console.log(JSON.stringify(out));
    `;
    const child = await new Deno.Command(Deno.execPath(), {
      args: ["eval", "--ext=js", script],
      env: { TZ: "America/New_York", DATABASE_URL: url! },
      stdout: "piped",
      stderr: "piped",
    }).output();
    const stderr = new TextDecoder().decode(child.stderr);
    assert.equal(child.code, 0, stderr);
    const out = JSON.parse(new TextDecoder().decode(child.stdout));
    assert.equal(out.zone, "America/New_York", "the subprocess did not pick up TZ");
    const expected = [
      [2024, 1, 15, 12, 34, 56, 789],
      [2024, 7, 1, 0, 0, 0, 0],
      [50, 6, 1, 8, 0, 0, 0],
      [1850, 1, 1, 0, 0, 0, 0],
      [-43, 3, 15, 12, 0, 0, 0],
      [50, 4, 30, 2, 30, 0, 0],
    ];
    // Same wall clock as local fields, in both session zones.
    assert.deepEqual(out.local, [...expected, ...expected]);
    assert.deepEqual(out.times, [
      utc(2024, 1, 15, 17), // EST is UTC-5
      utc(2024, 7, 15, 16), // EDT is UTC-4
      utc(2024, 1, 15), // date: UTC midnight, not local
      utc(2024, 1, 15, 12), // timestamptz: exact
    ]);
    // Date -> timestamp -> Date keeps the instant only when session zone = process zone.
    assert.deepEqual(out.roundTrip, [utc(2024, 1, 15, 17, 0, 0, 5), utc(2024, 1, 15, 22, 0, 0, 5)]);
  },
});
