// Unit tests for the text-format codecs in src/types/. No server needed.

import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import { arrayOf, elementOf, Oid } from "../src/types/oids.ts";
import { parseArrayLiteral } from "../src/types/array_literal.ts";
import { decoderFor, type TextDecoderFn } from "../src/types/text_decoders.ts";
import { inferOid, ParameterError, serialize } from "../src/types/encode.ts";

const plain = { bigint: false };
const big = { bigint: true };

/** The decoder for `oid`, failing the test when the type has none. */
function dec(oid: number, opts = plain): TextDecoderFn {
  const fn = decoderFor(oid, opts);
  assert.notEqual(fn, null, `no decoder for oid ${oid}`);
  return fn!;
}

/** A local-time Date that also works for years 0..99 (which the constructor remaps). */
function local(y: number, mo: number, d: number, h = 0, mi = 0, s = 0, ms = 0): Date {
  const date = new Date(2000, mo - 1, d, h, mi, s, ms);
  date.setFullYear(y, mo - 1, d);
  return date;
}

/** A UTC Date that also works for years 0..99. */
function utc(y: number, mo: number, d: number, h = 0, mi = 0, s = 0, ms = 0): Date {
  const date = new Date(Date.UTC(2000, mo - 1, d, h, mi, s, ms));
  date.setUTCFullYear(y, mo - 1, d);
  return date;
}

// ---------------------------------------------------------------------------------------
// oids

Deno.test("oids: scalar and array OIDs match pg_type", () => {
  assert.equal(Oid.bool, 16);
  assert.equal(Oid.int8, 20);
  assert.equal(Oid.timestamptz, 1184);
  assert.equal(Oid.jsonb, 3802);
  assert.equal(Oid.unknown, 705);
  assert.equal(Oid.int4Array, 1007);
  assert.equal(Oid.jsonArray, 199);
  assert.equal(Oid.xmlArray, 143);
  assert.equal(Oid.uuidArray, 2951);
});

Deno.test("oids: arrayOf and elementOf are inverse", () => {
  const pairs: [number, number][] = [
    [16, 1000],
    [17, 1001],
    [18, 1002],
    [19, 1003],
    [21, 1005],
    [23, 1007],
    [25, 1009],
    [1042, 1014],
    [1043, 1015],
    [20, 1016],
    [700, 1021],
    [701, 1022],
    [26, 1028],
    [1114, 1115],
    [1082, 1182],
    [1083, 1183],
    [1184, 1185],
    [1186, 1187],
    [1700, 1231],
    [2950, 2951],
    [114, 199],
    [3802, 3807],
    [142, 143],
  ];
  for (const [element, array] of pairs) {
    assert.equal(arrayOf[element], array, `arrayOf[${element}]`);
    assert.equal(elementOf[array], element, `elementOf[${array}]`);
  }
  for (const [array, element] of Object.entries(elementOf)) {
    assert.equal(arrayOf[element], Number(array));
  }
  assert.equal(arrayOf[Oid.unknown], undefined);
  assert.equal(elementOf[Oid.int4], undefined);
});

// ---------------------------------------------------------------------------------------
// scalar decoders

Deno.test("decoderFor: string types return null", () => {
  for (
    const oid of [
      Oid.text,
      Oid.varchar,
      Oid.name,
      Oid.bpchar,
      Oid.char,
      Oid.uuid,
      Oid.numeric,
      Oid.unknown,
      Oid.time,
      Oid.interval,
      Oid.xml,
      Oid.inet,
      123456789,
    ]
  ) {
    assert.equal(decoderFor(oid, plain), null, `oid ${oid}`);
    assert.equal(decoderFor(oid, big), null, `oid ${oid} (bigint)`);
  }
});

Deno.test("decoderFor: bool", () => {
  assert.equal(dec(Oid.bool)("t"), true);
  assert.equal(dec(Oid.bool)("f"), false);
});

Deno.test("decoderFor: integers and oid", () => {
  assert.equal(dec(Oid.int2)("-32768"), -32768);
  assert.equal(dec(Oid.int4)("2147483647"), 2147483647);
  assert.equal(dec(Oid.int4)("0"), 0);
  assert.equal(dec(Oid.oid)("4294967295"), 4294967295);
});

