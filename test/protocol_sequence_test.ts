// One plain test per class of protocol violation (src/connection/sequence.ts): a fake server
// answers correctly except for one message added, dropped, retyped or out of place, and the
// query in flight must reject with PROTOCOL_VIOLATION (outcome "unknown"), never resolve. Then
// the answers a real server sends in the flows the checks cover (cursors, batches, COPY,
// several statements) still resolve.
import assert from "node:assert/strict";
import postgres, { ConnectionError, PostgresError } from "./harness/postgres.ts";
import { databaseUrl } from "./harness/env.ts";
import { quiet } from "./harness/connect.ts";
import { statementBounds } from "../src/connection/sequence.ts";
import {
  auth,
  backendKeyData,
  bindComplete,
  commandComplete,
  concat,
  cstr,
  encoder,
  errorResponse,
  fakeClient,
  FakeSession,
  type FrontendMessage,
  int32,
  isFetchTypes,
  message,
  messagesOf,
  parameterStatus,
  type Peer,
  readyForQuery,
  type Responder,
  STARTUP_OK,
  typeOf,
  withServer,
} from "./harness/fake_server.ts";

/** Rewrites the correct answer (its messages) to one user query; `text` is the query's. */
type Rewrite = (answer: Uint8Array[], text: string) => Uint8Array[];

const THREE_ROWS: Responder = (text, params) =>
  text.includes("pg_catalog.pg_type")
    ? { columns: [{ name: "oid", type: 23 }], rows: [] }
    : { columns: [{ name: "x", type: 25 }], rows: [["1"], ["2"], [params[0] ?? "3"]] };

/** The messages of one request: up to Sync, a simple Query, or a cursor's Flush. */
async function request(peer: Peer): Promise<FrontendMessage[] | null> {
  const out: FrontendMessage[] = [];
  for (;;) {
    const m = await peer.message();
    if (m.type === "X") return null;
    out.push(m);
    if (m.type === "S" || m.type === "Q" || m.type === "H") return out;
  }
}

/**
 * A server that answers every query correctly except that the answers to the first connection's
 * user queries (not fetch_types) go through `rewrite` until one was changed; everything after
 * is answered correctly, so a test can see that the client recovers.
 */
function rewriting(rewrite: Rewrite, respond: Responder = THREE_ROWS, startup = STARTUP_OK) {
  return async (peer: Peer, index: number): Promise<void> => {
    const session = new FakeSession(respond);
    let changed = index > 0;
    try {
      await peer.startup();
      await peer.send(startup);
      for (let seg = await request(peer); seg !== null; seg = await request(peer)) {
        const good = session.answer(seg);
        if (changed || isFetchTypes(session, seg)) {
          await peer.send(good);
          continue;
        }
        const bad = concat(...rewrite(messagesOf(good), session.textOf(seg)));
        changed = bad.length !== good.length || bad.some((b, i) => b !== good[i]);
        await peer.send(bad);
      }
    } catch {
      // the client hung up
    } finally {
      peer.close();
    }
  };
}

/** Asserts `p` rejects with PROTOCOL_VIOLATION and the outcome "unknown" (or `outcome`). */
async function violates(
  p: PromiseLike<unknown>,
  outcomes: string[] = ["unknown"],
): Promise<ConnectionError> {
  const e = await Promise.resolve(p).then(
    (v) => assert.fail(`resolved with ${JSON.stringify(v)}`),
    (e) => e,
  );
  assert.ok(e instanceof ConnectionError, `not a ConnectionError: ${e?.stack ?? e}`);
  assert.equal(e.code, "PROTOCOL_VIOLATION", e.message);
  assert.ok(outcomes.includes(e.outcome!), `outcome ${e.outcome}`);
  return e;
}

const without = (type: string, nth = 0) => (answer: Uint8Array[]): Uint8Array[] => {
  let seen = 0;
  return answer.filter((m) => typeOf(m) !== type || seen++ !== nth);
};

const twice = (type: string) => (answer: Uint8Array[]): Uint8Array[] =>
  answer.flatMap((m, i) =>
    typeOf(m) === type && answer.findIndex((n) => typeOf(n) === type) === i ? [m, m] : [m]
  );

