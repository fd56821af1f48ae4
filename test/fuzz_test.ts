// Deterministic fuzzing of the backend side: fixed seeds and counts, so every run checks the
// same inputs and a failure names the case that reproduces it.
//
// (a) Random byte streams, random well-framed messages and mutated valid streams go through
//     Framer and the backend decoders exactly as the connection feeds them (chunked reads into
//     Framer.space(), decoders on ranges of Framer.buf). Every failure must be a
//     ProtocolViolation, a decoder must read nothing outside its message, and the receive
//     buffer may only grow with the bytes actually received.
// (b) A fake server completes startup, then answers pipelined queries with mutated answers and
//     hangs up: every query must settle, quickly, and nothing may crash.
import assert from "node:assert/strict";
import postgres, { ConnectionError, PostgresError } from "../mod.ts";
import { Framer } from "../src/protocol/framer.ts";
import {
  commandComplete as decodeCommandComplete,
  cstrPair,
  fields,
  notification,
  parameterDescription as decodeParameterDescription,
  ProtocolViolation,
  rowDescription as decodeRowDescription,
  utf8,
} from "../src/protocol/backend.ts";
import {
  auth,
  backendKeyData,
  bindComplete,
  commandComplete,
  concat,
  cstr,
  dataRow,
  encoder,
  type FakeColumn,
  FakeSession,
  int32,
  isFetchTypes,
  message,
  noData,
  parameterDescription,
  parameterStatus,
  parseComplete,
  type Peer,
  readyForQuery,
  rowDescription,
  withServer,
} from "./harness/fake_server.ts";
import { delay, within } from "./harness/wait.ts";

// ---------------------------------------------------------------------------------------------
// A seeded PRNG: xorshift32 (Marsaglia's shifts 13, 17, 5). Small, fast, reproducible.

class Rng {
  #s: number;

  constructor(seed: number) {
    this.#s = (seed >>> 0) || 0x9e3779b9; // the state must never be 0
  }

  /** A uniform 32-bit unsigned integer. */
  u32(): number {
    let x = this.#s;
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    this.#s = x >>> 0;
    return this.#s;
  }

  /** An integer in [0, n). */
  int(n: number): number {
    return n <= 0 ? 0 : Math.floor((this.u32() / 0x100000000) * n);
  }

  chance(p: number): boolean {
    return this.u32() / 0x100000000 < p;
  }

  pick<T>(xs: readonly T[]): T {
    return xs[this.int(xs.length)];
  }

  bytes(n: number): Uint8Array {
    const out = new Uint8Array(n);
    for (let i = 0; i < n; i++) out[i] = this.u32() & 0xff;
    return out;
  }
}

const hex = (n: number) => `0x${(n >>> 0).toString(16)}`;

function dump(bytes: Uint8Array, max = 160): string {
  const shown = [...bytes.subarray(0, max)].map((b) => b.toString(16).padStart(2, "0")).join("");
  return bytes.length > max ? `${shown}… (${bytes.length} bytes)` : shown;
}

// ---------------------------------------------------------------------------------------------
// Valid backend streams

const NAMES = ["id", "x", "näme", "列", "a b", "", "col_with_a_rather_long_name_for_the_slow_path"];
const TEXTS = ["", "v", "hello", "ünïcödé", "日本語", "emoji 🐘", "x".repeat(30), "tab\there"];
const TAGS = ["SELECT 1", "INSERT 0 5", "UPDATE 12", "CREATE TABLE", "BEGIN", "COPY 3", "FETCH 0"];
const OIDS = [16, 20, 23, 25, 1043, 1184, 3802, 0, 0xffffffff];

function randomText(rng: Rng): string {
  return rng.chance(0.8) ? rng.pick(TEXTS) : String(rng.u32());
}

function randomColumns(rng: Rng): FakeColumn[] {
  return Array.from(
    { length: rng.int(5) },
    () => ({ name: rng.pick(NAMES), type: rng.pick(OIDS) }),
  );
}