Deno.test("decoderFor: floats including NaN and infinities", () => {
  for (const oid of [Oid.float4, Oid.float8]) {
    const f = dec(oid);
    assert.equal(f("1.5"), 1.5);
    assert.equal(f("-0.25"), -0.25);
    assert.equal(f("1e+300"), 1e300);
    assert.equal(f("1.2345e-07"), 1.2345e-7);
    assert.ok(Number.isNaN(f("NaN")));
    assert.equal(f("Infinity"), Infinity);
    assert.equal(f("-Infinity"), -Infinity);
    assert.ok(Object.is(f("-0"), -0));
  }
});

Deno.test("decoderFor: int8 is a string by default and a bigint on request", () => {
  assert.equal(decoderFor(Oid.int8, plain), null);
  assert.equal(dec(Oid.int8, big)("9223372036854775807"), 9223372036854775807n);
  assert.equal(dec(Oid.int8, big)("-9223372036854775808"), -9223372036854775808n);
});

Deno.test("decoderFor: json and jsonb", () => {
  assert.deepEqual(dec(Oid.json)('{"a":[1,2,{"b":null}]}'), { a: [1, 2, { b: null }] });
  assert.deepEqual(dec(Oid.jsonb)('{"a": "x"}'), { a: "x" });
  assert.equal(dec(Oid.jsonb)('"str"'), "str");
  assert.equal(dec(Oid.jsonb)("null"), null);
  assert.equal(dec(Oid.json)("12.5"), 12.5);
});

Deno.test("decoderFor: bytea hex format", () => {
  const f = dec(Oid.bytea);
  assert.deepEqual(f("\\x"), Buffer.alloc(0));
  assert.deepEqual(f("\\x0a0b"), Buffer.from([10, 11]));
  assert.deepEqual(f("\\x00ff7f80"), Buffer.from([0, 255, 127, 128]));
  assert.deepEqual(f("\\xDEADbeef"), Buffer.from([0xde, 0xad, 0xbe, 0xef]));
  const all = new Uint8Array(256).map((_, i) => i);
  let hex = "\\x";
  for (const b of all) hex += b.toString(16).padStart(2, "0");
  const decoded = f(hex);
  assert.ok(decoded instanceof Buffer, "bytea decodes to a Buffer, as in postgres.js");
  assert.equal(Buffer.from("wat").toString(), (f("\\x776174") as Buffer).toString());
  assert.deepEqual(decoded, Buffer.from(all));
});

Deno.test("decoderFor: bytea escape format", () => {
  const f = dec(Oid.bytea);
  assert.deepEqual(f("abc"), Buffer.from([97, 98, 99]));
  assert.deepEqual(f("a\\\\b"), Buffer.from([97, 92, 98]));
  assert.deepEqual(f("\\000\\377\\012x"), Buffer.from([0, 255, 10, 120]));
});

Deno.test("decoderFor: date is UTC midnight like new Date('YYYY-MM-DD')", () => {
  const f = dec(Oid.date);
  assert.deepEqual(f("2020-01-02"), new Date("2020-01-02"));
  assert.deepEqual(f("1970-01-01"), new Date(0));
  assert.deepEqual(f("2000-02-29"), utc(2000, 2, 29));
  assert.deepEqual(f("1900-03-01"), utc(1900, 3, 1));
  assert.deepEqual(f("0050-06-15"), utc(50, 6, 15));
  assert.deepEqual(f("0001-01-01"), utc(1, 1, 1));
});

Deno.test("decoderFor: date with BC, 5+ digit years and infinity", () => {
  const f = dec(Oid.date);
  assert.deepEqual(f("0001-01-01 BC"), utc(0, 1, 1)); // 1 BC is year 0
  assert.deepEqual(f("0044-03-15 BC"), utc(-43, 3, 15));
  assert.deepEqual(f("4713-11-24 BC"), utc(-4712, 11, 24)); // PostgreSQL's minimum date
  assert.deepEqual(f("0001-02-29 BC"), utc(0, 2, 29)); // year 0 is a leap year
  assert.deepEqual(f("12345-01-01"), utc(12345, 1, 1));
  assert.deepEqual(f("275760-09-13"), new Date(8.64e15));
  assert.deepEqual(f("infinity"), new Date(8.64e15));
  assert.deepEqual(f("-infinity"), new Date(-8.64e15));
});

