// Fault injection from the server side: a fake server that speaks the protocol badly, during
// startup and while queries are in flight. Every case must end in a typed error, quickly (a
// hang fails the test by a timer), with the driver's socket closed and no outsized allocation;
// the next query on the same client must reconnect (the fake answers every later connection
// correctly) and work. A malformed value inside intact framing (a bad DataRow, invalid UTF-8)
// may instead fail only its query and keep the connection.
//
// Cases marked `ignore` are bugs outside src/protocol; each comment says what and where.
import assert from "node:assert/strict";
import { ConnectionError, type Options, PostgresError, type Sql } from "../mod.ts";
import type { ConnectionErrorCode } from "../src/errors.ts";
import {
  auth,
  backendKeyData,
  bindComplete,
  commandComplete,
  concat,
  cstr,
  dataRow,
  encoder,
  errorResponse,
  fakeClient,
  type FakeColumn,
  type FakeServer,
  FakeSession,
  header,
  int16,
  int32,
  isFetchTypes,
  message,
  parameterDescription,
  parameterStatus,
  parseComplete,
  type Peer,
  readyForQuery,
  rowDescription,
  STARTUP_OK,
  withServer,
} from "./harness/fake_server.ts";
import { delay, within } from "./harness/wait.ts";

// ---------------------------------------------------------------------------------------------
// The fixture

/** A query that has not settled after this long hangs: the test fails. */
const HANG_MS = 5000;
/** A fault must be noticed at once, well before connect_timeout (2 s) could hide a hang. */
const QUICK_MS = 1500;
/** The most a fault may grow the process's resident memory. */
const RSS_LIMIT = 64 * 1024 * 1024;

function client(port: number, extra: Options = {}): Sql {
  return fakeClient(port, { max: 1, ...extra });
}

type Outcome =
  | { ok: true; value: unknown; ms: number }
  | { ok: false; error: unknown; ms: number };

/** Settles `p`; fails the test if it has not settled within `ms` (a hang). */
function settle(p: PromiseLike<unknown>, ms = HANG_MS): Promise<Outcome> {
  const t0 = performance.now();
  const result = Promise.resolve(p).then(
    (value) => ({ ok: true as const, value, ms: performance.now() - t0 }),
    (error) => ({ ok: false as const, error, ms: performance.now() - t0 }),
  );
  return within(result, ms, "hang: the outcome");
}

/** How an outcome reads in an assertion message. */
function show(o: Outcome): string {
  return o.ok ? `resolved ${Deno.inspect(o.value)}` : `rejected ${Deno.inspect(o.error)}`;
}

/** `outcome` undefined: the query failed alone (it ran; the connection may stay up). */
function assertConnectionError(
  o: Outcome,
  code: ConnectionErrorCode,
  outcome: "unknown" | "not-sent" | undefined,
): ConnectionError {
  assert.ok(!o.ok, `expected a rejection, got: ${show(o)}`);
  const e = o.error;
  assert.ok(e instanceof ConnectionError, `expected a ConnectionError, got ${e}`);
  assert.equal(e.code, code, `${e.code}: ${e.message}`);
  if (outcome !== undefined) assert.equal(e.outcome, outcome, e.message);
  assert.ok(o.ms < QUICK_MS, `took ${o.ms} ms`);
  return e;
}

const X: FakeColumn[] = [{ name: "x", type: 25 }];
/** The correct answer to a first query up to its rows: Parse, Describe (S), Bind. */
const HEAD = concat(parseComplete(), parameterDescription([]), rowDescription(X), bindComplete());
const TAIL = concat(commandComplete("SELECT 1"), readyForQuery());

/** What the first connection does wrong; every later connection behaves. */
interface Fault {
  /** Sent instead of a good startup. */
  startup?: Uint8Array | ((peer: Peer) => Promise<void>);
  /**
   * Sent instead of the correct answers to the first `queries` requests (the fetch_types
   * query excepted); `good` holds those answers.
   */
  answer?: (good: Uint8Array[]) => Uint8Array;
  /** Requests to read before answering (default 1). */
  queries?: number;
  /** Close the socket right after the fault. */
  hangUp?: boolean;
}

/**
 * Connection 0 runs the fault; its result is true once the driver has closed the socket
 * ("hung up" if we did). After a query fault it goes on answering correctly, in case the
 * driver keeps the connection; after a startup fault it refuses every query with XX999, so a
 * driver that wrongly accepted the startup fails fast and visibly. Later connections answer
 * correctly until the client leaves.
 */