/** Runs one query against a server rewriting its answer; returns its outcome for the test. */
async function oneQuery(
  rewrite: Rewrite,
  run: (sql: ReturnType<typeof fakeClient>) => PromiseLike<unknown>,
  respond?: Responder,
): Promise<PromiseSettledResult<unknown>> {
  let outcome!: PromiseSettledResult<unknown>;
  await withServer(rewriting(rewrite, respond), async (server) => {
    const sql = fakeClient(server.port, { fetch_types: false, max: 1 });
    try {
      [outcome] = await Promise.allSettled([run(sql)]);
      // The connection was destroyed or not, and either way the next query is answered.
      assert.deepEqual([...await sql`select ${"next"} as x`], [{ x: "1" }, { x: "2" }, {
        x: "next",
      }]);
    } finally {
      await sql.end({ timeout: 1 });
    }
  });
  return outcome;
}

const rejected = (o: PromiseSettledResult<unknown>): unknown => {
  assert.equal(o.status, "rejected", o.status === "fulfilled" ? JSON.stringify(o.value) : "");
  return (o as PromiseRejectedResult).reason;
};

const q = (sql: ReturnType<typeof fakeClient>) => sql`select ${"a"} as x`;

/** Asserts a query fails with PROTOCOL_VIOLATION when the server's startup answer is `startup`. */
async function refusedAtStartup(startup: Uint8Array): Promise<void> {
  await withServer(rewriting((a) => a, THREE_ROWS, startup), async (server) => {
    const sql = fakeClient(server.port, { fetch_types: false, max: 1 });
    try {
      const e = await q(sql).then(() => assert.fail("resolved"), (e) => e);
      assert.ok(e instanceof ConnectionError && e.code === "PROTOCOL_VIOLATION", String(e));
    } finally {
      await sql.end({ timeout: 1 });
    }
  });
}

Deno.test("sequence: a correct answer with notices, parameters and notifications between every message resolves", async () => {
  const notice = message("N", cstr("SNOTICE"), cstr("C00000"), cstr("Mhello"), cstr(""));
  const notify = message("A", int32(7), cstr("chan"), cstr("payload"));
  const o = await oneQuery(
    (answer) => answer.flatMap((m) => [notice, parameterStatus("TimeZone", "UTC"), notify, m]),
    q,
  );
  assert.equal(o.status, "fulfilled");
  assert.deepEqual([...(o as PromiseFulfilledResult<unknown[]>).value], [{ x: "1" }, { x: "2" }, {
    x: "a",
  }]);
});

Deno.test("sequence: rows before ParseComplete (it was dropped) reject", async () => {
  await violates(Promise.reject(rejected(await oneQuery(without("1"), q))));
});

Deno.test("sequence: a missing BindComplete rejects", async () => {
  await violates(Promise.reject(rejected(await oneQuery(without("2"), q))));
});

Deno.test("sequence: ReadyForQuery where CommandComplete was due (dropped) rejects, never resolves", async () => {
  await violates(Promise.reject(rejected(await oneQuery(without("C"), q))));
});

Deno.test("sequence: a duplicated or dropped DataRow disagrees with the tag's count and rejects", async () => {
  await violates(Promise.reject(rejected(await oneQuery(twice("D"), q))));
  await violates(Promise.reject(rejected(await oneQuery(without("D", 1), q))));
});

Deno.test("sequence: a DataRow retyped as CopyData rejects", async () => {
  const retype = (answer: Uint8Array[]) =>
    answer.map((m) => typeOf(m) === "D" ? concat(encoder.encode("d"), m.subarray(1)) : m);
  await violates(Promise.reject(rejected(await oneQuery(retype, q))));
});

Deno.test("sequence: a dropped ErrorResponse makes select 1/0 reject, not resolve empty", async () => {
  const error = errorResponse("22012", "division by zero", "ERROR");
  // The server's answer: ParseComplete, ..., RowDescription, BindComplete, then the error.
  const failing = (answer: Uint8Array[]) =>
    answer.flatMap((m) => typeOf(m) === "D" ? [] : typeOf(m) === "C" ? [error] : [m]);
  const e = rejected(await oneQuery(failing, q));
  assert.ok(e instanceof PostgresError && e.code === "22012", String(e));
  const dropped = (answer: Uint8Array[]) =>
    answer.filter((m) => typeOf(m) !== "D" && typeOf(m) !== "C");
  await violates(Promise.reject(rejected(await oneQuery(dropped, q))));
});