Deno.test("decoderFor: date calendar arithmetic agrees with Date over a wide range", () => {
  const f = dec(Oid.date);
  const pad = (n: number, width: number) => String(n).padStart(width, "0");
  const years = [-400, -100, 0, 1, 1600, 1700, 1900, 2000, 2100, 10000];
  for (let year = -4712; year <= 20000; year += 7) years.push(year);
  for (const year of years) {
    for (let month = 1; month <= 12; month++) {
      const leap = (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0;
      const last = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1];
      // The 1st exercises month starts; the last day exercises month lengths and leap years.
      for (const day of [1, last]) {
        const era = year <= 0 ? " BC" : "";
        const text = `${pad(year <= 0 ? 1 - year : year, 4)}-${pad(month, 2)}-${pad(day, 2)}${era}`;
        assert.equal((f(text) as Date).getTime(), utc(year, month, day).getTime(), text);
      }
    }
  }
});

Deno.test("decoderFor: timestamp is local time", () => {
  const f = dec(Oid.timestamp);
  assert.deepEqual(f("2020-01-02 03:04:05"), new Date(2020, 0, 2, 3, 4, 5));
  assert.deepEqual(f("2020-01-02 03:04:05"), new Date("2020-01-02 03:04:05"));
  assert.deepEqual(f("1999-12-31 23:59:59.999"), new Date(1999, 11, 31, 23, 59, 59, 999));
  assert.deepEqual(f("2020-07-15 12:00:00"), new Date(2020, 6, 15, 12));
  assert.deepEqual(f("0099-12-31 23:59:59"), local(99, 12, 31, 23, 59, 59));
  assert.deepEqual(f("0044-03-15 12:00:00 BC"), local(-43, 3, 15, 12));
  assert.deepEqual(f("0001-01-01 00:00:00 BC"), local(0, 1, 1));
  assert.deepEqual(f("12345-06-07 08:09:10.5"), local(12345, 6, 7, 8, 9, 10, 500));
  assert.deepEqual(f("infinity"), new Date(8.64e15));
  assert.deepEqual(f("-infinity"), new Date(-8.64e15));
});

Deno.test("decoderFor: fractional seconds with 1..6 digits (truncated to ms)", () => {
  const tz = dec(Oid.timestamptz);
  const ts = dec(Oid.timestamp);
  const cases: [string, number][] = [
    ["1", 100],
    ["12", 120],
    ["123", 123],
    ["1234", 123],
    ["12345", 123],
    ["123456", 123],
    ["999999", 999],
    ["000001", 0],
    ["05", 50],
  ];
  for (const [fraction, ms] of cases) {
    assert.deepEqual(
      tz(`2021-03-04 05:06:07.${fraction}+00`),
      new Date(Date.UTC(2021, 2, 4, 5, 6, 7, ms)),
      fraction,
    );
    assert.deepEqual(ts(`2021-03-04 05:06:07.${fraction}`), new Date(2021, 2, 4, 5, 6, 7, ms));
  }
});

Deno.test("decoderFor: timestamptz offsets", () => {
  const f = dec(Oid.timestamptz);
  assert.deepEqual(f("2020-01-02 03:04:05+00"), new Date("2020-01-02T03:04:05Z"));
  assert.deepEqual(f("2020-01-02 03:04:05+02"), new Date("2020-01-02T01:04:05Z"));
  assert.deepEqual(f("2020-01-02 03:04:05-07"), new Date("2020-01-02T10:04:05Z"));
  assert.deepEqual(f("2020-01-02 05:34:05+05:30"), new Date("2020-01-02T00:04:05Z"));
  assert.deepEqual(f("2019-12-31 20:30:00.1-03:30"), new Date("2020-01-01T00:00:00.100Z"));
  assert.deepEqual(f("2020-01-02 03:04:05.123456-09:30"), new Date("2020-01-02T12:34:05.123Z"));
  // Local mean time offsets have seconds.
  assert.deepEqual(f("1800-01-01 00:19:32+00:19:32"), new Date("1800-01-01T00:00:00Z"));
  assert.deepEqual(f("1800-01-01 00:00:00-04:56:02"), new Date("1800-01-01T04:56:02Z"));
  // Crossing midnight and year boundaries.
  assert.deepEqual(f("2021-01-01 01:00:00+14"), new Date("2020-12-31T11:00:00Z"));
  assert.deepEqual(f("2020-12-31 23:00:00-12"), new Date("2021-01-01T11:00:00Z"));
});