function faulty(fault: Fault) {
  return async (peer: Peer, index: number): Promise<unknown> => {
    const session = new FakeSession();
    if (index > 0) {
      await peer.handshake();
      await session.serve(peer);
      return "served";
    }
    if (fault.startup instanceof Uint8Array) {
      await peer.startup();
      await peer.send(fault.startup);
    } else if (fault.startup !== undefined) {
      await peer.startup();
      await fault.startup(peer);
    } else {
      await peer.handshake();
      const goods: Uint8Array[] = [];
      while (goods.length < (fault.queries ?? 1)) {
        const seg = await peer.segment();
        if (seg === null) return "the client left before the fault";
        const fetch = isFetchTypes(session, seg);
        const good = session.answer(seg);
        if (fetch) await peer.send(good);
        else goods.push(good);
      }
      await peer.send(fault.answer!(goods));
    }
    if (fault.hangUp) {
      peer.close();
      return "hung up";
    }
    const refusal = concat(
      errorResponse("XX999", "the driver went on after a broken startup", "ERROR"),
      readyForQuery(),
    );
    try {
      for (let seg = await peer.segment(); seg !== null; seg = await peer.segment()) {
        await peer.send(fault.startup === undefined ? session.answer(seg) : refusal);
      }
    } catch {
      // reset by the client: it closed
    }
    return true;
  };
}

/** The next query on `sql` works, on a new connection when `reconnect` (else on either). */
async function assertRecovers(sql: Sql, server: FakeServer, reconnect = true): Promise<void> {
  const again = await settle(sql`select ${"again"} as x`);
  assert.ok(again.ok, `the next query should reconnect and work: ${show(again)}`);
  assert.deepEqual([...(again.value as unknown[])], [{ x: "again" }]);
  if (reconnect) assert.equal(server.results.length, 2, "exactly one new connection");
  else assert.ok(server.results.length <= 2, `${server.results.length} connections`);
}

interface CaseOptions {
  /** Also check that the process's RSS grew by less than RSS_LIMIT. */
  rss?: boolean;
  /** Why the case is ignored (a bug to fix elsewhere), if it is. */
  ignore?: string;
  /** More client options. */
  client?: Options;
  /**
   * The framing is intact, so the driver may fail only the query and keep the connection
   * (then the next query may run on it).
   */
  mayKeepConnection?: boolean;
}

/** One fault: the first query settles as `expect` says, the socket is closed, the next works. */
function faultTest(
  name: string,
  fault: Fault,
  expect: (o: Outcome) => void,
  options: CaseOptions = {},
): void {
  Deno.test({
    name: `fault: ${name}`,
    ignore: options.ignore !== undefined,
    async fn() {
      await withServer(faulty(fault), async (server) => {
        const sql = client(server.port, options.client);
        try {
          const rss = Deno.memoryUsage().rss;
          expect(await settle(sql`select ${"first"} as x`));
          if (options.rss) {
            const grown = Deno.memoryUsage().rss - rss;
            assert.ok(grown < RSS_LIMIT, `RSS grew by ${(grown / 2 ** 20).toFixed(1)} MiB`);
          }
          if (!fault.hangUp && !options.mayKeepConnection) {
            await within(server.results[0], 4000, "the driver should close its socket");
          }
          await assertRecovers(sql, server, !options.mayKeepConnection);
        } finally {
          await sql.end({ timeout: 1 });
        }
      });
    },
  });
}

const violation = (outcome: "unknown" | "not-sent") => (o: Outcome) =>
  void assertConnectionError(o, "PROTOCOL_VIOLATION", outcome);
/** PROTOCOL_VIOLATION for this query; the driver may have kept the connection. */
const queryViolation = (o: Outcome) => {
  const e = assertConnectionError(o, "PROTOCOL_VIOLATION", undefined);
  assert.notEqual(e.outcome, "not-sent", "the query ran");
};
const closed = (outcome: "unknown" | "not-sent") => (o: Outcome) =>
  void assertConnectionError(o, "CONNECTION_CLOSED", outcome);

/** A megabyte of filler, for messages whose declared length is huge but valid. */
const MEGABYTE = new Uint8Array(1 << 20).fill(0x61);

// ---------------------------------------------------------------------------------------------
// 1. During startup: the query never reaches the server ("not-sent")