Deno.test("sequence: an ErrorResponse without SQLSTATE, message or severity still rejects, and the connection stays usable", async () => {
  const bare = message("E", cstr(""));
  const e = rejected(
    await oneQuery((answer) => answer.flatMap((m) => typeOf(m) === "C" ? [bare] : [m]), q),
  );
  assert.ok(e instanceof PostgresError, String(e));
  assert.equal(e.code, "NO_SQLSTATE");
  assert.equal(e.severity, "ERROR");
});

Deno.test("sequence: an ErrorResponse of severity FATAL alone, then ReadyForQuery, rejects: FATAL closes the connection", async () => {
  const fatal = message("E", cstr("SFATAL"), cstr(""));
  const e = rejected(
    await oneQuery(
      (answer) => answer.flatMap((m) => typeOf(m) === "D" ? [] : typeOf(m) === "C" ? [fatal] : [m]),
      q,
    ),
  );
  assert.ok(e instanceof ConnectionError, String(e));
  assert.equal(e.code, "CONNECTION_CLOSED");
  assert.ok(e.cause instanceof PostgresError && e.cause.severity === "FATAL");
});

Deno.test("sequence: one ReadyForQuery too many rejects the query behind it", async () => {
  await withServer(
    rewriting((answer, text) => text.includes("first") ? [...answer, readyForQuery()] : answer),
    async (server) => {
      const sql = fakeClient(server.port, { fetch_types: false, max: 1 });
      try {
        const [first, second] = await Promise.allSettled([
          sql`select ${"a"} as first`,
          sql`select ${"b"} as second`,
        ]);
        assert.equal(first.status, "fulfilled");
        await violates(Promise.reject(rejected(second)));
      } finally {
        await sql.end({ timeout: 1 });
      }
    },
  );
});

Deno.test("sequence: a ReadyForQuery with nothing in flight closes the connection; the next query runs on a new one", async () => {
  await withServer(rewriting((answer) => [...answer, readyForQuery()]), async (server) => {
    const sql = fakeClient(server.port, { fetch_types: false, max: 1 });
    try {
      assert.deepEqual([...await q(sql)], [{ x: "1" }, { x: "2" }, { x: "a" }]);
      assert.deepEqual([...await sql`select 'next' as x`], [{ x: "1" }, { x: "2" }, { x: "3" }]);
      assert.equal(server.results.length, 2, "the second query needed a new connection");
    } finally {
      await sql.end({ timeout: 1 });
    }
  });
});

Deno.test("sequence: a ReadyForQuery with an unknown status byte rejects, in the read loop and at startup", async () => {
  const bad = (answer: Uint8Array[]) =>
    answer.map((m) => typeOf(m) === "Z" ? message("Z", encoder.encode("X")) : m);
  await violates(Promise.reject(rejected(await oneQuery(bad, q))));
  await refusedAtStartup(concat(auth(0), backendKeyData(1, 2), message("Z", encoder.encode("X"))));
});

Deno.test("sequence: BackendKeyData sent twice at startup is refused", async () => {
  await refusedAtStartup(
    concat(auth(0), backendKeyData(1, 2), backendKeyData(1, 2), readyForQuery()),
  );
});

Deno.test("sequence: a duplicated ReadyForQuery after startup never hands the type lookup's rows to the first query", async () => {
  await withServer(async (peer, index) => {
    const session = new FakeSession(THREE_ROWS);
    try {
      await peer.handshake();
      // The first connection's startup ends with two ReadyForQuery.
      if (index === 0) await peer.send(readyForQuery());
      for (let seg = await peer.segment(); seg !== null; seg = await peer.segment()) {
        await peer.send(session.answer(seg));
      }
    } catch {
      // hung up
    } finally {
      peer.close();
    }
  }, async (server) => {
    const sql = fakeClient(server.port, { max: 1 });
    try {
      const [o] = await Promise.allSettled([q(sql)]);
      // Rejected (it was written to the broken connection), or run again on a new one: never
      // resolved with another query's rows.
      if (o.status === "fulfilled") {
        assert.deepEqual([...o.value], [{ x: "1" }, { x: "2" }, { x: "a" }]);
      } else await violates(Promise.reject(o.reason), ["unknown", "not-sent"]);
    } finally {
      await sql.end({ timeout: 1 });
    }
  });
});