Deno.test("decoderFor: timestamptz with BC, large years and infinity", () => {
  const f = dec(Oid.timestamptz);
  assert.deepEqual(f("0044-03-15 12:19:32+00:19:32 BC"), utc(-43, 3, 15, 12));
  assert.deepEqual(f("0001-12-31 23:59:59.999+00 BC"), utc(0, 12, 31, 23, 59, 59, 999));
  assert.deepEqual(f("0001-01-01 00:00:00+00"), utc(1, 1, 1));
  assert.deepEqual(f("0099-01-01 00:00:00+00"), utc(99, 1, 1));
  assert.deepEqual(f("12345-01-01 02:02:03.5+01"), utc(12345, 1, 1, 1, 2, 3, 500));
  assert.deepEqual(f("infinity"), new Date(8.64e15));
  assert.deepEqual(f("-infinity"), new Date(-8.64e15));
});

Deno.test("decoderFor: malformed date/time text gives an Invalid Date", () => {
  for (const text of ["", "20-01-01", "2020/01/02", "2020-01-02 03-04-05+00"]) {
    assert.ok(Number.isNaN((dec(Oid.timestamptz)(text) as Date).getTime()), text);
  }
});

// ---------------------------------------------------------------------------------------
// array literals

Deno.test("parseArrayLiteral: flat arrays without a decoder", () => {
  assert.deepEqual(parseArrayLiteral("{}", null), []);
  assert.deepEqual(parseArrayLiteral("{a}", null), ["a"]);
  assert.deepEqual(parseArrayLiteral("{a,b,c}", null), ["a", "b", "c"]);
  assert.deepEqual(parseArrayLiteral('{"a b","",c}', null), ["a b", "", "c"]);
});

Deno.test("parseArrayLiteral: NULL keyword vs quoted string", () => {
  assert.deepEqual(parseArrayLiteral('{NULL,"NULL",null,"null",NULLx}', null), [
    null,
    "NULL",
    null,
    "null",
    "NULLx",
  ]);
  const int = dec(Oid.int4);
  assert.deepEqual(parseArrayLiteral("{1,NULL,3}", int), [1, null, 3]);
});

Deno.test("parseArrayLiteral: escapes inside quotes", () => {
  assert.deepEqual(parseArrayLiteral('{"x\\"y\\\\z","\\\\","\\""}', null), [
    'x"y\\z',
    "\\",
    '"',
  ]);
  assert.deepEqual(parseArrayLiteral('{"a,b","{c}","d}e","\\a"}', null), [
    "a,b",
    "{c}",
    "d}e",
    "a",
  ]);
});

Deno.test("parseArrayLiteral: escapes and whitespace outside quotes (array_in input)", () => {
  assert.deepEqual(parseArrayLiteral("{ 1 , 2 }", null), ["1", "2"]);
  assert.deepEqual(parseArrayLiteral("{a\\,b,c\\ }", null), ["a,b", "c "]);
  assert.deepEqual(parseArrayLiteral("{ NULL }", null), [null]);
});

Deno.test("parseArrayLiteral: multi-dimensional", () => {
  const int = dec(Oid.int4);
  assert.deepEqual(parseArrayLiteral("{{1,2},{3,4}}", int), [[1, 2], [3, 4]]);
  assert.deepEqual(parseArrayLiteral("{{{1},{2}},{{3},{NULL}}}", int), [[[1], [2]], [[3], [null]]]);
  assert.deepEqual(parseArrayLiteral('{{"a b",NULL},{"",c}}', null), [["a b", null], ["", "c"]]);
});