function randomFields(rng: Rng, severity: string): Uint8Array {
  const parts = [cstr(`S${severity}`), cstr("C42P01"), cstr(`M${randomText(rng)}`)];
  if (rng.chance(0.5)) parts.push(cstr(`D${randomText(rng)}`));
  if (rng.chance(0.3)) parts.push(cstr("P12"));
  return concat(...parts, cstr(""));
}

/** One valid backend message of a random kind. */
function randomMessage(rng: Rng): Uint8Array {
  switch (rng.int(15)) {
    case 0:
      return rowDescription(randomColumns(rng));
    case 1:
    case 2:
      return dataRow(
        Array.from(
          { length: rng.int(5) },
          () => rng.chance(0.2) ? null : rng.chance(0.1) ? rng.bytes(rng.int(8)) : randomText(rng),
        ),
      );
    case 3:
      return commandComplete(rng.pick(TAGS));
    case 4:
      return message("E", randomFields(rng, "ERROR"));
    case 5:
      return message("N", randomFields(rng, "NOTICE"));
    case 6:
      return parameterStatus(rng.pick(NAMES), randomText(rng));
    case 7:
      return message("A", int32(rng.u32() | 0), cstr(rng.pick(NAMES)), cstr(randomText(rng)));
    case 8:
      return parameterDescription(Array.from({ length: rng.int(6) }, () => rng.pick(OIDS)));
    case 9:
      return readyForQuery(rng.pick(["I", "T", "E"]));
    case 10:
      return parseComplete();
    case 11:
      return bindComplete();
    case 12:
      return noData();
    case 13:
      return backendKeyData(rng.u32() | 0, rng.u32() | 0);
    default:
      return auth(0);
  }
}

function validStream(rng: Rng): Uint8Array {
  return concat(...Array.from({ length: 1 + rng.int(12) }, () => randomMessage(rng)));
}

/** Types the connection knows, and a few it does not. */
const TYPES = [..."TDCENSAtZ12nKRIsGHWdcv", "Q", "\0", "\xff", "~"].map((c) => c.charCodeAt(0));

/** A well-framed message of a known type with a random (usually malformed) body. */
function randomFramed(rng: Rng): Uint8Array {
  const body = rng.bytes(rng.int(48));
  if (rng.chance(0.5)) { // plenty of NULs and small counts, as real bodies have
    for (let i = 0; i < body.length; i++) if (rng.chance(0.3)) body[i] = rng.int(3);
  }
  const out = new Uint8Array(5 + body.length);
  out[0] = rng.pick(TYPES);
  new DataView(out.buffer).setInt32(1, body.length + 4);
  out.set(body, 5);
  return out;
}

// ---------------------------------------------------------------------------------------------
// Mutations

/** Starts of the messages a stream frames into, as far as its lengths are sane. */
function boundaries(b: Uint8Array): number[] {
  const out: number[] = [];
  const view = new DataView(b.buffer, b.byteOffset, b.byteLength);
  for (let at = 0; at + 5 <= b.length;) {
    out.push(at);
    const length = view.getInt32(at + 1);
    if (length < 4) break;
    at += 1 + length;
  }
  return out;
}

function splice(b: Uint8Array, at: number, remove: number, insert: Uint8Array): Uint8Array {
  return concat(b.subarray(0, at), insert, b.subarray(Math.min(b.length, at + remove)));
}

type Mutator = (rng: Rng, b: Uint8Array) => Uint8Array;