faultTest(
  "startup: ErrorResponse → PostgresError with the server's code",
  { startup: errorResponse("28000", "no pg_hba.conf entry for host") },
  (o) => {
    assert.ok(!o.ok && o.error instanceof PostgresError, `got: ${show(o)}`);
    assert.equal(o.error.code, "28000");
    assert.equal(o.error.severity, "FATAL");
    assert.ok(o.ms < QUICK_MS, `took ${o.ms} ms`);
  },
);

faultTest(
  "startup: SASLContinue before SASL → PROTOCOL_VIOLATION",
  { startup: auth(11, encoder.encode("r=nonce,s=c2FsdA==,i=4096")) },
  violation("not-sent"),
);

faultTest(
  "startup: SASLFinal before SASL → PROTOCOL_VIOLATION",
  { startup: auth(12, encoder.encode("v=c2lnbmF0dXJl")) },
  violation("not-sent"),
);

faultTest(
  "startup: AuthenticationOk twice → PROTOCOL_VIOLATION",
  { startup: concat(auth(0), auth(0), backendKeyData(1, 2), readyForQuery()) },
  violation("not-sent"),
);

faultTest(
  "startup: ReadyForQuery before AuthenticationOk → PROTOCOL_VIOLATION",
  { startup: concat(backendKeyData(1, 2), readyForQuery()) },
  violation("not-sent"),
);

faultTest(
  "startup: an unknown message type → PROTOCOL_VIOLATION",
  { startup: concat(auth(0), message("~", cstr("what is this"))) },
  violation("not-sent"),
);

faultTest(
  "startup: a query-phase message (DataRow) → PROTOCOL_VIOLATION",
  { startup: concat(auth(0), dataRow(["x"])) },
  violation("not-sent"),
);

faultTest(
  "startup: a truncated message, then the server hangs up → CONNECTION_CLOSED",
  { startup: concat(auth(0), parameterStatus("TimeZone", "UTC").subarray(0, 9)), hangUp: true },
  closed("not-sent"),
);

faultTest(
  "startup: a length of 0x7fffffff → PROTOCOL_VIOLATION without allocating it",
  { startup: concat(header("R", 0x7fffffff), MEGABYTE) },
  violation("not-sent"),
  { rss: true },
);

faultTest(
  "startup: a negative length → PROTOCOL_VIOLATION",
  { startup: concat(header("R", -8), int32(0)) },
  violation("not-sent"),
);

for (const length of [0, 3]) {
  faultTest(
    `startup: a length of ${length} (< 4) → PROTOCOL_VIOLATION`,
    { startup: concat(auth(0), header("S", length), int32(0)) },
    violation("not-sent"),
  );
}

faultTest(
  "startup: 1 GiB declared, 1 MiB sent, then a hang-up → CONNECTION_CLOSED, memory bounded",
  { startup: concat(auth(0), header("S", 0x3fffffff), MEGABYTE), hangUp: true },
  closed("not-sent"),
  { rss: true },
);

faultTest(
  "startup: ErrorResponse without its terminator → PROTOCOL_VIOLATION",
  { startup: message("E", cstr("SFATAL"), cstr("C28000"), cstr("Mno")) },
  violation("not-sent"),
);

faultTest(
  "startup: ParameterStatus without a NUL → PROTOCOL_VIOLATION",
  { startup: concat(auth(0), message("S", encoder.encode("TimeZone"))) },
  violation("not-sent"),
);

faultTest(
  "startup: SASL mechanism list without a NUL → PROTOCOL_VIOLATION",
  { startup: auth(10, encoder.encode("SCRAM-SHA-256")) },
  violation("not-sent"),
);

// Once a bug: an Authentication message shorter than its 4-byte code was read past its body (the
// zeroes of a fresh receive buffer), taken for AuthenticationOk, and the connection succeeded.
faultTest(
  "startup: an Authentication message without its code → PROTOCOL_VIOLATION",
  {
    startup: async (peer) => {
      await peer.send(header("R", 4));
      await delay(50); // its own read, then a normal ending
      await peer.send(concat(backendKeyData(1, 2), readyForQuery()));
    },
  },
  violation("not-sent"),
  {},
);

// Once a bug: BackendKeyData was read without a length check, its secret taken from the next
// message's bytes.
faultTest(
  "startup: a BackendKeyData without its secret → PROTOCOL_VIOLATION",
  { startup: concat(auth(0), message("K", int32(1)), readyForQuery()) },
  violation("not-sent"),
  {},
);