Deno.test("parseArrayLiteral: dimension decoration is skipped", () => {
  const int = dec(Oid.int4);
  assert.deepEqual(parseArrayLiteral("[0:1]={1,2}", int), [1, 2]);
  assert.deepEqual(parseArrayLiteral("[-2:-1][1:2]={{1,2},{3,4}}", int), [[1, 2], [3, 4]]);
});

Deno.test("parseArrayLiteral: custom delimiter (box)", () => {
  assert.deepEqual(parseArrayLiteral("{(1,1),(0,0);(2,2),(1,1)}", null, ";"), [
    "(1,1),(0,0)",
    "(2,2),(1,1)",
  ]);
  assert.deepEqual(dec(Oid.boxArray)("{(1,1),(0,0);(2,2),(1,1)}"), [
    "(1,1),(0,0)",
    "(2,2),(1,1)",
  ]);
});

Deno.test("parseArrayLiteral: malformed input throws instead of looping", () => {
  for (const text of ["", "1,2", "{1,2", '{"abc}', "{{1}", "[1:2]{1,2}", '{a"b}']) {
    assert.throws(() => parseArrayLiteral(text, null), SyntaxError, text);
  }
});

Deno.test("array decoders: every array OID has a decoder", () => {
  for (const array of Object.keys(elementOf)) {
    assert.equal(typeof decoderFor(Number(array), plain), "function", array);
    assert.deepEqual(dec(Number(array))("{}"), []);
  }
});

Deno.test("array decoders: scalars", () => {
  assert.deepEqual(dec(Oid.boolArray)("{t,f,NULL}"), [true, false, null]);
  assert.deepEqual(dec(Oid.int2Array)("{1,-2}"), [1, -2]);
  assert.deepEqual(dec(Oid.oidArray)("{26,4294967295}"), [26, 4294967295]);
  assert.deepEqual(dec(Oid.float8Array)("{1.5,NaN,Infinity,-Infinity}"), [
    1.5,
    NaN,
    Infinity,
    -Infinity,
  ]);
  assert.deepEqual(dec(Oid.int8Array)("{1,9223372036854775807}"), ["1", "9223372036854775807"]);
  assert.deepEqual(dec(Oid.int8Array, big)("{1,NULL,-9223372036854775808}"), [
    1n,
    null,
    -9223372036854775808n,
  ]);
  assert.deepEqual(dec(Oid.numericArray)("{1.50,NaN}"), ["1.50", "NaN"]);
  assert.deepEqual(dec(Oid.textArray)('{"a b","NULL",NULL,"","x\\"y\\\\z","{}"}'), [
    "a b",
    "NULL",
    null,
    "",
    'x"y\\z',
    "{}",
  ]);
  assert.deepEqual(dec(Oid.uuidArray)("{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}"), [
    "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
  ]);
});

Deno.test("array decoders: bytea, dates and json", () => {
  assert.deepEqual(dec(Oid.byteaArray)('{"\\\\x0102",NULL,"\\\\x"}'), [
    Buffer.from([1, 2]),
    null,
    Buffer.alloc(0),
  ]);
  assert.deepEqual(dec(Oid.dateArray)("{2020-01-01,infinity,NULL}"), [
    new Date("2020-01-01"),
    new Date(8.64e15),
    null,
  ]);
  assert.deepEqual(dec(Oid.dateArray)('{"0044-03-15 BC"}'), [utc(-43, 3, 15)]);
  assert.deepEqual(dec(Oid.timestamptzArray)('{"2019-12-31 20:30:00-03:30",-infinity}'), [
    new Date("2020-01-01T00:00:00Z"),
    new Date(-8.64e15),
  ]);
  assert.deepEqual(dec(Oid.timestampArray)('{"2020-01-02 03:04:05.5"}'), [
    new Date(2020, 0, 2, 3, 4, 5, 500),
  ]);
  assert.deepEqual(dec(Oid.jsonArray)('{"{\\"a\\":1}",[1],NULL,"\\"s\\""}'), [
    { a: 1 },
    [1],
    null,
    "s",
  ]);
  assert.deepEqual(dec(Oid.jsonbArray)('{{"{\\"a\\": [1, 2]}",null}}'), [[{ a: [1, 2] }, null]]);
});

// ---------------------------------------------------------------------------------------
// serialize

