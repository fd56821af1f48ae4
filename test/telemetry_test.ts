// OpenTelemetry through Deno's own exporter: test/harness/telemetry_app.ts runs as a child with
// OTEL_DENO=true, exporting OTLP/HTTP JSON to a receiver this test starts on loopback; what the
// receiver got is checked span by span. No mock of the telemetry API anywhere.
import assert from "node:assert/strict";
import { databaseUrl } from "./harness/env.ts";
import {
  otelEnv,
  type ReceivedPoint,
  type ReceivedSpan,
  startOtlpReceiver,
} from "./harness/otlp_receiver.ts";
import { serverTest, SEVERAL_SESSIONS } from "./harness/pglite_mode.ts";

const app = new URL("./harness/telemetry_app.ts", import.meta.url).pathname;

/** Runs the app once and returns what it exported (one run serves every test below). */
async function exported(): Promise<
  { spans: ReceivedSpan[]; points: ReceivedPoint[]; exports: ReceivedPoint[][] }
> {
  const receiver = startOtlpReceiver();
  try {
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", "--no-lock", app, databaseUrl()],
      env: otelEnv(receiver),
      stdout: "piped",
      stderr: "piped",
    }).output();
    const err = new TextDecoder().decode(out.stderr);
    assert.ok(out.success, `the app failed: ${err}`);
    return {
      spans: [...receiver.spans],
      points: [...receiver.points],
      exports: [...receiver.exports],
    };
  } finally {
    await receiver.close();
  }
}

let run: ReturnType<typeof exported> | undefined;
const once = () => run ??= exported();

const ours = (spans: ReceivedSpan[]) => spans.filter((s) => s.scope === "pgpipe");
/** The Deno.serve span of a request path (server kind). */
function requestSpan(spans: ReceivedSpan[], path: string): ReceivedSpan {
  const found = spans.find((s) => s.kind === 2 && s.attributes["url.path"] === path);
  assert.ok(found, `no request span for ${path}`);
  return found;
}
const childrenOf = (spans: ReceivedSpan[], parent: ReceivedSpan) =>
  ours(spans).filter((s) => s.parentSpanId === parent.spanId && s.traceId === parent.traceId);

serverTest(
  SEVERAL_SESSIONS,
  "telemetry: a query span per query, a child of the Deno.serve request span",
  async () => {
    const { spans } = await once();
    const under = childrenOf(spans, requestSpan(spans, "/serial"));
    // The first query opened the connection: that connect span is under the request too.
    assert.equal(under.filter((s) => s.name === "connect").length, 1);
    const serial = under.filter((s) => s.name !== "connect");
    assert.equal(serial.length, 3);
    const url = new URL(databaseUrl());
    for (const s of serial) {
      assert.equal(s.name, "SELECT pg_type");
      assert.equal(s.kind, 3); // client
      assert.equal(s.attributes["db.system.name"], "postgresql");
      assert.equal(s.attributes["db.namespace"], url.pathname.slice(1));
      assert.equal(s.attributes["db.operation.name"], "SELECT");
      assert.equal(s.attributes["db.collection.name"], "pg_type");
      assert.equal(s.attributes["db.query.text"], "select $1::int as id from pg_type limit 1");
      assert.equal(s.attributes["server.address"], url.hostname);
      assert.equal(s.attributes["server.port"], Number(url.port));
      assert.equal(s.attributes["db.response.returned_rows"], 1);
      assert.equal(s.status.code, 0);
    }
    // The values are parameters, never in the text.
    for (const s of ours(spans)) assert.ok(!String(s.attributes["db.query.text"]).includes("424"));
    // The first query prepared the statement; the others reused it.
    assert.deepEqual(serial.map((s) => s.attributes["pgpipe.statement"]).sort(), [
      "cached",
      "cached",
      "prepared",
    ]);
    // Serial: each starts after the one before ended.
    const byStart = serial.toSorted((a, b) => Number(a.start - b.start));
    for (let i = 1; i < byStart.length; i++) assert.ok(byStart[i].start >= byStart[i - 1].end);
  },
);

serverTest(
  SEVERAL_SESSIONS,
  "telemetry: pipelined queries overlap, written behind one another",
  async () => {
    const { spans } = await once();
    const spansOf = childrenOf(spans, requestSpan(spans, "/pipelined"))
      .filter((s) => s.name === "SELECT pg_class");
    assert.equal(spansOf.length, 3);
    const lastStart = spansOf.reduce((m, s) => s.start > m ? s.start : m, 0n);
    const firstEnd = spansOf.reduce((m, s) => s.end < m ? s.end : m, spansOf[0].end);
    assert.ok(lastStart < firstEnd, "all three were in flight at once");
    const behind = spansOf.map((s) => s.attributes["pgpipe.pipeline.behind"]).sort();
    // The first may have waited for a connection to open (then it has no position).
    assert.ok(behind.includes(1) && behind.includes(2), `behind: ${behind}`);
  },
);