Deno.test("sequence: a cursor's PortalSuspended after fewer rows than asked for rejects", async () => {
  // The fake server ignores row limits: the answer is cut to one row and a PortalSuspended.
  const suspended = (answer: Uint8Array[]) => {
    const first = answer.findIndex((m) => typeOf(m) === "D");
    return [...answer.slice(0, first + 1), message("s")];
  };
  const o = await oneQuery(suspended, async (sql) => {
    for await (const _batch of sql`select ${"a"} as x`.cursor(2)) {
      // the first batch never comes
    }
  });
  await violates(Promise.reject(rejected(o)));
});

Deno.test("sequence: a cursor's rows that come before it asked for the next batch reject", async () => {
  // Two batches of two rows in one chunk: the first makes the cursor ask for the second, which
  // it then holds for its consumer; a row and a completion follow that it never asked for.
  const early = (answer: Uint8Array[]) => {
    const [a, b, c] = answer.filter((m) => typeOf(m) === "D");
    const head = answer.slice(0, answer.findIndex((m) => typeOf(m) === "D"));
    return [...head, a, b, message("s"), a, b, message("s"), c, commandComplete("SELECT 1")];
  };
  const o = await oneQuery(early, async (sql) => {
    for await (const _batch of sql`select ${"a"} as x`.cursor(2)) {
      // the first batch may come; the second must not
    }
  });
  const e = await violates(Promise.reject(rejected(o)));
  assert.match(e.message, /before the cursor asked for more rows/);
});

Deno.test("sequence: a describe() answered with a BindComplete it never asked for rejects", async () => {
  const o = await oneQuery(
    (answer) => [answer[0], bindComplete(), ...answer.slice(1)],
    (sql) => sql`select ${"a"} as x`.describe(),
  );
  await violates(Promise.reject(rejected(o)));
});

Deno.test("sequence: a query skipped in a failed batch that gets rows instead rejects", async () => {
  const error = errorResponse("22012", "division by zero", "ERROR");
  let second!: Promise<unknown>;
  await withServer(
    rewriting((answer) => {
      // Two batched queries: the first fails, the server goes on answering the second.
      const firstC = answer.findIndex((m) => typeOf(m) === "C");
      if (firstC === answer.length - 2) return answer; // not the batch
      return answer.flatMap((m, i) => i === firstC ? [error] : [m]);
    }),
    async (server) => {
      const sql = fakeClient(server.port, { fetch_types: false, max: 1 });
      try {
        await sql.begin(async (tx) => {
          const first = tx`select ${"a"} as x`;
          second = tx`select ${"b"} as x`;
          await Promise.allSettled([first, second]);
        }).catch(() => {});
        await violates(second);
      } finally {
        await sql.end({ timeout: 1 });
      }
    },
  );
});

Deno.test("sequence: COPY TO with a dropped CopyData disagrees with its tag and rejects", async () => {
  const row = (s: string) => message("d", encoder.encode(s));
  const copyOut = concat(
    message("H", new Uint8Array([0]), new Uint8Array([0, 1, 0, 0])),
    row("1\n"),
    row("3\n"),
    message("c"),
    commandComplete("COPY 3"),
    readyForQuery(),
  );
  await withServer(async (peer) => {
    const session = new FakeSession(THREE_ROWS);
    try {
      await peer.handshake();
      for (let seg = await peer.segment(); seg !== null; seg = await peer.segment()) {
        await peer.send(session.textOf(seg).startsWith("copy") ? copyOut : session.answer(seg));
      }
    } catch {
      // hung up
    } finally {
      peer.close();
    }
  }, async (server) => {
    const sql = fakeClient(server.port, { fetch_types: false, max: 1 });
    try {
      await violates(sql.unsafe("copy t to stdout"));
    } finally {
      await sql.end({ timeout: 1 });
    }
  });
});