const MUTATORS: [string, Mutator][] = [
  ["flip bits", (rng, b) => {
    const out = b.slice();
    for (let n = 1 + rng.int(4); n > 0 && out.length > 0; n--) {
      out[rng.int(out.length)] ^= 1 << rng.int(8);
    }
    return out;
  }],
  ["set a byte", (rng, b) => {
    const out = b.slice();
    if (out.length > 0) out[rng.int(out.length)] = rng.pick([0, 0x7f, 0x80, 0xff, rng.int(256)]);
    return out;
  }],
  ["truncate", (rng, b) => b.slice(0, rng.int(b.length + 1))],
  ["corrupt a length", (rng, b) => {
    const starts = boundaries(b);
    if (starts.length === 0) return b;
    const at = rng.pick(starts);
    const out = b.slice();
    const view = new DataView(out.buffer);
    const length = view.getInt32(at + 1);
    view.setInt32(
      at + 1,
      rng.pick([
        0,
        3,
        4,
        length - 1,
        length + 1,
        length + 200,
        0x3fffffff,
        0x40000000,
        0x40000001,
        0x7fffffff,
        -1,
        -0x80000000,
        rng.u32() | 0,
      ]),
    );
    return out;
  }],
  ["corrupt a count", (rng, b) => {
    const starts = boundaries(b).filter((at) =>
      at + 7 <= b.length && "TDt".includes(String.fromCharCode(b[at]))
    );
    if (starts.length === 0) return b;
    const at = rng.pick(starts);
    const out = b.slice();
    const view = new DataView(out.buffer);
    const n = view.getUint16(at + 5);
    view.setUint16(at + 5, rng.pick([0, 1, n + 1, Math.max(0, n - 1), 0x7fff, 0x8000, 0xffff]));
    return out;
  }],
  ["change a type", (rng, b) => {
    const starts = boundaries(b);
    if (starts.length === 0) return b;
    const out = b.slice();
    out[rng.pick(starts)] = rng.pick(TYPES);
    return out;
  }],
  ["remove a NUL", (rng, b) => {
    const zeros: number[] = [];
    for (let i = 0; i < b.length; i++) if (b[i] === 0) zeros.push(i);
    if (zeros.length === 0) return b;
    const out = b.slice();
    out[rng.pick(zeros)] = 0x41;
    return out;
  }],
  ["duplicate bytes", (rng, b) => {
    const from = rng.int(b.length + 1);
    const piece = b.slice(from, from + 1 + rng.int(24));
    return splice(b, rng.int(b.length + 1), 0, piece);
  }],
  ["drop bytes", (rng, b) => splice(b, rng.int(b.length + 1), 1 + rng.int(8), new Uint8Array(0))],
  [
    "insert random bytes",
    (rng, b) => splice(b, rng.int(b.length + 1), 0, rng.bytes(1 + rng.int(8))),
  ],
  ["drop a message", (rng, b) => {
    const starts = boundaries(b);
    if (starts.length === 0) return b;
    const i = rng.int(starts.length);
    const end = i + 1 < starts.length ? starts[i + 1] : b.length;
    return splice(b, starts[i], end - starts[i], new Uint8Array(0));
  }],
  ["duplicate a message", (rng, b) => {
    const starts = boundaries(b);
    if (starts.length === 0) return b;
    const i = rng.int(starts.length);
    const end = i + 1 < starts.length ? starts[i + 1] : b.length;
    return splice(b, rng.pick(starts), 0, b.slice(starts[i], end));
  }],
];

/** 1 to 3 random mutations; returns the result and their names. */
function mutate(rng: Rng, input: Uint8Array): [Uint8Array, string[]] {
  let b = input;
  const names: string[] = [];
  for (let n = 1 + rng.int(3); n > 0; n--) {
    const [name, m] = rng.pick(MUTATORS);
    names.push(name);
    b = m(rng, b);
  }
  return [b, names];
}

// ---------------------------------------------------------------------------------------------
// (a) Framer and decoders

/** Decodes one message body as the connection would, by type; undefined when not decoded. */
function decode(type: number, buf: Uint8Array, start: number, end: number): unknown {
  switch (type) {
    case 0x54: // T
      return decodeRowDescription(buf, start, end);
    case 0x45: // E
    case 0x4e: // N
      return fields(buf, start, end);
    case 0x43: // C
      return decodeCommandComplete(buf, start, end);
    case 0x74: // t
      return decodeParameterDescription(buf, start, end);
    case 0x41: // A
      return notification(buf, start, end);
    case 0x53: // S
      return cstrPair(buf, start, end);
    case 0x44: // D: a text value is any byte range of the body
      return utf8(buf, start, end);
    default:
      return undefined;
  }
}