serverTest(
  SEVERAL_SESSIONS,
  "telemetry: a failed query has error status and its SQLSTATE",
  async () => {
    const { spans } = await once();
    const [failed] = childrenOf(spans, requestSpan(spans, "/error"));
    assert.equal(failed.name, "SELECT");
    assert.equal(failed.status.code, 2);
    assert.match(failed.status.message ?? "", /division by zero/);
    assert.equal(failed.attributes["db.response.status_code"], "22012");
    assert.equal(failed.attributes["error.type"], "22012");
  },
);

serverTest(
  SEVERAL_SESSIONS,
  "telemetry: a cancelled query has the cancel event and 57014",
  async () => {
    const { spans } = await once();
    const [cancelled] = childrenOf(spans, requestSpan(spans, "/cancel"))
      .filter((s) => s.name !== "connect");
    assert.deepEqual(cancelled.events.map((e) => e.name), ["pgpipe.cancel"]);
    assert.equal(cancelled.attributes["db.response.status_code"], "57014");
    assert.equal(cancelled.status.code, 2);
  },
);

serverTest(
  SEVERAL_SESSIONS,
  "telemetry: a statement that went stale is re-prepared, and says so",
  async () => {
    const { spans } = await once();
    const selects = childrenOf(spans, requestSpan(spans, "/reprepare"))
      .filter((s) => s.name === "SELECT otel_replan");
    assert.equal(selects.length, 2);
    assert.equal(selects[0].attributes["pgpipe.reprepared"], undefined);
    assert.equal(selects[1].attributes["pgpipe.reprepared"], true);
    assert.equal(selects[1].status.code, 0);
  },
);

serverTest(
  SEVERAL_SESSIONS,
  "telemetry: sql.begin is one span, the parent of its queries",
  async () => {
    const { spans } = await once();
    const [tx] = childrenOf(spans, requestSpan(spans, "/transaction"));
    assert.equal(tx.name, "transaction");
    const inside = childrenOf(spans, tx).map((s) => s.attributes["db.operation.name"]);
    assert.deepEqual(inside, ["BEGIN", "SELECT", "SELECT", "COMMIT"]);
  },
);

serverTest(
  SEVERAL_SESSIONS,
  "telemetry: sql.begin() without a callback: one span from BEGIN to commit()",
  async () => {
    const { spans } = await once();
    const [tx] = childrenOf(spans, requestSpan(spans, "/using"));
    assert.equal(tx.name, "transaction");
    const inside = childrenOf(spans, tx).map((s) => s.attributes["db.operation.name"]);
    assert.deepEqual(inside, ["BEGIN", "SELECT", "COMMIT"]);
    assert.ok(childrenOf(spans, tx).every((s) => s.end <= tx.end));
  },
);

serverTest(
  SEVERAL_SESSIONS,
  "telemetry: a cursor and a COPY are one span each, with their row counts",
  async () => {
    const { spans } = await once();
    const [cursor] = childrenOf(spans, requestSpan(spans, "/cursor"));
    assert.equal(cursor.attributes["pgpipe.operation"], "cursor");
    assert.equal(cursor.attributes["db.response.returned_rows"], 25);
    const copy = childrenOf(spans, requestSpan(spans, "/copy"))
      .find((s) => s.attributes["pgpipe.operation"] === "copy");
    assert.ok(copy);
    assert.equal(copy.name, "COPY");
    assert.equal(copy.attributes["db.response.returned_rows"], 7);
  },
);

serverTest(
  SEVERAL_SESSIONS,
  "telemetry: sql.unsafe text without parameters is never recorded, not by a cursor or a COPY either",
  async () => {
    const { spans } = await once();
    const under = childrenOf(spans, requestSpan(spans, "/unsafe"));
    const kinds = under.map((s) => s.attributes["pgpipe.operation"] ?? "query");
    assert.deepEqual(kinds, ["query", "query", "cursor", "copy"]);
    const texts = under.map((s) => s.attributes["db.query.text"]);
    // Only the tagged template's span (its text is the code's own) carries the text.
    assert.deepEqual(texts, ["select 'secret-4711' as s", undefined, undefined, undefined]);
  },
);

serverTest(
  SEVERAL_SESSIONS,
  "telemetry: sql.copyFrom and sql.copyTo are one span each, with their row counts",
  async () => {
    const { spans } = await once();
    const copies = childrenOf(spans, requestSpan(spans, "/bulk"))
      .filter((s) => s.attributes["pgpipe.operation"] === "copy");
    assert.deepEqual(copies.map((s) => s.name), ["COPY otel_bulk", "COPY otel_bulk"]);
    assert.deepEqual(copies.map((s) => s.attributes["db.response.returned_rows"]), [5, 5]);
    assert.ok(copies.every((s) => s.status.code === 0));
  },
);

serverTest(
  SEVERAL_SESSIONS,
  "telemetry: connecting is a span with the transport and authentication as events",
  async () => {
    const { spans } = await once();
    const connects = ours(spans).filter((s) => s.name === "connect");
    assert.ok(connects.length >= 1);
    for (const c of connects) {
      assert.deepEqual(c.events.map((e) => e.name), ["pgpipe.transport", "pgpipe.authenticated"]);
      assert.equal(typeof c.attributes["pgpipe.connection.pid"], "number");
    }
  },
);