// A protocol error in the same read as the startup's ReadyForQuery kills the fresh connection
// before the pool takes it. The query fails (typed); the next one must get a new connection.
//
// Once two bugs: the pool kept a connection that closed before its open was handled, so with
// max: 1 every later query waited for a slot that never freed; and a fetch_types query that
// failed with its connection was cached, so no later connection could start.
for (const fetchTypes of [false, true]) {
  faultTest(
    `startup: garbage right after ReadyForQuery → PROTOCOL_VIOLATION (fetch_types: ${fetchTypes})`,
    { startup: concat(STARTUP_OK, dataRow(["unexpected"])) },
    violation("not-sent"),
    {
      client: { fetch_types: fetchTypes },
    },
  );
}

// ---------------------------------------------------------------------------------------------
// 2. During a query: it was sent, so its outcome is "unknown"

faultTest(
  "query: an unknown message type ('Q' from the server) → PROTOCOL_VIOLATION",
  { answer: () => concat(HEAD, message("Q", cstr("select 1")), TAIL) },
  violation("unknown"),
);

faultTest(
  "query: a type byte of 0 → PROTOCOL_VIOLATION",
  { answer: () => concat(HEAD, message("\0", int32(0)), TAIL) },
  violation("unknown"),
);

faultTest(
  "query: a startup-only message (AuthenticationOk) → PROTOCOL_VIOLATION",
  { answer: () => concat(HEAD, auth(0), TAIL) },
  violation("unknown"),
);

// A malformed DataRow leaves the framing intact: the driver may fail the query alone (as it does
// for invalid UTF-8) or the connection too (as libpq does); either way with PROTOCOL_VIOLATION.
//
// Once a bug: a DataRow was trusted. Before any RowDescription, or with more columns than
// described, the query rejected with a bare TypeError; with fewer, the row silently lacked keys.
const malformedRow = { mayKeepConnection: true };

faultTest(
  "query: a DataRow before RowDescription → PROTOCOL_VIOLATION, not a TypeError",
  {
    answer: () =>
      concat(
        parseComplete(),
        parameterDescription([]),
        dataRow(["early"]),
        rowDescription(X),
        bindComplete(),
        TAIL,
      ),
  },
  queryViolation,
  malformedRow,
);

faultTest(
  "query: a DataRow with more columns than described → PROTOCOL_VIOLATION",
  { answer: () => concat(HEAD, dataRow(["a", "b"]), TAIL) },
  queryViolation,
  malformedRow,
);

faultTest(
  "query: a DataRow with fewer columns than described → PROTOCOL_VIOLATION",
  { answer: () => concat(HEAD, dataRow([]), TAIL) },
  queryViolation,
  malformedRow,
);

// Once a bug: a column's length was not checked against its DataRow's end, so the messages after
// it (CommandComplete, ReadyForQuery) leaked into the value and the query resolved with them.
faultTest(
  "query: a DataRow column longer than the message → PROTOCOL_VIOLATION",
  { answer: () => concat(HEAD, message("D", int16(1), int32(12), encoder.encode("abc")), TAIL) },
  queryViolation,
  malformedRow,
);

faultTest(
  "query: a DataRow column of length 0x7fffffff → PROTOCOL_VIOLATION",
  {
    answer: () =>
      concat(HEAD, message("D", int16(1), int32(0x7fffffff), encoder.encode("abc")), TAIL),
  },
  queryViolation,
  malformedRow,
);

faultTest(
  "query: a DataRow with bytes after its columns → PROTOCOL_VIOLATION",
  { answer: () => concat(HEAD, message("D", int16(1), int32(1), encoder.encode("ab")), TAIL) },
  queryViolation,
  malformedRow,
);

faultTest(
  "query: a truncated RowDescription → PROTOCOL_VIOLATION",
  {
    answer: () =>
      concat(
        parseComplete(),
        parameterDescription([]),
        message("T", int16(1), cstr("x"), int32(0), int16(0)),
        bindComplete(),
        dataRow(["v"]),
        TAIL,
      ),
  },
  violation("unknown"),
);

faultTest(
  "query: a RowDescription declaring 65535 columns in 20 bytes → PROTOCOL_VIOLATION",
  {
    answer: () =>
      concat(
        parseComplete(),
        parameterDescription([]),
        message("T", int16(-1), new Uint8Array(18)),
        bindComplete(),
        TAIL,
      ),
  },
  violation("unknown"),
);

