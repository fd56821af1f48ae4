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
} from "../src/types/copy_format.ts";
import { Parameter } from "../src/types/encode.ts";
import { Oid } from "../src/types/oids.ts";

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
  const numeric = (
    ndigits: number,
    weight: number,
    sign: number,
    dscale: number,
    ...d: number[]
  ) => {
    const h = [ndigits, weight, sign, dscale, ...d].flatMap((x) => [(x >> 8) & 255, x & 255]);
    return [...be32(h.length), ...h];
  };
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
