/** The protocol layer with byte vectors: no server, no sockets. */
import assert from "node:assert/strict";
import { Writer } from "../src/protocol/writer.ts";
import * as fe from "../src/protocol/frontend.ts";
import {
  commandComplete,
  fields,
  notification,
  ProtocolViolation,
  rowDescription,
  utf8,
} from "../src/protocol/backend.ts";
import { Framer } from "../src/protocol/framer.ts";
import { md5Password } from "../src/protocol/md5.ts";

function bytes(w: Writer): number[] {
  return [...w.buf.subarray(0, w.length)];
}

const ascii = (s: string) => [...new TextEncoder().encode(s)];

Deno.test("frontend: fixed messages", () => {
  const w = new Writer(4); // tiny, so every encoder exercises growth
  fe.sync(w);
  fe.flush(w);
  fe.terminate(w);
  assert.deepEqual(bytes(w), [0x53, 0, 0, 0, 4, 0x48, 0, 0, 0, 4, 0x58, 0, 0, 0, 4]);
  w.reset();
  fe.sslRequest(w);
  assert.deepEqual(bytes(w), [0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f]);
  w.reset();
  fe.cancelRequest(w, 1234, Uint8Array.of(0xff, 0xff, 0xff, 0xfb)); // the key -5 of protocol 3.0
  assert.deepEqual(bytes(w), [
    0,
    0,
    0,
    16,
    0x04,
    0xd2,
    0x16,
    0x2e,
    0,
    0,
    0x04,
    0xd2,
    255,
    255,
    255,
    251,
  ]);
});

Deno.test("frontend: startup, parse, bind, describe, execute", () => {
  const w = new Writer(8);
  fe.startup(w, { user: "u" });
  assert.deepEqual(bytes(w), [0, 0, 0, 16, 0, 3, 0, 0, ...ascii("user"), 0, ...ascii("u"), 0, 0]);
  w.reset();
  fe.parse(w, "s1", "select $1", [23]);
  assert.deepEqual(bytes(w), [
    0x50,
    0,
    0,
    0,
    23,
    ...ascii("s1"),
    0,
    ...ascii("select $1"),
    0,
    0,
    1,
    0,
    0,
    0,
    23,
  ]);
  w.reset();
  fe.bind(w, "s1", ["é", null], [1]);
  assert.deepEqual(bytes(w), [
    0x42,
    0,
    0,
    0,
    26,
    0,
    ...ascii("s1"),
    0,
    0,
    0,
    0,
    2, // portal, statement, no formats, 2 params
    0,
    0,
    0,
    2,
    0xc3,
    0xa9, // "é" is two bytes in UTF-8
    255,
    255,
    255,
    255, // NULL
    0,
    1,
    0,
    1, // one result format: binary
  ]);
  w.reset();
  fe.describe(w, "S", "s1");
  fe.execute(w, "", 0);
  assert.deepEqual(bytes(w), [
    0x44,
    0,
    0,
    0,
    8,
    0x53,
    ...ascii("s1"),
    0,
    0x45,
    0,
    0,
    0,
    9,
    0,
    0,
    0,
    0,
    0,
  ]);
});

Deno.test("writer: strings of every kind are UTF-8, long ones too", () => {
  const w = new Writer(2);
  const samples = ["", "ascii", "é", "日本語", "🐘", "a".repeat(100) + "é", "x".repeat(70000)];
  for (const s of samples) {
    w.reset();
    const n = w.str(s);
    assert.deepEqual(w.buf.subarray(0, n), new TextEncoder().encode(s));
  }
});

Deno.test("backend: utf8 decodes short ASCII, short non-ASCII and long strings", () => {
  for (const s of ["", "id", "naïve", "🐘🐘", "y".repeat(200), "ü".repeat(50)]) {
    const b = new TextEncoder().encode(s);
    assert.equal(utf8(b, 0, b.length), s);
  }
});

Deno.test("backend: RowDescription", () => {
  const field = (name: string, table: number, attr: number, type: number, size: number) => [
    ...new TextEncoder().encode(name),
    0,
    0,
    0,
    table >> 8,
    table & 0xff,
    0,
    attr,
    0,
    0,
    0,
    type,
    (size >> 8) & 0xff,
    size & 0xff,
    255,
    255,
    255,
    255,
    0,
    0,
  ];
  const body = new Uint8Array([
    0,
    2,
    ...field("id", 0x140, 1, 23, 4),
    ...field("näme", 0, 0, 25, -1),
  ]);
  const cols = rowDescription(body, 0, body.length);
  assert.equal(cols.length, 2);
  assert.deepEqual(cols[0], {
    name: "id",
    table: 0x140,
    number: 1,
    type: 23,
    size: 4,
    modifier: -1,
    format: 0,
  });
  assert.deepEqual(cols[1], {
    name: "näme",
    table: 0,
    number: 0,
    type: 25,
    size: -1,
    modifier: -1,
    format: 0,
  });
  assert.throws(() => rowDescription(body, 0, 10), ProtocolViolation);
});

