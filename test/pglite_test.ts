/**
 * The PGlite transport's own guarantees (pglite.ts, src/pglite/): one execProtocolRawStream
 * call per flush and never two at once, what postgres() refuses, one client per instance, the
 * session reset between clients, a data folder that persists, LISTEN/NOTIFY on the one
 * session, COPY in both directions, the startup's settings and checks. PGlite needs no server,
 * so this runs in the normal suite too.
 */
import assert from "node:assert/strict";
import { PGlite } from "@electric-sql/pglite";
import postgres, { ConnectionError, PostgresError, QueryError } from "../mod.ts";
import { pglite, type PGliteInstance } from "../pglite.ts";
import { delay, until } from "./harness/wait.ts";
import { withEnv } from "./harness/util.ts";
import { startsCopyIn } from "../src/pglite/copy_in.ts";
import { quiet } from "./harness/connect.ts";

/** A PGlite with every raw call counted, its input kept, and overlapping calls detected. */
interface Watched extends PGliteInstance {
  calls: number;
  inputs: Uint8Array[];
  maxOverlap: number;
  /** Called right after PGlite ran a call, before its answer is read. */
  afterCall?: () => void;
}

/** Wraps `pg`; each call is delayed by `delayMs` after PGlite ran it, to widen any overlap. */
function watched(pg: PGlite, delayMs = 0): Watched {
  let running = 0;
  const w: Watched = {
    calls: 0,
    inputs: [],
    maxOverlap: 0,
    get waitReady() {
      return pg.waitReady;
    },
    get closed() {
      return pg.closed;
    },
    dataDir: pg.dataDir,
    async execProtocolRawStream(message, options) {
      w.calls++;
      w.inputs.push(message.slice());
      w.maxOverlap = Math.max(w.maxOverlap, ++running);
      try {
        await pg.execProtocolRawStream(message, options);
        w.afterCall?.();
        if (delayMs > 0) await delay(delayMs);
      } finally {
        running--;
      }
    },
    close: () => pg.close(),
  };
  return w;
}

/** One PGlite for the tests that need no instance of their own (each starts in ~3 s). */
let shared: Promise<PGlite> | null = null;
function sharedPGlite(): Promise<PGlite> {
  return shared ??= (async () => {
    const pg = new PGlite();
    await pg.waitReady;
    return pg;
  })();
}

/** The message types of a raw call's input, as letters. */
function types(input: Uint8Array): string {
  let out = "";
  for (let at = 0; at + 5 <= input.length;) {
    out += String.fromCharCode(input[at]);
    at += 1 + new DataView(input.buffer, input.byteOffset + at + 1).getInt32(0);
  }
  return out;
}

Deno.test("pglite: queries issued together reach PGlite in one call, and calls never overlap", async () => {
  const pg = watched(await sharedPGlite(), 2);
  await using sql = postgres(pglite(pg, quiet));
  await sql`create temp table items (id int, name text)`;
  const before = pg.calls;
  const rows = await Promise.all(
    Array.from(
      { length: 200 },
      (_, i) => sql`insert into items values (${i}, ${"n" + i}) returning id`,
    ),
  );
  assert.deepEqual(rows.map((r) => r[0].id), Array.from({ length: 200 }, (_, i) => i));
  assert.equal(pg.calls - before, 1, "200 inserts issued in one tick: one call");
  assert.equal(types(pg.inputs.at(-1)!).replaceAll(/[PBDES]/g, "").length, 1); // and a CopyFail
  // Work issued while calls are still running (each is held 2 ms) queues behind them.
  const spread = [];
  for (let i = 0; i < 20; i++) {
    spread.push(sql`select count(*)::int as n from items`);
    await delay(1);
  }
  for (const [{ n }] of await Promise.all(spread)) assert.equal(n, 200);
  assert.equal(pg.maxOverlap, 1);
});

Deno.test("pglite: pipelined results, errors with their fields, and the connection after them", async () => {
  await using sql = postgres(pglite(await sharedPGlite(), quiet));
  const settled = await Promise.allSettled([
    sql`select 1 as a`,
    sql`select 1/${0}::int`,
    sql`select 'x'::text as b`,
  ]);
  assert.equal(settled[0].status, "fulfilled");
  assert.equal(settled[2].status, "fulfilled");
  const e = (settled[1] as PromiseRejectedResult).reason;
  assert.ok(e instanceof PostgresError);
  assert.equal(e.code, "22012");
  assert.equal(e.routine, "int4div");
  const [{ v }] = await sql`select current_setting('server_version_num')::int as v`;
  assert.ok(v >= 180000, `PGlite 0.5 is PostgreSQL 18 (${v})`);
});