Deno.test("serialize: primitives", () => {
  assert.equal(serialize(null), null);
  assert.equal(serialize("hello"), "hello");
  assert.equal(serialize(""), "");
  assert.equal(serialize(42), "42");
  assert.equal(serialize(-1.5), "-1.5");
  assert.equal(serialize(NaN), "NaN");
  assert.equal(serialize(Infinity), "Infinity");
  assert.equal(serialize(-Infinity), "-Infinity");
  assert.equal(serialize(-0), "-0");
  assert.equal(serialize(0), "0");
  assert.equal(serialize(12345678901234567890n), "12345678901234567890");
  assert.equal(serialize(-5n), "-5");
  assert.equal(serialize(true), "t");
  assert.equal(serialize(false), "f");
});

Deno.test("serialize: dates", () => {
  assert.equal(serialize(new Date("2020-01-02T03:04:05.678Z")), "2020-01-02T03:04:05.678Z");
  assert.equal(serialize(new Date(0)), "1970-01-01T00:00:00.000Z");
  assert.equal(serialize(new Date(8.64e15)), "infinity");
  assert.equal(serialize(new Date(-8.64e15)), "-infinity");
  assert.equal(serialize(utc(1, 1, 1)), "0001-01-01T00:00:00.000Z");
  assert.equal(serialize(utc(9999, 12, 31, 23, 59, 59, 999)), "9999-12-31T23:59:59.999Z");
  // Outside 1..9999 toISOString() would give "+012345-…" / "-000043-…", which the server
  // rejects; the server reads plain long years and the BC suffix.
  assert.equal(serialize(utc(12345, 1, 1, 1, 2, 3, 500)), "12345-01-01T01:02:03.500Z");
  assert.equal(serialize(utc(0, 12, 31, 23, 59, 59)), "0001-12-31T23:59:59.000Z BC");
  assert.equal(serialize(utc(-43, 3, 15, 12)), "0044-03-15T12:00:00.000Z BC");
});

Deno.test("serialize: invalid Date throws ParameterError INVALID_DATE", () => {
  assert.throws(() => serialize(new Date(NaN)), (e: unknown) => {
    assert.ok(e instanceof ParameterError);
    assert.ok(e instanceof TypeError);
    assert.equal(e.code, "INVALID_DATE");
    return true;
  });
});

Deno.test("serialize: bytea hex", () => {
  assert.equal(serialize(new Uint8Array(0)), "\\x");
  assert.equal(serialize(new Uint8Array([0, 1, 10, 15, 16, 127, 128, 255])), "\\x00010a0f107f80ff");
  const big = new Uint8Array(1000).map((_, i) => i & 255);
  assert.deepEqual(dec(Oid.bytea)(serialize(big)!), Buffer.from(big));
  // A view into a larger buffer serialises only its own bytes.
  const view = new Uint8Array([9, 1, 2, 9]).subarray(1, 3);
  assert.equal(serialize(view), "\\x0102");
});

Deno.test("serialize: objects become JSON", () => {
  assert.equal(serialize({ a: 1, b: [true, null], c: "x" }), '{"a":1,"b":[true,null],"c":"x"}');
  assert.equal(serialize({}), "{}");
  // JSON.stringify would turn these into "{}": they are refused instead.
  for (
    const v of [
      new Map(),
      new Set(),
      new ArrayBuffer(2),
      new Uint16Array(2),
      new DataView(new ArrayBuffer(1)),
    ]
  ) {
    assert.throws(
      () => serialize(v),
      (e: unknown) => e instanceof ParameterError && e.code === "UNSUPPORTED_TYPE",
    );
  }
  assert.equal(serialize({ toJSON: () => "custom" }), '"custom"');
});

Deno.test("serialize: undefined throws ParameterError UNDEFINED_VALUE", () => {
  assert.throws(() => serialize(undefined), (e: unknown) => {
    assert.ok(e instanceof ParameterError);
    assert.ok(e instanceof TypeError);
    assert.equal(e.code, "UNDEFINED_VALUE");
    assert.equal(e.name, "ParameterError");
    return true;
  });
  assert.throws(
    () => serialize([1, undefined]),
    (e: unknown) => e instanceof ParameterError && e.code === "UNDEFINED_VALUE",
  );
  // A hole in a sparse array reads as undefined too.
  assert.throws(
    // deno-lint-ignore no-sparse-arrays
    () => serialize([1, , 3]),
    (e: unknown) => e instanceof ParameterError && e.code === "UNDEFINED_VALUE",
  );
});

