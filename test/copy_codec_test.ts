// Unit tests for the bulk COPY codecs: binary encoders (bytes out), COPY decoders (bytes in) and
// the framing of both COPY formats. No server needed; test/bulk_copy_test.ts checks the same
// types against a real one.
import assert from "node:assert/strict";
import { Writer } from "../src/protocol/writer.ts";
import { ProtocolViolation } from "../src/protocol/backend.ts";
import {
  arrayEncoder,
  type BinaryEncoder,
  binaryEncoderFor,
  EncodeError,
} from "../src/types/binary_encoders.ts";
import { copyDecoderFor } from "../src/types/copy_decoders.ts";
import {
  BinaryCopyReader,
  TextCopyReader,
  writeBinaryHeader,
  writeBinaryTrailer,
  writeTextField,
} from "../src/copy/copy_format.ts";
import { Parameter } from "../src/types/encode.ts";
import { Oid } from "../src/types/oids.ts";
import { text } from "../src/types/utf8_text.ts";

const plain = { bigint: false };

function enc(oid: number): BinaryEncoder {
  const e = binaryEncoderFor(oid);
  assert.ok(e, `no encoder for ${oid}`);
  return e;
}

/** The field `oid`'s encoder writes for `value` (length prefix included). */
function field(oid: number, value: unknown): number[] {
  const w = new Writer(4);
  enc(oid)(w, value);
  return [...w.buf.subarray(0, w.length)];
}

/** Encodes then decodes one value through its type's binary form. */
function roundTrip(oid: number, value: unknown, opts = plain): unknown {
  const w = new Writer(4);
  const e = elementEncoder(oid);
  e(w, value);
  const len = new DataView(w.buf.buffer).getInt32(0);
  assert.equal(len, w.length - 4, "the length prefix counts the bytes after it");
  const d = copyDecoderFor(oid, opts);
  assert.ok(d, `no decoder for ${oid}`);
  return d(w.buf, 4, w.length);
}

const ARRAYS: Record<number, number> = {
  [Oid.int4Array]: Oid.int4,
  [Oid.textArray]: Oid.text,
  [Oid.numericArray]: Oid.numeric,
  [Oid.jsonbArray]: Oid.jsonb,
  [Oid.timestamptzArray]: Oid.timestamptz,
  [Oid.boolArray]: Oid.bool,
};

function elementEncoder(oid: number): BinaryEncoder {
  const element = ARRAYS[oid];
  return element === undefined ? enc(oid) : arrayEncoder(element, enc(element), undefined);
}

const be32 = (n: number) => [(n >>> 24) & 255, (n >>> 16) & 255, (n >>> 8) & 255, n & 255];

/** A numeric field's bytes (length prefix included) from its header and base-10000 digits. */
function numeric(ndigits: number, weight: number, sign: number, dscale: number, ...d: number[]) {
  const h = [ndigits, weight, sign, dscale, ...d].flatMap((x) => [(x >> 8) & 255, x & 255]);
  return [...be32(h.length), ...h];
}

Deno.test("binary encoders: integers, floats and bool as their exact bytes", () => {
  assert.deepEqual(field(Oid.int2, -2), [0, 0, 0, 2, 0xff, 0xfe]);
  assert.deepEqual(field(Oid.int4, 42), [0, 0, 0, 4, 0, 0, 0, 42]);
  assert.deepEqual(field(Oid.int4, 7n), [0, 0, 0, 4, 0, 0, 0, 7]);
  assert.deepEqual(field(Oid.int8, -1), [0, 0, 0, 8, ...Array(8).fill(0xff)]);
  assert.deepEqual(field(Oid.int8, 2 ** 40 + 5), [0, 0, 0, 8, 0, 0, 1, 0, 0, 0, 0, 5]);
  assert.deepEqual(
    field(Oid.int8, 9223372036854775807n),
    [0, 0, 0, 8, 0x7f, ...Array(7).fill(0xff)],
  );
  assert.deepEqual(field(Oid.int8, "-9223372036854775808"), [
    0,
    0,
    0,
    8,
    0x80,
    ...Array(7).fill(0),
  ]);
  assert.deepEqual(field(Oid.int8, "123"), [0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 123]);
  assert.deepEqual(field(Oid.float8, 1.5), [0, 0, 0, 8, 0x3f, 0xf8, 0, 0, 0, 0, 0, 0]);
  assert.deepEqual(field(Oid.float4, 1.5), [0, 0, 0, 4, 0x3f, 0xc0, 0, 0]);
  assert.deepEqual(field(Oid.bool, true), [0, 0, 0, 1, 1]);
  assert.deepEqual(field(Oid.oid, 4294967295), [0, 0, 0, 4, 0xff, 0xff, 0xff, 0xff]);
});