Deno.test("backend: CommandComplete tags", () => {
  const tag = (s: string) => {
    const b = new Uint8Array([...ascii(s), 0]);
    return commandComplete(b, 0, b.length);
  };
  assert.deepEqual(tag("SELECT 3"), { command: "SELECT", count: 3 });
  assert.deepEqual(tag("INSERT 0 5"), { command: "INSERT", count: 5 });
  assert.deepEqual(tag("CREATE TABLE"), { command: "CREATE TABLE", count: null });
  assert.deepEqual(tag("BEGIN"), { command: "BEGIN", count: null });
  assert.deepEqual(tag("UPDATE 0"), { command: "UPDATE", count: 0 });
  assert.deepEqual(tag("MERGE 12"), { command: "MERGE", count: 12 });
  assert.deepEqual(tag("CREATE TABLE AS 7"), { command: "CREATE", count: 7 });
  assert.deepEqual(tag("SELECT 4294967296"), { command: "SELECT", count: 4294967296 });
  assert.deepEqual(tag("SELECTED 1"), { command: "SELECTED", count: 1 }, "not the known word");
  assert.deepEqual(tag("SET x"), { command: "SET x", count: null });
  assert.deepEqual(tag("SELECT "), { command: "SELECT ", count: null });
  assert.deepEqual(tag(""), { command: "", count: null });
  const cut = new Uint8Array([...ascii("SELECT 1")]);
  assert.throws(() => commandComplete(cut, 0, cut.length), ProtocolViolation);
  const inner = new Uint8Array([...ascii("SELECT"), 0, ...ascii("1"), 0]);
  assert.throws(() => commandComplete(inner, 0, inner.length), ProtocolViolation);
});

Deno.test("backend: error fields and notifications", () => {
  const b = new Uint8Array([
    0x53,
    ...ascii("ERROR"),
    0,
    0x43,
    ...ascii("42601"),
    0,
    0x4d,
    ...ascii("bad"),
    0,
    0,
  ]);
  assert.deepEqual(fields(b, 0, b.length), { S: "ERROR", C: "42601", M: "bad" });
  const n = new Uint8Array([0, 0, 0, 7, ...ascii("ch"), 0, ...ascii("hi"), 0]);
  assert.deepEqual(notification(n, 0, n.length), { pid: 7, channel: "ch", payload: "hi" });
});

/** Feeds bytes to a framer in chunks of the given size; returns [type, body] pairs. */
function frame(input: Uint8Array, chunk: number, framer = new Framer(8)): [string, number[]][] {
  const out: [string, number[]][] = [];
  for (let at = 0; at < input.length;) {
    const space = framer.space();
    const n = Math.min(chunk, space.length, input.length - at);
    space.set(input.subarray(at, at + n));
    framer.advance(n);
    at += n;
    while (framer.next()) {
      out.push([String.fromCharCode(framer.type), [
        ...framer.buf.subarray(framer.start, framer.end),
      ]]);
    }
  }
  return out;
}

Deno.test("framer: messages split anywhere come out whole, and large ones grow the buffer", () => {
  const big = new Uint8Array(50000).map((_, i) => i & 0xff);
  const msgs = [
    [0x5a, 0, 0, 0, 5, 0x49],
    [0x44, 0, 0, 0xc3, 0x54, ...big],
    [0x31, 0, 0, 0, 4],
  ];
  const input = new Uint8Array(msgs.flat());
  for (const chunk of [1, 3, 7, 4096, input.length]) {
    const out = frame(input, chunk);
    assert.equal(out.length, 3, `chunk ${chunk}`);
    assert.deepEqual(out[0], ["Z", [0x49]]);
    assert.equal(out[1][0], "D");
    assert.deepEqual(out[1][1], [...big]);
    assert.deepEqual(out[2], ["1", []]);
  }
});

Deno.test("framer: a lying length is refused without allocating it", () => {
  const framer = new Framer(16);
  const space = framer.space();
  space.set([0x44, 0x7f, 0xff, 0xff, 0xff]); // 2 GiB
  framer.advance(5);
  assert.throws(() => framer.next(), ProtocolViolation);
  const f2 = new Framer(16);
  f2.space().set([0x44, 0x30, 0, 0, 0, 1, 2, 3]); // 768 MiB declared, 3 bytes sent
  f2.advance(8);
  assert.equal(f2.next(), false);
  assert.ok(f2.space().length + 8 <= 64, "the buffer grows with the data, not the declared length");
  const f3 = new Framer(16);
  f3.space().set([0x44, 0, 0, 0, 3]); // shorter than its own length field
  f3.advance(5);
  assert.throws(() => f3.next(), ProtocolViolation);
});

Deno.test("md5 password hash matches PostgreSQL's scheme", () => {
  // "md5" + md5(md5("secret" + "alice") + salt); computed independently with md5sum.
  const salt = new Uint8Array([1, 2, 3, 4]);
  assert.equal(md5Password("alice", "secret", salt), "md598a0412b9c31436fc53776e863350083");
});