Deno.test("serialize: functions and symbols throw ParameterError UNSUPPORTED_TYPE", () => {
  for (const value of [() => 1, Symbol("s"), { toJSON: () => undefined }]) {
    assert.throws(
      () => serialize(value),
      (e: unknown) => e instanceof ParameterError && e.code === "UNSUPPORTED_TYPE",
    );
  }
});

Deno.test("serialize: arrays of plain elements", () => {
  assert.equal(serialize([]), "{}");
  assert.equal(serialize([1, 2, 3]), "{1,2,3}");
  assert.equal(serialize([1.5, NaN, -Infinity]), "{1.5,NaN,-Infinity}");
  assert.equal(serialize([1n, -2n]), "{1,-2}");
  assert.equal(serialize([true, false, null]), "{t,f,NULL}");
  assert.equal(serialize(["a", "b"]), "{a,b}");
  assert.equal(serialize([null]), "{NULL}");
});

Deno.test("serialize: array element quoting rules", () => {
  const cases: [string, string][] = [
    ["", '""'],
    ["NULL", '"NULL"'],
    ["null", '"null"'],
    ["NuLl", '"NuLl"'],
    ["NULLS", "NULLS"],
    ["a b", '"a b"'],
    ["a\tb", '"a\tb"'],
    ["a\nb", '"a\nb"'],
    ["a\rb", '"a\rb"'],
    ["a,b", '"a,b"'],
    ["{a}", '"{a}"'],
    ["a}", '"a}"'],
    ['a"b', '"a\\"b"'],
    ["a\\b", '"a\\\\b"'],
    ['"', '"\\""'],
    ["\\", '"\\\\"'],
    ['\\"x y"', '"\\\\\\"x y\\""'],
    ["plain", "plain"],
    ["(1,2)", '"(1,2)"'],
    ["ünï©ødé", "ünï©ødé"],
  ];
  for (const [input, quoted] of cases) {
    assert.equal(serialize([input]), `{${quoted}}`, JSON.stringify(input));
  }
});

Deno.test("serialize: nested arrays", () => {
  assert.equal(serialize([[1, 2], [3, 4]]), "{{1,2},{3,4}}");
  assert.equal(serialize([[[1], [null]], [[3], [4]]]), "{{{1},{NULL}},{{3},{4}}}");
  assert.equal(serialize([["a b", null], ["", "c"]]), '{{"a b",NULL},{"",c}}');
});

Deno.test("serialize: dates, bytea and objects inside arrays", () => {
  assert.equal(
    serialize([new Date("2020-01-02T03:04:05.678Z"), null, new Date(8.64e15)]),
    "{2020-01-02T03:04:05.678Z,NULL,infinity}",
  );
  assert.equal(serialize([utc(-43, 3, 15)]), '{"0044-03-15T00:00:00.000Z BC"}');
  assert.equal(serialize([new Uint8Array([1, 2]), new Uint8Array(0)]), '{"\\\\x0102","\\\\x"}');
  assert.equal(serialize([{ a: "b c" }, [1]]), '{"{\\"a\\":\\"b c\\"}",{1}}');
  assert.throws(
    () => serialize([new Date("nope")]),
    (e: unknown) => e instanceof ParameterError && e.code === "INVALID_DATE",
  );
});

// ---------------------------------------------------------------------------------------
// inferOid

Deno.test("inferOid: scalars", () => {
  assert.equal(inferOid("x"), 0);
  assert.equal(inferOid(1), 0);
  assert.equal(inferOid(1.5), 0);
  assert.equal(inferOid(1n), Oid.int8);
  assert.equal(inferOid(true), Oid.bool);
  assert.equal(inferOid(new Date()), Oid.timestamptz);
  assert.equal(inferOid(new Uint8Array(1)), Oid.bytea);
  assert.equal(inferOid(null), 0);
  assert.equal(inferOid(undefined), 0);
  assert.equal(inferOid({ a: 1 }), 0);
});