faultTest(
  "query: CommandComplete without its NUL → PROTOCOL_VIOLATION",
  { answer: () => concat(HEAD, dataRow(["v"]), message("C", encoder.encode("SELECT 1"))) },
  violation("unknown"),
);

faultTest(
  "query: an ErrorResponse without its terminator → PROTOCOL_VIOLATION",
  {
    answer: () =>
      concat(HEAD, message("E", cstr("SERROR"), cstr("C22012"), encoder.encode("Mdiv")), TAIL),
  },
  violation("unknown"),
);

faultTest(
  "query: a NoticeResponse without its terminator → PROTOCOL_VIOLATION",
  { answer: () => concat(message("N", cstr("SWARNING"), encoder.encode("Mcut")), HEAD, TAIL) },
  violation("unknown"),
);

faultTest(
  "query: ParameterStatus with bytes after its value → PROTOCOL_VIOLATION",
  {
    answer: () =>
      concat(message("S", cstr("TimeZone"), cstr("UTC"), cstr("junk")), HEAD, dataRow(["v"]), TAIL),
  },
  violation("unknown"),
);

faultTest(
  "query: a ParameterDescription declaring 65535 types in 2 bytes → PROTOCOL_VIOLATION",
  {
    answer: () =>
      concat(parseComplete(), message("t", int16(-1)), rowDescription(X), bindComplete(), TAIL),
  },
  violation("unknown"),
);

// Once a bug: ParameterDescription was decoded without its end, so its type OIDs were read from
// the messages that followed.
faultTest(
  "query: a ParameterDescription declaring 3 types in 2 bytes → PROTOCOL_VIOLATION",
  {
    answer: () =>
      concat(parseComplete(), message("t", int16(3)), rowDescription(X), bindComplete(), TAIL),
  },
  violation("unknown"),
  {},
);

faultTest(
  "query: a length of 0x7fffffff → PROTOCOL_VIOLATION without allocating it",
  { answer: () => concat(HEAD, header("D", 0x7fffffff), MEGABYTE) },
  violation("unknown"),
  { rss: true },
);

faultTest(
  "query: 1 GiB declared, 1 MiB sent, then a hang-up → CONNECTION_CLOSED, memory bounded",
  { answer: () => concat(HEAD, header("D", 0x3fffffff), MEGABYTE), hangUp: true },
  closed("unknown"),
  { rss: true },
);

for (const length of [0, 3]) {
  faultTest(
    `query: a length of ${length} (< 4) → PROTOCOL_VIOLATION`,
    { answer: () => concat(HEAD, header("D", length), int32(0)) },
    violation("unknown"),
  );
}

faultTest(
  "query: the server hangs up mid-message → CONNECTION_CLOSED",
  { answer: () => concat(HEAD, dataRow(["partial"]).subarray(0, 9)), hangUp: true },
  closed("unknown"),
);

faultTest(
  "query: the server hangs up between messages → CONNECTION_CLOSED",
  { answer: () => HEAD, hangUp: true },
  closed("unknown"),
);

faultTest(
  "query: a FATAL ErrorResponse, then a hang-up → CONNECTION_CLOSED caused by it",
  { answer: () => concat(HEAD, errorResponse("57P01", "terminating connection")), hangUp: true },
  (o) => {
    const e = assertConnectionError(o, "CONNECTION_CLOSED", "unknown");
    assert.ok(e.cause instanceof PostgresError && e.cause.code === "57P01", `${e.cause}`);
  },
);

// Once a bug: an empty ReadyForQuery took its status from the next byte in the buffer, and a
// status other than I, T or E was stored.
faultTest(
  "query: ReadyForQuery without its status byte → PROTOCOL_VIOLATION",
  { answer: () => concat(HEAD, dataRow(["v"]), commandComplete("SELECT 1"), message("Z")) },
  violation("unknown"),
  {},
);

faultTest(
  "query: ReadyForQuery with status 'X' → PROTOCOL_VIOLATION",
  { answer: () => concat(HEAD, dataRow(["v"]), commandComplete("SELECT 1"), readyForQuery("X")) },
  violation("unknown"),
  {},
);