Deno.test("binary encoders: text, bytea, json, jsonb and uuid", () => {
  assert.deepEqual(field(Oid.text, "hé"), [0, 0, 0, 3, 0x68, 0xc3, 0xa9]);
  assert.deepEqual(field(Oid.varchar, 12), [0, 0, 0, 2, 0x31, 0x32]);
  assert.deepEqual(field(Oid.bytea, new Uint8Array([1, 2])), [0, 0, 0, 2, 1, 2]);
  const json = [...new TextEncoder().encode('{"a":1}')];
  assert.deepEqual(field(Oid.json, { a: 1 }), [0, 0, 0, 7, ...json]);
  assert.deepEqual(field(Oid.jsonb, { a: 1 }), [0, 0, 0, 8, 1, ...json]);
  assert.deepEqual(field(Oid.jsonb, '{"a":1}'), [0, 0, 0, 8, 1, ...json], "a string is JSON text");
  const quoted = [...new TextEncoder().encode('"x"')];
  assert.deepEqual(field(Oid.jsonb, new Parameter("x", Oid.jsonb)), [0, 0, 0, 4, 1, ...quoted]);
  const uuid = [0xa0, 0xee, 0xbc, 0x99, 0x9c, 0x0b, 0x4e, 0xf8, 0xbb, 0x6d, 0x6b, 0xb9, 0xbd, 0x38];
  const bytes = [0, 0, 0, 16, ...uuid, 0x0a, 0x11];
  assert.deepEqual(field(Oid.uuid, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"), bytes);
  assert.deepEqual(field(Oid.uuid, "A0EEBC999C0B4EF8BB6D6BB9BD380A11"), bytes);
  assert.deepEqual(field(Oid.uuid, "{a0eebc99-9c0b4ef8-bb6d6bb9-bd380a11}"), bytes);
  for (
    const bad of [
      "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a1",
      "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a111",
      "x",
    ]
  ) {
    assert.throws(() => field(Oid.uuid, bad), EncodeError, bad);
  }
});

Deno.test("binary encoders: numeric digits, weight, sign and display scale as numeric_in keeps them", () => {
  assert.deepEqual(field(Oid.numeric, "123.45"), numeric(2, 0, 0, 2, 123, 4500));
  assert.deepEqual(field(Oid.numeric, "-0.001"), numeric(1, -1, 0x4000, 3, 10));
  assert.deepEqual(field(Oid.numeric, "1e3"), numeric(1, 0, 0, 0, 1000));
  assert.deepEqual(field(Oid.numeric, "10000"), numeric(1, 1, 0, 0, 1));
  assert.deepEqual(field(Oid.numeric, "0.00"), numeric(0, 0, 0, 2));
  assert.deepEqual(field(Oid.numeric, "-0"), numeric(0, 0, 0, 0), "numeric has no negative zero");
  assert.deepEqual(field(Oid.numeric, "1.50E-2"), numeric(1, -1, 0, 4, 150));
  assert.deepEqual(field(Oid.numeric, NaN), numeric(0, 0, 0xc000, 0));
  assert.deepEqual(field(Oid.numeric, -Infinity), numeric(0, 0, 0xf000, 0));
  assert.deepEqual(
    field(Oid.numeric, 12345678901234567890n),
    numeric(5, 4, 0, 0, 1234, 5678, 9012, 3456, 7890),
  );
  for (const bad of ["", "1.2.3", "abc", "1e", "--1", "1e99999999"]) {
    assert.throws(() => field(Oid.numeric, bad), EncodeError, bad);
  }
});

Deno.test("binary round trip: numeric text comes back as numeric_out writes it", () => {
  const cases: [unknown, string][] = [
    ["123.45", "123.45"],
    ["-0.001", "-0.001"],
    ["1e3", "1000"],
    ["0.00", "0.00"],
    ["000123.4500", "123.4500"],
    ["-12345678901234567890.000000000000000000001", "-12345678901234567890.000000000000000000001"],
    [0.1, "0.1"],
    [1e21, "1000000000000000000000"],
    [1.5e-7, "0.00000015"],
    [12345678901234567890n, "12345678901234567890"],
    ["NaN", "NaN"],
    [Infinity, "Infinity"],
  ];
  for (const [value, text] of cases) assert.equal(roundTrip(Oid.numeric, value), text, `${value}`);
});

Deno.test("binary round trip: random decimals keep every digit and their scale", () => {
  let seed = 12345;
  const rand = (n: number) => (seed = (seed * 1103515245 + 12345) % 2147483648) % n;
  const digits = (n: number) => Array.from({ length: n }, () => rand(10)).join("");
  for (let i = 0; i < 2000; i++) {
    const int = digits(rand(25));
    const frac = digits(rand(25));
    const negative = rand(2) === 1;
    const text = `${negative ? "-" : ""}${int}${frac ? "." + frac : ""}`;
    if (int === "" && frac === "") continue;
    const intPart = int.replace(/^0+/, "") || "0";
    const zero = /^0*$/.test(int + frac);
    const expected = `${negative && !zero ? "-" : ""}${intPart}${frac ? "." + frac : ""}`;
    assert.equal(roundTrip(Oid.numeric, text), expected, text);
  }
});

Deno.test("binary round trip: every scalar type decodes to what it was given", () => {
  const d = new Date(Date.UTC(2024, 1, 29, 12, 34, 56, 789));
  assert.equal(roundTrip(Oid.int8, "-9223372036854775808"), "-9223372036854775808");
  assert.equal(roundTrip(Oid.int8, 2 ** 53 + 2), "9007199254740994");
  assert.equal(roundTrip(Oid.int8, -(2 ** 40)), String(-(2 ** 40)));
  assert.equal(roundTrip(Oid.int8, 5, { bigint: true }), 5n);
  assert.equal(roundTrip(Oid.int8, "9223372036854775807", { bigint: true }), 9223372036854775807n);
  assert.equal(roundTrip(Oid.int2, -32768), -32768);
  assert.equal(roundTrip(Oid.int4, 2147483647), 2147483647);
  assert.equal(roundTrip(Oid.float8, -0), -0);
  assert.equal(roundTrip(Oid.float8, 0.1 + 0.2), 0.1 + 0.2);
  assert.ok(Number.isNaN(roundTrip(Oid.float8, NaN)));
  assert.equal(
    roundTrip(Oid.float4, 1.1),
    1.1,
    "float4: the shortest decimal, as float4out prints",
  );
  assert.equal(roundTrip(Oid.float4, 3.4028234663852886e38), 3.4028235e38);
  assert.equal(roundTrip(Oid.float4, 1e-40), 1e-40);
  assert.equal(roundTrip(Oid.bool, false), false);
  assert.equal(roundTrip(Oid.text, "päivää ✓ 😀"), "päivää ✓ 😀");
  assert.equal(roundTrip(Oid.text, "x".repeat(5000)), "x".repeat(5000));
  assert.deepEqual([...roundTrip(Oid.bytea, new Uint8Array([0, 255])) as Uint8Array], [0, 255]);
  assert.deepEqual(roundTrip(Oid.jsonb, { a: [1, "b", null] }), { a: [1, "b", null] });
  assert.deepEqual(roundTrip(Oid.json, [1, 2]), [1, 2]);
  assert.equal(
    roundTrip(Oid.uuid, "A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11"),
    "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
  );
  assert.deepEqual(roundTrip(Oid.timestamptz, d), d);
  assert.deepEqual(
    roundTrip(Oid.timestamptz, new Date(-62198755200000)),
    new Date(-62198755200000),
  );
  assert.deepEqual(roundTrip(Oid.timestamptz, new Date(8.64e15)), new Date(8.64e15), "infinity");
  assert.deepEqual(roundTrip(Oid.timestamp, d), d, "timestamp: the local wall clock, both ways");
  assert.deepEqual(roundTrip(Oid.date, d), new Date(Date.UTC(2024, 1, 29)), "date: the UTC day");
  assert.deepEqual(
    roundTrip(Oid.date, new Date(Date.UTC(1999, 11, 31, 23))),
    new Date(Date.UTC(1999, 11, 31)),
  );
  assert.deepEqual(roundTrip(Oid.date, new Date(-8.64e15)), new Date(-8.64e15), "-infinity");
});

Deno.test("binary round trip: arrays of one and more dimensions, nulls and empties", () => {
  assert.deepEqual(roundTrip(Oid.int4Array, [1, null, 3]), [1, null, 3]);
  assert.deepEqual(roundTrip(Oid.int4Array, [[1, 2], [3, 4], [5, 6]]), [[1, 2], [3, 4], [5, 6]]);
  assert.deepEqual(roundTrip(Oid.int4Array, []), []);
  assert.deepEqual(roundTrip(Oid.int4Array, [[], []]), []);
  assert.deepEqual(roundTrip(Oid.textArray, ["a", "", null, "é,}"]), ["a", "", null, "é,}"]);
  assert.deepEqual(roundTrip(Oid.numericArray, ["1.50", 2]), ["1.50", "2"]);
  assert.deepEqual(roundTrip(Oid.jsonbArray, [{ a: 1 }, "[]"]), [{ a: 1 }, []]);
  assert.deepEqual(roundTrip(Oid.boolArray, [[true], [false]]), [[true], [false]]);
  const t = new Date(0);
  assert.deepEqual(roundTrip(Oid.timestamptzArray, [t, null]), [t, null]);
  const w = new Writer(4);
  const ints = arrayEncoder(Oid.int4, enc(Oid.int4), undefined);
  for (const ragged of [[[1, 2], [3]], [[1], 2], [1, [2]], [[], [1]]]) {
    assert.throws(() => ints(w, ragged), /rectangular/, JSON.stringify(ragged));
  }
  assert.throws(
    () => ints(w, [1, undefined]),
    (e) => e instanceof EncodeError && e.code === "UNDEFINED_VALUE",
  );
  assert.throws(() => ints(w, [1, "2"]), /element 1: expected an integer/);
  const nulls = arrayEncoder(Oid.int4, enc(Oid.int4), null); // transform.undefined = null
  const w2 = new Writer(4);
  nulls(w2, [undefined]);
  assert.deepEqual(copyDecoderFor(Oid.int4Array, plain)!(w2.buf, 4, w2.length), [null]);
});

Deno.test("binary encoders: a value of the wrong kind is refused with what was expected", () => {
  const refused = (oid: number, value: unknown, pattern: RegExp) =>
    assert.throws(
      () => field(oid, value),
      (e) => e instanceof EncodeError && e.code === "INVALID_VALUE" && pattern.test(e.message),
      `${oid} ${String(value)}`,
    );
  refused(Oid.int4, "abc", /expected an integer .* got "abc"/);
  refused(Oid.int4, "12", /expected an integer/); // int4 takes numbers; strings are int8's form
  refused(Oid.int4, 1.5, /expected an integer/);
  refused(Oid.int4, 2 ** 31, /int4's range/);
  refused(Oid.int2, 40000n, /int2's range/);
  refused(Oid.int8, 2 ** 64, /int8's range/);
  refused(Oid.int8, "12a", /int8/);
  refused(Oid.int8, "9223372036854775808", /int8's range/);
  refused(Oid.float8, "1.5", /expected a number/);
  refused(Oid.float4, 1e39, /float4's range/);
  refused(Oid.float4, 1e-50, /float4's range/);
  refused(Oid.bool, 1, /expected a boolean/);
  refused(Oid.text, {}, /expected a string/);
  refused(Oid.bytea, "\\x00", /expected a Uint8Array/);
  refused(Oid.timestamptz, "2020-01-01", /expected a valid Date/);
  refused(Oid.date, new Date(NaN), /expected a valid Date/);
  refused(Oid.jsonb, { toJSON: () => undefined }, /JSON representation/);
  refused(Oid.numeric, { x: 1 }, /decimal number/);
  assert.deepEqual(field(Oid.int4, new Parameter(3, Oid.int4)), [0, 0, 0, 4, 0, 0, 0, 3]);
  assert.deepEqual(field(Oid.int4, new Parameter(null, Oid.int4)), [0xff, 0xff, 0xff, 0xff]);
});

/** A binary COPY stream of `rows` (arrays of int4 or null). */
function binaryStream(rows: (number | null)[][]): Uint8Array {
  const w = new Writer(4);
  writeBinaryHeader(w);
  for (const row of rows) {
    w.i16(row.length);
    for (const v of row) {
      if (v === null) w.i32(-1);
      else enc(Oid.int4)(w, v);
    }
  }
  writeBinaryTrailer(w);
  return w.buf.slice(0, w.length);
}

Deno.test("binary COPY reader: rows cut at any byte still come out whole", () => {
  const rows = [[1, null], [2, 3], [null, null]];
  const stream = binaryStream(rows);
  for (let size = 1; size <= stream.length; size++) {
    const out: unknown[][] = [];
    const reader = new BinaryCopyReader(2, (buf, fields) => {
      out.push(
        [0, 1].map((i) =>
          fields[2 * i] === -1
            ? null
            : copyDecoderFor(Oid.int4, plain)!(buf, fields[2 * i], fields[2 * i + 1])
        ),
      );
    });
    for (let at = 0; at < stream.length; at += size) {
      // Each piece sits in a bigger buffer at an offset, as CopyData bodies do in the read buffer.
      const piece = stream.subarray(at, Math.min(at + size, stream.length));
      const host = new Uint8Array(piece.length + 10);
      host.set(piece, 5);
      reader.feed(host, 5, 5 + piece.length);
    }
    assert.deepEqual(out, rows, `pieces of ${size}`);
    assert.ok(reader.ended && !reader.partial);
  }
});

Deno.test("binary COPY reader: malformed data is a protocol violation", () => {
  const bad = (bytes: Uint8Array, columns = 2) =>
    assert.throws(
      () => new BinaryCopyReader(columns, () => {}).feed(bytes, 0, bytes.length),
      ProtocolViolation,
    );
  const good = binaryStream([[1, 2]]);
  const wrongSignature = good.slice();
  wrongSignature[0] = 0;
  bad(wrongSignature);
  bad(good, 3); // two fields where three were expected
  const afterTrailer = new Uint8Array([...good, 0, 2]);
  bad(afterTrailer);
});

Deno.test("text COPY: fields are escaped one way and unescaped the other", () => {
  const w = new Writer(4);
  writeTextField(w, "a\tb\nc\\d\re");
  w.u8(9);
  writeTextField(w, null);
  w.u8(9);
  writeTextField(w, "plain é");
  w.u8(10);
  const line = new TextDecoder().decode(w.buf.subarray(0, w.length));
  assert.equal(line, "a\\tb\\nc\\\\d\\re\t\\N\tplain é\n");
  const rows: (string | null)[][] = [];
  const reader = new TextCopyReader(3, (values) => rows.push(values));
  const bytes = w.buf.subarray(0, w.length);
  reader.feed(bytes, 0, 7); // a partial line waits for the rest
  reader.feed(bytes, 7, bytes.length);
  const server = new TextEncoder().encode("\\101\\x42\\b\\f\\v\\\\\t\\\\N\t\n");
  reader.feed(server, 0, server.length);
  assert.deepEqual(rows, [["a\tb\nc\\d\re", null, "plain é"], ["AB\b\f\v\\", "\\N", ""]]);
  const wrong = new TextEncoder().encode("1\t2\n");
  assert.throws(() => reader.feed(wrong, 0, wrong.length), ProtocolViolation);
});

Deno.test("binary encoders: numeric takes what numeric_in takes (spaces, inf, exponents) and refuses the rest", () => {
  assert.deepEqual(field(Oid.numeric, " \t1.5\n "), numeric(2, 0, 0, 1, 1, 5000));
  assert.deepEqual(field(Oid.numeric, "1."), numeric(1, 0, 0, 0, 1));
  assert.deepEqual(field(Oid.numeric, ".5"), numeric(1, -1, 0, 1, 5000));
  assert.deepEqual(field(Oid.numeric, "+7"), numeric(1, 0, 0, 0, 7));
  assert.deepEqual(field(Oid.numeric, "1e0000000000000000001"), numeric(1, 0, 0, 0, 10));
  assert.deepEqual(field(Oid.numeric, "0e-20"), numeric(0, 0, 0, 20), "zero keeps its scale");
  for (const inf of ["inf", "Infinity", "+INF", "+infinity", " infinity "]) {
    assert.deepEqual(field(Oid.numeric, inf), numeric(0, 0, 0xd000, 0), inf);
  }
  for (const inf of ["-inf", "-Infinity", "-INFINITY"]) {
    assert.deepEqual(field(Oid.numeric, inf), numeric(0, 0, 0xf000, 0), inf);
  }
  for (const nan of ["NaN", "nan", " NAN "]) {
    assert.deepEqual(field(Oid.numeric, nan), numeric(0, 0, 0xc000, 0), nan);
  }
  // Refused as numeric_in refuses them (a signed NaN, words that are not quite, empty parts),
  // or out of numeric's range (a weight past 32767, a scale past 16383).
  for (
    const bad of [
      "+NaN",
      "-nan",
      "infinit",
      "infinityy",
      ".",
      "-.e1",
      "e5",
      "1e",
      "1e+",
      "1 2",
      "1_000",
      "0x1f",
      "1e131072",
      "1e-16384",
      "5e-16384",
    ]
  ) {
    assert.throws(
      () => field(Oid.numeric, bad),
      (e) => e instanceof EncodeError && e.code === "INVALID_VALUE",
      bad,
    );
  }
  assert.deepEqual(field(Oid.numeric, "1e131071").slice(4, 12), [0, 1, 0x7f, 0xff, 0, 0, 0, 0]);
  assert.equal(roundTrip(Oid.numeric, "5e-16383"), "0." + "0".repeat(16382) + "5");
});

Deno.test("binary round trip: numbers and bigints as numeric by arithmetic, the same bytes as their text", () => {
  const same = (value: number | bigint) =>
    assert.deepEqual(field(Oid.numeric, value), field(Oid.numeric, String(value)), String(value));
  for (
    const n of [
      0,
      -0,
      1,
      -1,
      9999,
      10000,
      -10000,
      123456789,
      100000000,
      Number.MAX_SAFE_INTEGER,
      -Number.MAX_SAFE_INTEGER,
      2 ** 53,
      1e21,
      0.5,
      -1.25e-7,
    ]
  ) {
    same(n);
  }
  for (const b of [0n, -10000n, 2n ** 53n - 1n, 2n ** 53n, -(2n ** 64n), 10n ** 40n]) same(b);
  assert.equal(roundTrip(Oid.numeric, -0), "0");
  assert.equal(roundTrip(Oid.numeric, 10n ** 40n), "1" + "0".repeat(40));
});

Deno.test("binary round trip: numeric of 1000 digits and more, both sides of the point", () => {
  let seed = 7;
  const rand = (n: number) => (seed = (seed * 1103515245 + 12345) % 2147483648) % n;
  const digits = (n: number) => Array.from({ length: n }, () => rand(10)).join("");
  const int = "9" + digits(999);
  const frac = digits(999) + "1";
  for (const text of [int, `-${int}`, `0.${frac}`, `${int}.${frac}`, `-${int}.${frac}`]) {
    assert.equal(roundTrip(Oid.numeric, text), text, text.slice(0, 20));
  }
  assert.deepEqual(roundTrip(Oid.numericArray, [int, null, `0.${frac}`]), [int, null, `0.${frac}`]);
});

/** A binary numeric field from its parts, as the server sends it. */
function numericField(weight: number, sign: number, dscale: number, ...digits: number[]) {
  const w = new Writer(4);
  w.i16(digits.length).i16(weight).i16(sign).i16(dscale);
  for (const d of digits) w.i16(d);
  return w.buf.slice(0, w.length);
}

Deno.test("binary decoders: numeric as numeric_out writes it, whatever the digits' weight", () => {
  const decode = (bytes: Uint8Array) => copyDecoderFor(Oid.numeric, plain)!(bytes, 0, bytes.length);
  // A negative scale (numeric(5,-2), PostgreSQL 15) stores 12300 as the digits 1 and 2300.
  assert.equal(decode(numericField(1, 0, 0, 1, 2300)), "12300");
  assert.equal(decode(numericField(2, 0, 0, 1)), "100000000", "trailing zero digits left out");
  assert.equal(decode(numericField(0, 0x4000, 3, 5, 10)), "-5.001");
  assert.equal(decode(numericField(-2, 0, 6, 1200)), "0.000012");
  assert.equal(decode(numericField(0, 0, 2)), "0.00");
  assert.equal(decode(numericField(0, 0, 0, 42)), "42");
  assert.equal(decode(numericField(1, 0, 4, 1, 0, 1)), "10000.0001");
  assert.equal(decode(numericField(0, 0xc000, 0)), "NaN");
  assert.equal(decode(numericField(0, 0xd000, 0)), "Infinity");
  assert.equal(decode(numericField(0, 0xf000, 0)), "-Infinity");
});

Deno.test("binary decoders: float4 as the shortest decimal that reads back as the same float32", () => {
  // The reference: the fewest digits, tried one by one.
  const shortest = (v: number) => {
    if (!Number.isFinite(v) || v === 0) return v;
    for (let digits = 1; digits < 9; digits++) {
      if (Math.fround(+v.toPrecision(digits)) === v) return +v.toPrecision(digits);
    }
    return +v.toPrecision(9);
  };
  const decode = copyDecoderFor(Oid.float4, plain)!;
  const bits = new Uint32Array(1);
  const f = new Float32Array(bits.buffer);
  const bytes = new Uint8Array(4);
  let seed = 99;
  const values = [1.1, 0.1, 1e7, 12345678, 16777217, 3.4028234663852886e38, 1e-45, -2.5, 1200000];
  for (let i = 0; i < 20000; i++) {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    bits[0] = (seed * 2 + (i & 1)) >>> 0; // every exponent and sign
    values.push(f[0]);
    values.push(Math.fround((seed % 100000) / 8)); // values with few digits
  }
  for (const value of values) {
    f[0] = value;
    const v = f[0];
    if (Number.isNaN(v)) continue;
    new DataView(bytes.buffer).setFloat32(0, v);
    assert.equal(decode(bytes, 0, 4), shortest(v), `${v}`);
  }
});

Deno.test("binary encoders: uuid refuses characters that only look like hex digits", () => {
  // Each of these shares its low 7 bits with a hex digit, or is one hyphen off.
  for (
    const bad of [
      "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a1\u00e1",
      "\u0130a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a1".slice(1) + "\u0131",
      "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a1g",
      "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a1 ",
      "a0eebc99x9c0b-4ef8-bb6d-6bb9bd380a11",
      "a0eebc999-c0b-4ef8-bb6d-6bb9bd380a11",
    ]
  ) {
    assert.throws(() => field(Oid.uuid, bad), EncodeError, JSON.stringify(bad));
  }
  assert.equal(
    roundTrip(Oid.uuid, "A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11"),
    "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
  );
});

Deno.test("binary decoders: text of every length, ASCII or not, and one-dimensional arrays", () => {
  const samples = ["", "a", "abcdefg", "abcdefgh", "abcdefghi", "abcdefghijkl", "abcdefghijklm"];
  for (const s of [...samples, "é", "abcdefgé", "abcdefghijké", "😀", "x".repeat(300) + "é"]) {
    assert.equal(roundTrip(Oid.text, s), s, JSON.stringify(s));
  }
  assert.deepEqual(roundTrip(Oid.textArray, samples), samples);
  const w = new Writer(4);
  const texts = arrayEncoder(Oid.text, enc(Oid.text), undefined);
  assert.throws(() => texts(w, ["a", ["b"]]), /rectangular/);
  assert.throws(() => texts(w, ["a", 5n, {}]), /element 2: expected a string/);
  assert.throws(
    () => texts(w, ["a", undefined]),
    (e) => e instanceof EncodeError && e.code === "UNDEFINED_VALUE" && /element 1/.test(e.message),
  );
  // A one-dimensional array with a trailing byte is malformed.
  const bytes = new Writer(4);
  arrayEncoder(Oid.int4, enc(Oid.int4), undefined)(bytes, [1, 2]);
  const data = bytes.buf.slice(0, bytes.length + 1);
  assert.throws(
    () => copyDecoderFor(Oid.int4Array, plain)!(data, 4, data.length),
    ProtocolViolation,
  );
});

Deno.test("binary decoders: timestamp's wall clock by arithmetic is the Date the getters gave, in zones with DST, odd offsets and skipped days", async () => {
  // Each zone in a fresh process (TZ is read at startup): 30,000 instants from 4713 BC to the
  // end of JS's range, each hour of two DST days, and years 0-99, decoded both ways.
  const module = new URL("../src/types/text_decoders.ts", import.meta.url).href;
  const code = `
    import { localDate, wallClockDate } from "${module}";
    const reference = (wall) => {
      const w = new Date(wall);
      if (Number.isNaN(w.getTime())) return w;
      return localDate(w.getUTCFullYear(), w.getUTCMonth(), w.getUTCDate(), w.getUTCHours(),
        w.getUTCMinutes(), w.getUTCSeconds(), w.getUTCMilliseconds());
    };
    const walls = [-8.64e15, 8.64e15, 8.64e15 + 1, -62198755200000, -62135596800001, 0, -1];
    let seed = 11;
    for (let i = 0; i < 30000; i++) {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      walls.push(Math.round((seed / 2147483648) * 1.7e16 - 8.5e15));
      walls.push(Date.UTC(seed % 100, seed % 12, 1 + (seed % 28), seed % 24, seed % 60));
    }
    for (let h = 0; h < 48 * 4; h++) {
      walls.push(Date.UTC(2024, 2, 30, 0, 15 * h), Date.UTC(2024, 9, 26, 0, 15 * h, 7, 123));
      walls.push(Date.UTC(2011, 11, 29, 0, 15 * h), Date.UTC(1867, 9, 17, 0, 15 * h));
    }
    let bad = 0;
    for (const wall of walls) {
      const a = wallClockDate(wall).getTime();
      const b = reference(wall).getTime();
      if (!(a === b || (Number.isNaN(a) && Number.isNaN(b)))) bad++;
    }
    console.log(bad + " of " + walls.length);`;
  for (
    const zone of [
      "UTC",
      "Europe/Helsinki",
      "America/New_York",
      "Australia/Lord_Howe",
      "Pacific/Apia",
      "America/Juneau",
      "Asia/Kolkata",
    ]
  ) {
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["eval", "--no-lock", code],
      env: { TZ: zone },
      stdout: "piped",
      stderr: "piped",
    }).output();
    const text = new TextDecoder().decode(out.stdout).trim();
    assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
    assert.match(text, /^0 of \d+$/, `${zone}: ${text}`);
  }
});

Deno.test("binary decoders: timestamptz microseconds round down to milliseconds exactly, either side of 2000", () => {
  const decode = copyDecoderFor(Oid.timestamptz, plain)!;
  const bytes = new Uint8Array(8);
  const view = new DataView(bytes.buffer);
  let seed = 5n;
  const micros = [0n, -1n, 999n, -999n, -1000n, -1001n, 1000n, 2n ** 62n, -(2n ** 62n)];
  for (let i = 0; i < 20000; i++) {
    seed = (seed * 6364136223846793005n + 1442695040888963407n) % 2n ** 64n;
    micros.push(BigInt.asIntN(50, seed)); // up to ±17,800 years: every sign and size
  }
  for (const us of micros) {
    view.setBigInt64(0, us);
    // floor(us / 1000), as the text form's parse truncates to ms toward -infinity
    const ms = Number(us >= 0n ? us / 1000n : -((-us + 999n) / 1000n)) + 946684800000;
    const expected = Math.abs(ms) > 8.64e15 ? NaN : ms;
    const got = (decode(bytes, 0, 8) as Date).getTime();
    assert.ok(got === expected || (Number.isNaN(got) && Number.isNaN(expected)), `${us}`);
  }
});

Deno.test("copy text decoding: invalid UTF-8 is a ProtocolViolation at every length, short or long", () => {
  // A lone continuation byte inside ASCII: 5 bytes goes the short way, 20 the long one.
  for (const length of [5, 20]) {
    const bytes = new Uint8Array(length).fill(0x61);
    bytes[2] = 0x80;
    assert.throws(() => text(bytes, 0, length), ProtocolViolation, `${length} bytes`);
  }
  const valid = new TextEncoder().encode("grüße aus köln, 20+ bytes");
  assert.equal(text(valid, 0, valid.length), "grüße aus köln, 20+ bytes");
});