Deno.test("pglite: what has no meaning in one process is refused at postgres()", async () => {
  const options = pglite(await sharedPGlite());
  const refused = (extra: Record<string, unknown>, url?: string) => {
    try {
      url === undefined ? postgres({ ...options, ...extra }) : postgres(url, options);
    } catch (e) {
      assert.ok(e instanceof QueryError, String(e));
      assert.equal(e.code, "EMBEDDED_UNSUPPORTED");
      return e.message;
    }
    assert.fail(`accepted ${JSON.stringify(extra)}`);
  };
  assert.match(refused({ max: 2 }), /max 2 .*one session/);
  assert.match(refused({ ssl: "require" }), /ssl require/);
  assert.match(refused({ ssl: { mode: "verify-full" } }), /verify-full/);
  assert.match(refused({ hostaddr: "127.0.0.1" }), /hostaddr option/);
  assert.match(refused({ path: "/tmp/.s.PGSQL.5432" }), /path option/);
  assert.match(refused({ service: "db" }), /service option/);
  assert.match(refused({ sslrootcert: "system" }), /sslrootcert option/);
  assert.match(refused({ sslcert: "client.crt", sslkey: "client.key" }), /sslcert option/);
  assert.match(refused({ sslnegotiation: "direct" }), /sslnegotiation=direct/);
  assert.match(refused({ host: "db.example.com" }), /host option/);
  assert.match(refused({ port: 5433 }), /port option/);
  assert.match(refused({ socket: () => Deno.connect({ port: 1 }) }), /socket option/);
  assert.match(refused({ query_timeout: 1 }), /query_timeout/);
  assert.match(refused({}, "postgres://localhost/db"), /connection URL/);
  assert.throws(() => postgres({ embedded: {} as never }), TypeError);
  // What stays harmless is accepted: no TLS asked for, max 1.
  await postgres({ ...options, ssl: "prefer", max: 1 }).end();
  await postgres({ ...options, ssl: false }).end();
});