/** The decoder's result, or the ProtocolViolation it threw; any other error fails the test. */
function attempt(type: number, buf: Uint8Array, start: number, end: number): unknown {
  try {
    return decode(type, buf, start, end);
  } catch (e) {
    if (e instanceof ProtocolViolation) return { violation: true };
    throw e;
  }
}

interface Stats {
  messages: number;
  decoded: number;
  violations: number;
  framerViolations: number;
}

const CAPACITY = 16; // tiny, so every stream exercises compaction and growth

/**
 * Feeds `input` to a Framer in random chunks, decoding every message in place and again from
 * a copy between random bytes (so a read outside the body would change the result).
 */
function run(rng: Rng, input: Uint8Array, stats: Stats): void {
  const framer = new Framer(CAPACITY);
  let fed = 0;
  for (let at = 0; at < input.length;) {
    const space = framer.space();
    const n = Math.min(space.length, input.length - at, 1 + rng.int(rng.chance(0.5) ? 8 : 64));
    space.set(input.subarray(at, at + n));
    framer.advance(n);
    at += n;
    fed += n;
    assert.ok(
      framer.buf.length <= Math.max(CAPACITY, 4 * fed),
      `the receive buffer is ${framer.buf.length} bytes after ${fed} received`,
    );
    try {
      while (framer.next()) {
        stats.messages++;
        const { type, buf, start, end } = framer;
        assert.ok(start >= 0 && start <= end && end <= buf.length, "a body outside the buffer");
        const inPlace = attempt(type, buf, start, end);
        const body = buf.slice(start, end);
        const pad = 1 + rng.int(16);
        const isolated = concat(rng.bytes(pad), body, rng.bytes(1 + rng.int(16)));
        const copy = attempt(type, isolated, pad, pad + body.length);
        assert.deepEqual(
          copy,
          inPlace,
          `${String.fromCharCode(type)} decodes differently depending on the bytes around it`,
        );
        if ((inPlace as { violation?: boolean })?.violation) stats.violations++;
        else if (inPlace !== undefined) stats.decoded++;
      }
    } catch (e) {
      if (!(e instanceof ProtocolViolation)) throw e;
      stats.framerViolations++;
      return; // the connection would close here
    }
  }
}

const SEED = 0x5eed2026;
const CASES = 20000;

Deno.test(`fuzz: Framer + backend decoders on random and mutated streams (seed ${hex(SEED)}, ${CASES} cases)`, () => {
  const stats: Stats = { messages: 0, decoded: 0, violations: 0, framerViolations: 0 };
  for (let i = 0; i < CASES; i++) {
    const caseSeed = (SEED ^ Math.imul(i + 1, 0x9e3779b1)) >>> 0;
    const rng = new Rng(caseSeed);
    let input: Uint8Array;
    let how: string;
    switch (i % 4) {
      case 0:
        input = rng.bytes(rng.int(96));
        how = "random bytes";
        break;
      case 1:
        input = concat(...Array.from({ length: 1 + rng.int(6) }, () => randomFramed(rng)));
        how = "random bodies";
        break;
      case 2:
        input = validStream(rng);
        how = "valid";
        break;
      default: {
        const [mutated, names] = mutate(rng, validStream(rng));
        input = mutated;
        how = `mutated (${names.join(", ")})`;
      }
    }
    try {
      run(rng, input, stats);
    } catch (e) {
      throw new assert.AssertionError({
        message: `case ${i} (seed ${hex(caseSeed)}, ${how}): ${(e as Error)?.stack ?? e}\n` +
          `input: ${dump(input)}`,
      });
    }
  }
  // The fuzzer must reach the decoders with both good and bad bodies, not only stop at headers.
  assert.ok(stats.decoded > CASES, `only ${stats.decoded} messages decoded`);
  assert.ok(stats.violations > CASES / 10, `only ${stats.violations} bodies refused`);
  assert.ok(stats.framerViolations > CASES / 10, `only ${stats.framerViolations} bad lengths`);
});