// An extra ReadyForQuery arrives with nothing in flight: the query it follows completed and
// keeps its result, but the connection can no longer be trusted and is closed.
faultTest(
  "query: an extra ReadyForQuery with nothing in flight → connection closed",
  { answer: ([good]) => concat(good, readyForQuery()) },
  (o) => {
    assert.ok(o.ok, `the answered query should resolve: ${show(o)}`);
    assert.deepEqual([...(o.value as unknown[])], [{ x: "first" }]);
  },
);

// ---------------------------------------------------------------------------------------------
// 3. Invalid UTF-8 in a text value: that query must reject with a typed error, never return
// U+FFFD. The connection may stay up (the framing is intact) or be closed; either way the next
// query must work. Long values go through TextDecoder, short ones through a byte loop first.

const INVALID_UTF8: [string, Uint8Array][] = [
  ["0xff 0xfe", new Uint8Array([0x61, 0xff, 0xfe])],
  ["a lone continuation byte", new Uint8Array([0x80])],
  ["a truncated sequence", new Uint8Array([0x61, 0xe2, 0x82])],
  ["an overlong '/'", new Uint8Array([0xc0, 0xaf])],
  ["a UTF-16 surrogate", new Uint8Array([0xed, 0xa0, 0x80])],
  ["0xff in a long value", concat(encoder.encode("a".repeat(40)), new Uint8Array([0xff]))],
];

for (const [what, bytes] of INVALID_UTF8) {
  faultTest(
    `query: invalid UTF-8 in a text value (${what}) → PROTOCOL_VIOLATION`,
    { answer: () => concat(HEAD, dataRow([bytes]), TAIL) },
    queryViolation,
    { mayKeepConnection: true },
  );
}

// ---------------------------------------------------------------------------------------------
// 4. A thousand queries in flight when the server breaks: every one settles, none hangs.

const N = 1000;
/** Not a message: 'h', then a length of 0x656c6c6f ("ello"), over PostgreSQL's 1 GiB limit. */
const GARBAGE = encoder.encode("hello world, this is not PostgreSQL");

function pipelineTest(
  name: string,
  fault: Fault,
  check: (outcomes: Outcome[]) => void,
): void {
  Deno.test(`fault: ${N} pipelined queries: ${name}`, async () => {
    await withServer(faulty({ ...fault, queries: N }), async (server) => {
      const sql = client(server.port);
      try {
        const all = await settle(
          Promise.all(
            Array.from({ length: N }, (_, i) => settle(sql`select ${`v${i}`} as x`)),
          ),
        );
        assert.ok(all.ok, show(all));
        check(all.value as Outcome[]);
        if (!fault.hangUp) {
          await within(server.results[0], 4000, "the driver should close its socket");
        }
        await assertRecovers(sql, server);
      } finally {
        await sql.end({ timeout: 1 });
      }
    });
  });
}

function assertAllRejected(outcomes: Outcome[], code: ConnectionErrorCode): void {
  assert.equal(outcomes.length, N);
  for (const o of outcomes) assertConnectionError(o, code, "unknown");
}

pipelineTest(
  "the server writes garbage → all reject with PROTOCOL_VIOLATION (outcome unknown)",
  { answer: () => GARBAGE },
  (outcomes) => assertAllRejected(outcomes, "PROTOCOL_VIOLATION"),
);

pipelineTest(
  "an unknown message mid-answer → all reject with PROTOCOL_VIOLATION",
  { answer: () => concat(HEAD, message("~", new Uint8Array(10))) },
  (outcomes) => assertAllRejected(outcomes, "PROTOCOL_VIOLATION"),
);

pipelineTest(
  "the server hangs up → all reject with CONNECTION_CLOSED (outcome unknown)",
  { answer: () => new Uint8Array(0), hangUp: true },
  (outcomes) => assertAllRejected(outcomes, "CONNECTION_CLOSED"),
);

pipelineTest(
  "half are answered, then garbage → those resolve, the rest reject",
  {
    answer: (good) => concat(...good.slice(0, N / 2), GARBAGE),
  },
  (outcomes) => {
    assert.equal(outcomes.length, N);
    for (let i = 0; i < N / 2; i++) {
      const o = outcomes[i];
      assert.ok(o.ok, `query ${i}: ${show(o)}`);
      assert.deepEqual([...(o.value as unknown[])], [{ x: `v${i}` }]);
    }
    for (let i = N / 2; i < N; i++) {
      assertConnectionError(outcomes[i], "PROTOCOL_VIOLATION", "unknown");
    }
  },
);