serverTest(
  SEVERAL_SESSIONS,
  "telemetry: telemetry: false records nothing; query_text: false leaves the text out",
  async () => {
    const { spans } = await once();
    const under = childrenOf(spans, requestSpan(spans, "/options")).filter((s) =>
      s.name !== "connect"
    );
    assert.equal(under.length, 1, "only the textless client's query has a span");
    assert.equal(under[0].name, "SELECT pg_namespace");
    assert.equal(under[0].attributes["db.query.text"], undefined);
  },
);

serverTest(
  SEVERAL_SESSIONS,
  "telemetry: metrics: durations, connections by state, errors by class, pipeline depth",
  async () => {
    const { points } = await once();
    const named = (metric: string) =>
      points.filter((p) => p.scope === "pgpipe" && p.metric === metric);
    const selects = named("db.client.operation.duration")
      .filter((p) =>
        p.attributes["db.operation.name"] === "SELECT" && !("error.type" in p.attributes)
      );
    assert.ok(selects.some((p) => p.value >= 8), "the SELECTs' durations are counted");
    const failures = named("db.client.operation.duration")
      .filter((p) => p.attributes["db.response.status_code"] === "22012");
    assert.ok(failures.length > 0);
    const errors = named("pgpipe.client.errors");
    assert.ok(errors.some((p) => p.attributes["pgpipe.sqlstate.class"] === "22" && p.value >= 1));
    const states = new Set(
      named("db.client.connection.count").map((p) => p.attributes["db.client.connection.state"]),
    );
    assert.ok(states.has("idle") && states.has("used"), `states: ${[...states]}`);
    assert.ok(named("db.client.connection.count").some((p) => p.value > 0));
    assert.ok(named("db.client.connection.pending_requests").length > 0);
    assert.ok(named("db.client.connection.create_time").some((p) => p.value >= 1));
    assert.ok(named("pgpipe.client.pipeline.depth").length > 0);
  },
);

Deno.test("telemetry: a bad telemetry option is refused in postgres()", async () => {
  const { default: postgres } = await import("./harness/postgres.ts");
  assert.throws(() => postgres(databaseUrl(), { telemetry: "on" as never }), TypeError);
  assert.throws(() => postgres(databaseUrl(), { telemetry: null as never }), /got null/);
  assert.throws(
    () => postgres(databaseUrl(), { telemetry: { tracerProvider: {} as never } }),
    /tracerProvider must have a getTracer\(\) method/,
  );
  // Without with(), a transaction's queries would not be its span's children: refused, not
  // reported at the first sql.begin.
  const noWith = { active: () => ({ setValue: () => noWith.active() }) };
  assert.throws(
    () => postgres(databaseUrl(), { telemetry: { contextManager: noWith as never } }),
    (e) => e instanceof TypeError && /contextManager must have a with\(\) method/.test(e.message),
  );
  for (const query_text of ["false", 0, null]) {
    assert.throws(
      () => postgres(databaseUrl(), { telemetry: { query_text: query_text as never } }),
      (e) => e instanceof TypeError && /query_text must be a boolean/.test(e.message),
      `query_text: ${JSON.stringify(query_text)}`,
    );
  }
});

Deno.test("telemetry: a provider that throws never fails a query", async () => {
  const { default: postgres } = await import("./harness/postgres.ts");
  const broken = {
    getTracer: () => ({
      startSpan: () => {
        throw new Error("tracer broke");
      },
    }),
  };
  const errors: unknown[] = [];
  const original = console.error;
  console.error = (...args: unknown[]) => void errors.push(args);
  try {
    await using sql = postgres(databaseUrl(), {
      max: 1,
      fetch_types: false,
      telemetry: { tracerProvider: broken },
    });
    const [row] = await sql`select ${7}::int as x`;
    assert.equal(row.x, 7);
    await assert.rejects(sql`select 1 / ${0}::int`, { code: "22012" });
    await sql.begin((tx) => tx`select 1`);
  } finally {
    console.error = original;
  }
  assert.ok(errors.length <= 1, "reported once at most");
});

serverTest(
  SEVERAL_SESSIONS,
  "telemetry: an ended client's gauges are no longer observed",
  async () => {
    const { exports } = await once();
    const gauges = (batch: ReceivedPoint[]) =>
      batch.filter((p) => p.scope === "pgpipe" && p.metric === "db.client.connection.count");
    assert.ok(exports.some((b) => gauges(b).length > 0), "observed while the clients were open");
    // Deno's last export at exit runs no callbacks: the ones before it show the client ended.
    assert.ok(exports.length >= 3);
    for (const batch of exports.slice(-3)) assert.equal(gauges(batch).length, 0, "not after end()");
    const pools = new Set(
      exports.flatMap(gauges).map((p) => p.attributes["db.client.connection.pool.name"]),
    );
    assert.equal(pools.size, 2, `one pool name per traced client: ${[...pools]}`);
  },
);