Deno.test(`fuzz: valid streams decode to what was encoded (seed ${hex(SEED)}, 2000 cases)`, () => {
  const rng = new Rng(SEED);
  for (let i = 0; i < 2000; i++) {
    const columns = randomColumns(rng);
    const tag = rng.pick(TAGS);
    const oids = Array.from({ length: rng.int(6) }, () => rng.pick(OIDS));
    const name = rng.pick(NAMES);
    const value = randomText(rng);
    const stream = concat(
      rowDescription(columns),
      commandComplete(tag),
      parameterDescription(oids),
      parameterStatus(name, value),
      message("A", int32(-7), cstr(name), cstr(value)),
      message("N", cstr("SNOTICE"), cstr(`M${value}`), cstr("")),
    );
    const framer = new Framer(CAPACITY);
    const out: unknown[] = [];
    for (let at = 0; at < stream.length;) {
      const space = framer.space();
      const n = Math.min(space.length, stream.length - at, 1 + rng.int(32));
      space.set(stream.subarray(at, at + n));
      framer.advance(n);
      at += n;
      while (framer.next()) out.push(decode(framer.type, framer.buf, framer.start, framer.end));
    }
    const [cols, cc, pd, ps, an, nf] = out as [
      { name: string; type: number }[],
      { command: string; count: number | null },
      number[],
      [string, string],
      { pid: number; channel: string; payload: string },
      Record<string, string>,
    ];
    assert.deepEqual(cols.map((c) => ({ name: c.name, type: c.type })), columns, `case ${i}`);
    const [word, count] = tag.startsWith("INSERT")
      ? ["INSERT", 5]
      : /\d+$/.test(tag)
      ? [tag.split(" ")[0], Number(tag.split(" ")[1])]
      : [tag, null];
    assert.deepEqual(cc, { command: word, count }, `case ${i}`);
    assert.deepEqual(pd, oids, `case ${i}`);
    assert.deepEqual(ps, [name, value], `case ${i}`);
    assert.deepEqual(an, { pid: -7, channel: name, payload: value }, `case ${i}`);
    assert.deepEqual(nf, { S: "NOTICE", M: value }, `case ${i}`);
  }
});

Deno.test(`fuzz: utf8() agrees with a fatal TextDecoder (seed ${hex(SEED)}, 20000 cases)`, () => {
  const rng = new Rng(SEED ^ 0xfeed);
  const reference = new TextDecoder("utf-8", { fatal: true });
  const samples = [..."aé€😀"].map((c) => encoder.encode(c));
  for (let i = 0; i < 20000; i++) {
    // Mostly valid text with a few random bytes, both under and over the 24-byte fast path.
    const parts: Uint8Array[] = [];
    for (let n = rng.int(12); n > 0; n--) {
      parts.push(rng.chance(0.85) ? rng.pick(samples) : rng.bytes(1 + rng.int(3)));
    }
    const bytes = concat(...parts);
    const pad = rng.int(8);
    const buf = concat(rng.bytes(pad), bytes, rng.bytes(rng.int(8)));
    let expected: string | null;
    try {
      expected = reference.decode(bytes);
    } catch {
      expected = null;
    }
    let got: string | null;
    try {
      got = utf8(buf, pad, pad + bytes.length);
    } catch (e) {
      assert.ok(e instanceof ProtocolViolation, `case ${i}: ${e} for ${dump(bytes)}`);
      got = null;
    }
    // Lenient decoding (U+FFFD) would also pass when the input is valid; strict must match.
    if (expected !== null) assert.equal(got, expected, `case ${i}: ${dump(bytes)}`);
    else assert.ok(got === null || got.includes("\ufffd"), `case ${i}: ${dump(bytes)}`);
  }
});

// ---------------------------------------------------------------------------------------------
// (b) The connection under mutated answers

const CONN_SEED = 0xc0ffee11;
const ROUNDS = 150;
/** A query still pending this long after the server hung up hangs. */
const SETTLE_MS = 3000;

