/**
 * Binary result formats: once a statement's columns are known, later executions ask for
 * bool, int2, int4, oid, float8, bytea, date, timestamp and timestamptz in binary. These
 * tests hold the binary decoders to the text decoders, value by value, using the server's
 * own `*send` output, and check that a statement's text run and binary runs agree.
 */
import assert from "node:assert/strict";
import postgres from "./harness/postgres.ts";
import { binaryDecoderFor } from "../src/types/binary_decoders.ts";
import { decoderFor } from "../src/types/text_decoders.ts";
import { Oid } from "../src/types/oids.ts";
import { ProtocolViolation } from "../src/protocol/backend.ts";
import { databaseUrl } from "./harness/env.ts";

const url = databaseUrl();

/** Compares decoded values: Dates by instant (NaN included), numbers with Object.is (-0, NaN). */
function same(a: unknown, b: unknown): boolean {
  if (a instanceof Date && b instanceof Date) return Object.is(a.getTime(), b.getTime());
  if (a instanceof Uint8Array && b instanceof Uint8Array) {
    return a.length === b.length && a.every((x, i) => x === b[i]);
  }
  return Object.is(a, b);
}

const TIMES = [
  "2000-01-01 00:00:00",
  "1999-12-31 23:59:59.999999",
  "1970-01-01 00:00:00.0005",
  "1969-12-31 23:59:59.9995",
  "2024-02-29 12:34:56.789123",
  "0099-06-01 01:02:03.4",
  "0001-01-01 00:00:00 BC",
  "4713-11-24 00:00:00.000001 BC",
  "12345-06-07 08:09:10.5",
  "275760-09-13 00:00:00",
  "275760-09-13 00:00:00.001",
  "294276-12-31 23:59:59.999999",
  "infinity",
  "-infinity",
];

/** Values of each binary-decoded type as SQL literals, edge cases first. */
const SAMPLES: [type: string, send: string, oid: number, literals: string[]][] = [
  ["bool", "boolsend", Oid.bool, ["true", "false"]],
  ["int2", "int2send", Oid.int2, ["0", "1", "-1", "32767", "-32768"]],
  ["int4", "int4send", Oid.int4, ["0", "-1", "2147483647", "-2147483648", "123456"]],
  ["oid", "oidsend", Oid.oid, ["0", "1", "2147483648", "4294967295"]],
  ["float8", "float8send", Oid.float8, [
    "0",
    "-0",
    "1.1",
    "0.1",
    "NaN",
    "Infinity",
    "-Infinity",
    "5e-324",
    "1.7976931348623157e308",
    "-2.2250738585072014e-308",
    "123456789.123456789",
  ]],
  ["bytea", "byteasend", Oid.bytea, ["", "\\x00", "\\xdeadbeef", "abc\\\\def"]],
  ["date", "date_send", Oid.date, [
    "2000-01-01",
    "1970-01-01",
    "1969-12-31",
    "0001-01-01 BC",
    "4713-01-01 BC",
    "0099-12-31",
    "12345-06-07",
    "275760-09-13",
    "275760-09-14",
    "5874897-12-31",
    "infinity",
    "-infinity",
  ]],
  ["timestamp", "timestamp_send", Oid.timestamp, TIMES],
  [
    "timestamptz",
    "timestamptz_send",
    Oid.timestamptz,
    TIMES.map((t) => /infinity/.test(t) ? t : t.replace(/( BC)?$/, "+05:30$1")),
  ],
];

for (const zone of ["UTC", "Asia/Kolkata", "America/St_Johns", "Europe/Amsterdam"]) {
  Deno.test(`binary decoders equal the text decoders on the server's send output (${zone})`, async () => {
    await using sql = postgres(url, { max: 1 });
    await sql.unsafe(`set timezone to '${zone}'`);
    let checked = 0;
    for (const [type, send, oid, literals] of SAMPLES) {
      const fromText = decoderFor(oid, { bigint: false });
      const fromBinary = binaryDecoderFor(oid);
      assert.ok(fromBinary !== null, `${type} has a binary decoder`);
      for (const literal of literals) {
        // raw(): the type's own text output, as the text decoder receives it.
        const [[raw, hex]] = await sql.unsafe(
          `select $1::${type} as value, encode(${send}($1::${type}), 'hex') as bytes`,
          [literal],
        ).raw();
        const text = new TextDecoder().decode(raw as Uint8Array);
        const bytes = Uint8Array.from(
          new TextDecoder().decode(hex as Uint8Array).match(/../g) ?? [],
          (h) => parseInt(h, 16),
        );
        const expected = fromText === null ? text : fromText(text as string);
        const actual = fromBinary(bytes, 0, bytes.length);
        assert.ok(
          same(actual, expected),
          `${type} ${literal} in ${zone}: text ${text} gives ${expected}, binary gives ${actual}`,
        );
        checked++;
      }
    }
    assert.equal(checked, SAMPLES.reduce((n, s) => n + s[3].length, 0));
  });
}