Deno.test("pglite: the PG* variables and ~/.postgresql's files of a real server neither refuse nor redirect a client", async () => {
  // Each of these fails or redirects a client of a server (a missing service, a bad address, a
  // TLS mode demanding a check, a revocation list no TLS path can apply, another user).
  const home = await Deno.makeTempDir({ prefix: "pgpipe-pglite-home-" });
  try {
    await Deno.mkdir(`${home}/.postgresql`);
    await Deno.writeTextFile(`${home}/.postgresql/root.crt`, "not a certificate");
    await Deno.writeTextFile(`${home}/.postgresql/root.crl`, "not a list");
    const vars = {
      HOME: home,
      PGSERVICE: "no-such-service",
      PGHOSTADDR: "not-an-address",
      PGSSLMODE: "verify-full",
      PGCHANNELBINDING: "require",
      PGUSER: "someone_else",
      PGDATABASE: "elsewhere",
    };
    // The same variables refuse a client of a server at postgres(): the check can fail.
    await withEnv(vars, () => assert.throws(() => postgres({ host: "db.example.com" })));
    await withEnv(vars, async () => {
      await using sql = postgres(pglite(await sharedPGlite(), quiet));
      const [row] = await sql`select current_user as who, current_database() as db`;
      assert.deepEqual({ ...row }, { who: "postgres", db: "postgres" });
    });
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

Deno.test("pglite: sql.subscribe rejects with a typed error; sql.options shows the server", async () => {
  await using sql = postgres(pglite(await sharedPGlite(), quiet));
  await assert.rejects(
    () => sql.subscribe("*", () => {}),
    (e) =>
      e instanceof QueryError && e.code === "EMBEDDED_UNSUPPORTED" && /replication/.test(e.message),
  );
  assert.deepEqual(sql.options.host, ["pglite:memory"]);
  assert.equal(sql.options.max, 1);
  assert.equal(sql.options.user, "postgres");
  assert.equal(sql.options.database, "postgres");
});

Deno.test("pglite: one client at a time holds an instance; the next gets a clean session", async () => {
  const pg = await sharedPGlite();
  const first = postgres(pglite(pg, quiet));
  await first`create temp table left_behind (x int)`;
  await first`set datestyle = 'German'`;
  const open = await first.begin();
  await open`create table rolled_back (x int)`;
  // A second client while the first holds the session: refused at once, never run inside it.
  const second = postgres(pglite(pg, quiet));
  const e = await second`select 1`.catch((e) => e);
  assert.ok(e instanceof ConnectionError, String(e));
  assert.equal(e.code, "CONNECT_FAILED");
  assert.match(e.message, /one session and another client holds it/);
  await second.end();
  await first.end({ timeout: 0 }); // leaves the transaction open: the session's reset ends it
  await using third = postgres(pglite(pg, quiet));
  const [row] = await third`
    select to_regclass('left_behind') as temp, to_regclass('rolled_back') as tx,
      current_setting('DateStyle') as datestyle,
      (select count(*)::int from pg_prepared_statements
        where statement not like '%pg_prepared_statements%') as prepared`;
  assert.deepEqual({ ...row }, { temp: null, tx: null, datestyle: "ISO, MDY", prepared: 0 });
});

Deno.test("pglite: Terminate never reaches PGlite, and an instance given stays open", async () => {
  const pg = watched(await sharedPGlite());
  const sql = postgres(pglite(pg, quiet));
  await sql`select 1`;
  await sql.end();
  assert.ok(
    pg.inputs.every((input) => !types(input).includes("X")),
    "no Terminate was handed over",
  );
  assert.equal(pg.closed, false);
  await using again = postgres(pglite(pg, quiet));
  const [{ ok }] = await again`select true as ok`;
  assert.equal(ok, true);
});

Deno.test("pglite: startup parameters are applied; another database or role fails like a server", async () => {
  const pg = await sharedPGlite();
  {
    await using sql = postgres(pglite(pg, {
      ...quiet,
      application_name: "tests",
      connection: { search_path: "pg_catalog, public", "intervalstyle": "iso_8601" },
    }));
    const [row] = await sql`select current_setting('application_name') as app,
      current_setting('search_path') as path, current_setting('IntervalStyle') as style`;
    assert.deepEqual({ ...row }, { app: "tests", path: "pg_catalog, public", style: "iso_8601" });
    assert.equal(sql.parameters.application_name, "tests");
  }
  const failing = async (options: Record<string, unknown>) => {
    await using sql = postgres(pglite(pg, { ...quiet, ...options }));
    return await sql`select 1`.catch((e) => e);
  };
  const db = await failing({ database: "other", connection: { "pgpipe.mark": "left" } });
  assert.ok(db instanceof PostgresError, String(db));
  assert.equal(db.code, "3D000");
  assert.equal(db.severity, "FATAL");
  const role = await failing({ user: "nobody" });
  assert.ok(role instanceof PostgresError, String(role));
  assert.equal(role.code, "28000");
  const setting = await failing({ connection: { statement_timeout: "soon" } });
  assert.ok(setting instanceof PostgresError, String(setting));
  assert.equal(setting.code, "22023");
  // What the refused startup set is gone with its session.
  await using sql = postgres(pglite(pg, quiet));
  const [{ mark }] = await sql`select current_setting('pgpipe.mark', true) as mark`;
  assert.ok(!mark, `left behind: ${mark}`);
});

Deno.test("pglite: transactions, savepoints, cursors and prepared statements", async () => {
  await using sql = postgres(pglite(await sharedPGlite(), quiet));
  await sql`create temp table t (x int)`;
  const result = await sql.begin(async (tx) => {
    await tx`insert into t values (1)`;
    await tx.savepoint(async (sp) => {
      await sp`insert into t values (2)`;
      throw new Error("undo 2");
    }).catch(() => {});
    return [tx`insert into t values (3)`, tx`select array_agg(x order by x) as xs from t`];
  });
  assert.deepEqual(result[1][0].xs, [1, 3]);
  await assert.rejects(() =>
    sql.begin(async (tx) => {
      await tx`insert into t values (4)`;
      await tx`select 1/0`;
    }), PostgresError);
  const batches: number[][] = [];
  for await (const rows of sql`select generate_series(1, 10) as n`.cursor(4)) {
    batches.push(rows.map((r) => r.n as number));
  }
  assert.deepEqual(batches, [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10]]);
  for (let i = 0; i < 3; i++) assert.equal((await sql`select ${i}::int + 1 as n`)[0].n, i + 1);
  const [{ n }] = await sql`select count(*)::int as n from pg_prepared_statements`;
  assert.ok(n >= 1, "the repeated query was prepared once and reused");
});

Deno.test("pglite: LISTEN/NOTIFY on the one session, and again after the connection is replaced", async () => {
  const pg = watched(await sharedPGlite());
  await using sql = postgres(pglite(pg, { ...quiet, max_lifetime: 0.5 }));
  const got: string[] = [];
  let listened = 0;
  const handle = await sql.listen("jobs", (payload) => got.push(payload), () => listened++);
  assert.equal(listened, 1);
  await sql.notify("jobs", "one");
  await sql.begin(async (tx) => {
    await tx`select pg_notify('jobs', 'two')`;
    assert.deepEqual(got, ["one"], "a notification inside a transaction waits for its commit");
  });
  assert.deepEqual(got, ["one", "two"]);
  const pid = handle.state.pid;
  assert.ok(pid > 0);
  // max_lifetime retires the connection; the new session listens again before anything else.
  // Time is the subject here: max_lifetime (0.5 s, at most 0.55 s with its jitter) has passed.
  await delay(700);
  await sql`select 1`;
  await until("onlisten after the reconnect", () => listened >= 2, 5000);
  await sql.notify("jobs", "three");
  assert.deepEqual(got, ["one", "two", "three"]);
  await handle.unlisten();
  await sql.notify("jobs", "four");
  assert.deepEqual(got, ["one", "two", "three"]);
});

Deno.test("pglite: COPY FROM STDIN in one call with its data, COPY TO STDOUT, and their failures", async () => {
  const pg = watched(await sharedPGlite());
  await using sql = postgres(pglite(pg, quiet));
  await sql`create temp table c (id int, name text)`;
  const w = await sql`copy c from stdin`.writable();
  const before = pg.calls;
  w.write("1\tone\n");
  w.write("2\ttwo\n");
  w.end();
  await new Promise((resolve, reject) => w.on("finish", resolve).on("error", reject));
  assert.equal(pg.calls - before, 1, "the COPY went in one call with its data");
  assert.match(types(pg.inputs.at(-1)!), /^Qd+cf$/);
  assert.equal(await sql.copyFrom("c", [[3, "three"], [4, "four"]]), 2);
  const csv: string[] = [];
  for await (
    const chunk of await sql`copy (select * from c order by id) to stdout (format csv)`.readable()
  ) {
    csv.push(new TextDecoder().decode(chunk));
  }
  assert.equal(csv.join(""), "1,one\n2,two\n3,three\n4,four\n");
  // A COPY into a missing table fails once its data was held; one stopped by its writer too.
  const missing = await sql`copy nowhere from stdin`.writable();
  missing.end("1\n");
  const e = await new Promise((resolve) => missing.on("error", resolve));
  assert.ok(e instanceof PostgresError && e.code === "42P01", String(e));
  const stopped = await sql`copy c from stdin`.writable();
  stopped.on("error", () => {});
  stopped.write("9\tnine\n");
  stopped.destroy(new Error("changed my mind"));
  await new Promise((r) => stopped.on("close", r));
  // COPY FROM STDIN that cannot run in one call (extended protocol, or behind another statement)
  // fails with a message that says why, and the instance lives on.
  const extended = await sql`copy c from stdin`.catch((e) => e);
  assert.ok(extended instanceof PostgresError, String(extended));
  const behind = await sql.unsafe("select 1; copy c from stdin").catch((e) => e);
  assert.ok(behind instanceof PostgresError, String(behind));
  assert.match(behind.message, /needs query\.writable\(\) in pgpipe, as a query of its own/);
  const [{ n }] = await sql`select count(*)::int as n from c`;
  assert.equal(n, 4);
});

Deno.test("pglite: a cancelled query waiting behind a transaction never runs; a sent one completes", async () => {
  const pg = watched(await sharedPGlite());
  await using sql = postgres(pglite(pg, quiet));
  await sql`create temp table k (x int)`;
  const tx = await sql.begin();
  const waiting = sql`insert into k values (1)`; // the one connection is the transaction's
  const controller = new AbortController();
  const aborted = waiting.signal(controller.signal).catch((e) => e);
  controller.abort(new Error("not needed"));
  await tx`select 1`;
  await tx.commit();
  assert.match(String(await aborted), /not needed/);
  const sent = sql`select 2 as n`;
  pg.afterCall = () => sent.cancel(); // handed to PGlite, its answer not read yet
  const [{ n }] = await sent;
  pg.afterCall = undefined;
  assert.equal(n, 2, "PGlite answered it before a cancel could reach it");
  const [{ count }] = await sql`select count(*)::int as count from k`;
  assert.equal(count, 0);
});

Deno.test({
  name: "pglite: a data folder persists across instances; sql.end() closes the PGlite it started",
  sanitizeResources: false, // PGlite's node:fs mount keeps handles of its own between calls
  async fn() {
    const dir = await Deno.makeTempDir({ prefix: "pgpipe_pglite_" });
    try {
      const options = pglite(dir, quiet);
      const first = postgres(options);
      await first`create table kept (name text)`;
      await first`insert into kept values ('still here')`;
      await first.end();
      const again = postgres(pglite(dir, quiet));
      const [{ name }] = await again`select name from kept`;
      assert.equal(name, "still here");
      await again.end();
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test("pglite: telemetry spans for connecting, queries and errors, naming the embedded server", async () => {
  const spans: { name: string; attributes: Record<string, unknown>; status?: number }[] = [];
  const tracerProvider = {
    getTracer: () => ({
      startSpan: (name: string, options?: { attributes?: Record<string, unknown> }) => {
        const span = {
          name,
          attributes: { ...options?.attributes },
          status: undefined as number | undefined,
        };
        spans.push(span);
        return {
          setAttribute: (k: string, v: unknown) => void (span.attributes[k] = v),
          setAttributes: (a: Record<string, unknown>) => void Object.assign(span.attributes, a),
          addEvent: () => {},
          setStatus: (s: { code: number }) => void (span.status = s.code),
          end: () => {},
        };
      },
    }),
  };
  {
    await using sql = postgres(
      pglite(await sharedPGlite(), { ...quiet, telemetry: { tracerProvider } }),
    );
    await Promise.all([sql`select ${1}::int as a`, sql`select ${2}::int as b`]);
    await sql`select 1/0`.catch(() => {});
  }
  assert.ok(spans.some((s) => s.name === "connect"), JSON.stringify(spans.map((s) => s.name)));
  const queries = spans.filter((s) => s.name !== "connect");
  assert.ok(queries.length >= 3, `${queries.length} query spans`);
  for (const s of queries) {
    assert.equal(s.attributes["db.system.name"] ?? s.attributes["db.system"], "postgresql");
    assert.equal(s.attributes["server.address"], "pglite:memory");
  }
  const failed = queries.find((s) => s.status === 2);
  assert.ok(failed, "the failed query's span has error status");
  assert.equal(failed.attributes["db.response.status_code"], "22012");
});

Deno.test("pglite: a COPY FROM STDIN as a new client's first query (held behind the startup)", async () => {
  const pg = await sharedPGlite();
  {
    await using setup = postgres(pglite(pg, quiet));
    await setup`create table first_copy (x int)`;
  }
  try {
    {
      await using first = postgres(pglite(pg, quiet));
      const writable = await first`copy first_copy from stdin`.writable();
      writable.end("1\n2\n");
      await new Promise((resolve, reject) => writable.on("finish", resolve).on("error", reject));
    }
    await using sql = postgres(pglite(pg, quiet));
    assert.equal((await sql`select count(*)::int as n from first_copy`)[0].n, 2);
  } finally {
    await using sql = postgres(pglite(pg, quiet));
    await sql`drop table first_copy`;
  }
});

Deno.test("pglite: a COPY FROM STDIN is told from one inside a literal, a comment or a dollar-quoted body", () => {
  // A query read as COPY FROM STDIN is held for data; one that is not must go at once.
  assert.equal(startsCopyIn("copy t from stdin"), true);
  assert.equal(startsCopyIn("/* load */ COPY t (a, b) FROM STDIN WITH (FORMAT csv)"), true);
  assert.equal(startsCopyIn("select 'copy t from stdin'"), false);
  assert.equal(startsCopyIn("/* a /* nested */ copy t from stdin */ select 1"), false);
  assert.equal(startsCopyIn("copy (select $a1$ from stdin $a1$) to stdout"), false);
  assert.equal(startsCopyIn("copy t to stdout; select 'from stdin'"), false);
});