/**
 * Connection `index` (one per round): startup, then the correct answers to the round's queries,
 * mutated with the round's seed and written in random chunks, then a hang-up.
 */
function mutatingServer(queries: number[]) {
  return async (peer: Peer, index: number): Promise<void> => {
    const rng = new Rng((CONN_SEED ^ Math.imul(index + 1, 0x85ebca6b)) >>> 0);
    const session = new FakeSession();
    try {
      await peer.handshake();
      const goods: Uint8Array[] = [];
      while (goods.length < queries[index]) {
        const seg = await peer.segment();
        if (seg === null) return;
        const fetch = isFetchTypes(session, seg);
        const good = session.answer(seg);
        if (fetch) await peer.send(good);
        else goods.push(good);
      }
      const [bad] = mutate(rng, concat(...goods));
      for (let at = 0; at < bad.length;) {
        const n = 1 + rng.int(bad.length - at);
        await peer.send(bad.subarray(at, at + n));
        at += n;
        if (rng.chance(0.3)) await delay(0);
      }
    } catch {
      // the driver hung up first (it found the answers broken): that is fine
    } finally {
      peer.close();
    }
  };
}

type Settled = { ok: true } | { ok: false; error: unknown } | { hang: true };

function settleWithin(p: PromiseLike<unknown>, ms: number): Promise<Settled> {
  const outcome = Promise.resolve(p).then(
    (): Settled => ({ ok: true }),
    (error): Settled => ({ ok: false, error }),
  );
  return within(outcome, ms, "hang").catch((): Settled => ({ hang: true }));
}

/**
 * Runs ROUNDS rounds, each a fresh client sending 1 to 16 pipelined queries to a server that
 * mutates its answers. With `typed`, every rejection must also be a ConnectionError or a
 * PostgresError (a mutated stream may still hold a valid ErrorResponse).
 */
async function connectionFuzz(typed: boolean): Promise<void> {
  const rng = new Rng(CONN_SEED);
  const queries = Array.from({ length: ROUNDS }, () => 1 + rng.int(16));
  const counts = { resolved: 0, rejected: 0 };
  await withServer(mutatingServer(queries), async (server) => {
    for (let round = 0; round < ROUNDS; round++) {
      const sql = postgres({
        host: "127.0.0.1",
        port: server.port,
        user: "fake",
        database: "fake",
        ssl: "disable",
        max: 1,
        connect_timeout: 2,
        fetch_types: round % 2 === 0,
        prepare: round % 3 !== 0,
        onnotice: () => {},
      });
      try {
        const outcomes = await Promise.all(
          Array.from(
            { length: queries[round] },
            (_, i) => settleWithin(sql`select ${`r${round}q${i}`} as x`, SETTLE_MS),
          ),
        );
        for (const [i, o] of outcomes.entries()) {
          const where = `round ${round} (server seed ${
            hex((CONN_SEED ^ Math.imul(round + 1, 0x85ebca6b)) >>> 0)
          }), query ${i}`;
          assert.ok(!("hang" in o), `${where}: not settled within ${SETTLE_MS} ms`);
          if (o.ok) {
            counts.resolved++;
            continue;
          }
          counts.rejected++;
          assert.ok(o.error instanceof Error, `${where}: rejected with a non-error ${o.error}`);
          if (typed) {
            assert.ok(
              o.error instanceof ConnectionError || o.error instanceof PostgresError,
              `${where}: untyped rejection ${(o.error as Error).stack}`,
            );
          }
        }
      } finally {
        await sql.end({ timeout: 0.5 });
      }
    }
  });
  assert.ok(counts.rejected > 0 && counts.resolved > 0, JSON.stringify(counts));
}

Deno.test(
  `fuzz: pipelined queries against mutated answers all settle (seed ${
    hex(CONN_SEED)
  }, ${ROUNDS} rounds)`,
  () => connectionFuzz(false),
);

Deno.test(
  `fuzz: … and every rejection is typed (seed ${hex(CONN_SEED)}, ${ROUNDS} rounds)`,
  () => connectionFuzz(true),
);