Deno.test("inferOid: arrays follow their first non-null element", () => {
  assert.equal(inferOid([]), 0);
  assert.equal(inferOid([null, null]), 0);
  assert.equal(inferOid(["a"]), 0);
  assert.equal(inferOid([1, 2]), 0);
  assert.equal(inferOid([null, 1n]), Oid.int8Array);
  assert.equal(inferOid([false]), Oid.boolArray);
  assert.equal(inferOid([new Date()]), Oid.timestamptzArray);
  assert.equal(inferOid([new Uint8Array(0)]), Oid.byteaArray);
  assert.equal(inferOid([{ a: 1 }]), 0);
  assert.equal(inferOid([[null], [], [true, false]]), Oid.boolArray);
  assert.equal(inferOid([[1n, 2n], [3n, 4n]]), Oid.int8Array);
});

// ---------------------------------------------------------------------------------------
// round trips

Deno.test("round trip: text[] with special characters", () => {
  const values = [
    "plain",
    "",
    "NULL",
    "null",
    "a b",
    " leading",
    "trailing ",
    "a,b",
    "{braces}",
    "}",
    '"quoted"',
    "back\\slash",
    "\\",
    '\\"',
    "tab\there",
    "new\nline",
    "ünï©ødé 🐘",
    null,
  ];
  const textArray = dec(Oid.textArray);
  assert.deepEqual(textArray(serialize(values)!), values);
  const nested = [values.slice(0, 9), values.slice(9, 18)];
  assert.deepEqual(textArray(serialize(nested)!), nested);
});

Deno.test("round trip: typed arrays", () => {
  const ints = [1, -2, null, 2147483647];
  assert.deepEqual(dec(Oid.int4Array)(serialize(ints)!), ints);
  const bigints = [1n, null, -9223372036854775808n];
  assert.deepEqual(dec(Oid.int8Array, big)(serialize(bigints)!), bigints);
  const bools = [[true, false], [null, true]];
  assert.deepEqual(dec(Oid.boolArray)(serialize(bools)!), bools);
  const bytes = [Buffer.from([0, 255, 34, 92]), null];
  assert.deepEqual(dec(Oid.byteaArray)(serialize(bytes)!), bytes);
  // Nested JS arrays are always extra dimensions, so JSON elements here are objects only.
  const json = [{ a: 'x"y\\z', b: [1, "two"] }, { c: null }, null];
  assert.deepEqual(dec(Oid.jsonbArray)(serialize(json)!), json);
});

Deno.test("round trip: infinite dates", () => {
  const dates = [new Date(8.64e15), new Date(-8.64e15), null];
  assert.deepEqual(dec(Oid.timestamptzArray)(serialize(dates)!), dates);
  assert.deepEqual(dec(Oid.timestamptz)(serialize(dates[0])!), dates[0]);
  assert.deepEqual(dec(Oid.date)(serialize(dates[1])!), dates[1]);
});

Deno.test("byte decoders equal the string decoders for bool, int2, int4 and oid", async () => {
  const { byteDecoderFor } = await import("../src/types/byte_decoders.ts");
  const { decoderFor } = await import("../src/types/text_decoders.ts");
  const enc = new TextEncoder();
  const cases: [number, string[]][] = [
    [16, ["t", "f"]],
    [21, ["0", "-1", "32767", "-32768", "42"]],
    [23, ["0", "2147483647", "-2147483648", "-7", "1000000"]],
    [26, ["0", "4294967295", "16384", "2147483648"]],
  ];
  for (const [oid, texts] of cases) {
    const direct = byteDecoderFor(oid)!;
    const viaString = decoderFor(oid, { bigint: false })!;
    for (const t of texts) {
      const bytes = enc.encode(`xx${t}yy`); // decoded in place, within a larger buffer
      assert.equal(direct(bytes, 2, 2 + t.length), viaString(t), `oid ${oid}: ${t}`);
    }
  }
  assert.ok(Number.isNaN(byteDecoderFor(23)!(enc.encode("1x"), 0, 2) as number));
  assert.equal(byteDecoderFor(25), null);
});