/** A table with one column per binary-decoded type, plus text-only ones, and a NULL row. */
async function fill(sql: ReturnType<typeof postgres>): Promise<void> {
  await sql`create temp table everything (
    b bool, s int2, i int4, o oid, f float8, y bytea, d date, t timestamp, tz timestamptz,
    big int8, r float4, n numeric, j jsonb, u uuid, txt text)`;
  await sql`insert into everything values
    (true, -2, 7, 4000000000, -0.5, '\\x0102', '1999-01-08', '2024-03-10 02:30:00.123456',
     '1969-12-31 23:59:59.9995+00', 9007199254740993, 1.1, 1.10, '{"a":[1]}',
     'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'héllo'),
    (false, 32767, -2147483648, 0, 'NaN', '', '-infinity', 'infinity', '2000-01-01 00:00:00+00',
     -1, 'Infinity', 'NaN', 'null', '00000000-0000-0000-0000-000000000000', ''),
    (null, null, null, null, null, null, null, null, null, null, null, null, null, null, null)`;
}

/** The statement behind a result, as the driver keeps it (its Bind result formats). */
function formatsOf(result: { statement: unknown }): number[] {
  return (result.statement as { formats: number[] }).formats;
}

Deno.test("a statement's first run is text, later runs are binary, and the rows are equal", async () => {
  await using sql = postgres(url, { max: 1 });
  await fill(sql);
  const run = () => sql`select * from everything order by s nulls last`;
  const first = await run();
  const second = await run();
  const third = await run.call(null).values();
  assert.equal(first.length, 3);
  assert.deepEqual([...second], [...first]);
  assert.deepEqual([...third], first.map((r) => Object.values(r)));
  // b s i o f y d t tz are binary; int8, float4, numeric, jsonb, uuid and text stay text.
  assert.deepEqual(formatsOf(second), [1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0]);
  assert.equal(second[0].o, 4000000000);
  assert.equal(second[0].r, 1.1); // float4 as text: its shortest decimal, not 1.100000023841858
  assert.equal(second[0].big, "9007199254740993");
  assert.equal((second[0].tz as Date).toISOString(), "1969-12-31T23:59:59.999Z");
});

Deno.test("queries pipelined with a statement's first run decode whichever format they asked for", async () => {
  await using sql = postgres(url, { max: 1 });
  await fill(sql);
  const q = () => sql`select tz, f, y from everything where s = ${32767}`;
  // The first binds text before the columns are known; the others may bind either way.
  const results = await Promise.all(Array.from({ length: 50 }, q));
  const later = await Promise.all(Array.from({ length: 50 }, q));
  for (const r of [...results, ...later]) assert.deepEqual([...r], [...results[0]]);
  assert.equal((results[0][0].tz as Date).getTime(), Date.UTC(2000, 0, 1));
  assert.ok(Number.isNaN(results[0][0].f));
});

Deno.test("raw() hands out the text bytes even after the statement went binary", async () => {
  await using sql = postgres(url, { max: 1 });
  const run = () => sql`select ${41}::int4 + 1 as n, '2020-01-02'::date as d`;
  await run();
  await run();
  const [[n, d]] = await run().raw();
  assert.equal(new TextDecoder().decode(n as Uint8Array), "42");
  assert.equal(new TextDecoder().decode(d as Uint8Array), "2020-01-02");
});

Deno.test("custom parsers keep their column in text; transform.value sees binary-decoded values", async () => {
  const seen: unknown[] = [];
  await using sql = postgres(url, {
    max: 1,
    types: {
      myint: {
        to: 23,
        from: [23],
        serialize: (x: unknown) => String(x),
        parse: (x: string) => `int ${x}`,
      },
    },
    transform: {
      value: {
        from: (v: unknown, column?: { name: string }) => {
          if (column?.name === "d") seen.push(v);
          return v;
        },
      },
    },
  });
  const run = () => sql`select 5::int4 as i, '2001-02-03'::date as d`;
  const first = await run();
  const second = await run();
  assert.deepEqual([...second], [...first]);
  assert.equal(second[0].i, "int 5");
  assert.deepEqual(formatsOf(second), [0, 1]);
  assert.equal(seen.length, 2);
  for (const d of seen) assert.equal((d as Date).toISOString(), "2001-02-03T00:00:00.000Z");
});

Deno.test("cursors and forEach read binary rows once the statement is known", async () => {
  await using sql = postgres(url, { max: 1 });
  const q = () =>
    sql`select i, timestamptz '2000-01-01 00:00:00+00' + i * interval '1 ms' as t
        from generate_series(1, ${250}::int) i`;
  const whole = await q();
  const batches: Record<string, unknown>[] = [];
  for await (const rows of q().cursor(100)) batches.push(...rows);
  const streamed: Record<string, unknown>[] = [];
  await q().forEach((row) => {
    streamed.push(row);
  });
  assert.equal(whole.length, 250);
  assert.deepEqual(batches, [...whole]);
  assert.deepEqual(streamed, [...whole]);
  assert.equal((whole[249].t as Date).getTime(), Date.UTC(2000, 0, 1) + 250);
  assert.deepEqual(formatsOf(await q()), [1, 1]);
});

Deno.test("a binary value of the wrong width is a protocol violation, not a wrong value", () => {
  const widths: [number, number][] = [
    [Oid.bool, 1],
    [Oid.int2, 2],
    [Oid.int4, 4],
    [Oid.oid, 4],
    [Oid.float8, 8],
    [Oid.date, 4],
    [Oid.timestamp, 8],
    [Oid.timestamptz, 8],
  ];
  for (const [oid, size] of widths) {
    const decode = binaryDecoderFor(oid)!;
    assert.doesNotThrow(() => decode(new Uint8Array(size), 0, size));
    assert.throws(() => decode(new Uint8Array(size + 1), 0, size + 1), ProtocolViolation);
    assert.throws(() => decode(new Uint8Array(size), 0, size - 1), ProtocolViolation);
  }
});