// What a real server sends in the flows the checks follow must still pass them.
Deno.test("sequence: real answers pass: cursor batches, a batch in a transaction, several statements, COPY, describe", async () => {
  await using sql = postgres(databaseUrl(), { max: 1, ...quiet });
  const batches: number[] = [];
  for await (const rows of sql`select g from generate_series(1, 10) g`.cursor(3)) {
    batches.push(rows.length);
  }
  assert.deepEqual(batches, [3, 3, 3, 1]);
  const exact: number[] = [];
  for await (const rows of sql`select g from generate_series(1, 6) g`.cursor(3)) {
    exact.push(rows.length);
  }
  assert.deepEqual(exact, [3, 3]);
  // Closed early, while its next batch (the last rows and the completion) was on its way: the
  // server answers the portal's Close even after the portal completed.
  const [{ pid }] = await sql`select pg_backend_pid() as pid`;
  for (let i = 0; i < 20; i++) {
    for await (const _rows of sql`select g from generate_series(1, 3) g`.cursor(2)) break;
  }
  // On the same connection: none of it was taken for a violation.
  assert.deepEqual([...await sql`select pg_backend_pid() as pid`], [{ pid }]);
  const [a, b] = await sql.begin((tx) => [
    tx`select ${1}::int as n`,
    tx`select g from generate_series(1, 4) g`,
  ]);
  assert.deepEqual([a.length, b.length], [1, 4]);
  const many = await sql.unsafe(
    "select 1 as a; select 2 as b union all select 3; create temp table seq_t (n int)",
  );
  assert.equal(many.length, 3);
  await sql`insert into seq_t select generate_series(1, 5)`;
  const returning = await sql`update seq_t set n = n + 1 returning n`;
  assert.equal(returning.count, 5);
  assert.equal(returning.length, 5);
  const into = await sql`create temp table seq_u as select * from seq_t`;
  assert.equal(into.count, 5);
  const chunks: Uint8Array[] = [];
  for await (const c of await sql`copy seq_t to stdout with (format csv, header)`.readable()) {
    chunks.push(c);
  }
  assert.equal(new TextDecoder().decode(concat(...chunks)).trim().split("\n").length, 6);
  const binary: Uint8Array[] = [];
  for await (const c of await sql`copy seq_t to stdout (format binary)`.readable()) binary.push(c);
  assert.ok(binary.length > 0);
  const d = await sql`select ${1}::int as n`.describe();
  assert.equal(d.columns.length, 1);
  assert.deepEqual([...await sql`select ''`.values()], [[""]]);
  assert.equal((await sql.unsafe("")).count, null);
});

Deno.test("sequence: a duplicated CommandComplete of a one-statement simple Query rejects", async () => {
  await violates(
    Promise.reject(rejected(await oneQuery(twice("C"), (sql) => sql.unsafe("select 'a' as x")))),
  );
});

Deno.test("sequence: a two-statement simple Query answered as one (its ReadyForQuery comes early) rejects", async () => {
  // The fake server answers any simple Query with one statement's result: the second is missing.
  await violates(
    Promise.reject(
      rejected(await oneQuery((answer) => answer, (sql) => sql.unsafe("select 1; select 2"))),
    ),
  );
});

Deno.test("sequence: statementBounds counts a simple Query's statements, or only bounds them", () => {
  const cases: [string, [number, number]][] = [
    ["select 1", [1, 1]],
    ["select 1; select 2", [2, 2]],
    ["select 1;", [1, 1]],
    ["select ';'; select 2", [2, 2]],
    [`select "a;b" from t; select 2`, [2, 2]],
    ["select $$;$$, $x$;$x$; select 2", [2, 2]],
    ["select 1; -- ; select 2\n", [1, 1]],
    ["/* ; /* ; */ */ select 1; select 2", [2, 2]],
    [
      "create rule r as on insert to t do also (insert into u values (1); delete from u); select 1",
      [
        2,
        2,
      ],
    ],
    ["select E'\\';'; select 1", [0, 3]],
    ["create function f() returns int begin atomic select 1; end; select 2", [0, 3]],
    [";;", [0, 3]],
    ["select 'unterminated; select 2", [0, 2]],
  ];
  for (const [text, bounds] of cases) assert.deepEqual(statementBounds(text), bounds, text);
});
