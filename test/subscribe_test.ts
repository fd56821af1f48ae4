/**
 * sql.subscribe: logical replication over pgoutput. The first four tests are postgres.js's
 * 'subscribe', 'subscribe with transform' and 'subscribe reconnects and calls onsubscribe' (twice:
 * by pg_terminate_backend, and as postgres.js does, by the handle's `sql.close()`), checking the
 * same joined results; the rest cover patterns, errors from callbacks and from
 * the server, the connection's lifetime, and the protocol decoders with byte vectors and a
 * fake server. Every publication a test creates is dropped in `finally`: while one FOR ALL
 * TABLES exists, updates to tables without a primary key fail everywhere in the database.
 */
import assert from "node:assert/strict";
import postgres, {
  ConnectionError,
  type Options,
  PostgresError,
  QueryError,
  type Sql,
} from "../mod.ts";
import { changeKeys, parsePattern } from "../src/replication/pattern.ts";
import { parsePublications } from "../src/config/publications.ts";
import { ProtocolViolation } from "../src/protocol/backend.ts";
import { pgoutputMessage } from "../src/replication/pgoutput.ts";
import {
  clockToDate,
  formatLsn,
  parseLsn,
  postgresClock,
  replicationMessage,
  standbyStatusUpdate,
} from "../src/replication/messages.ts";
import { Writer } from "../src/protocol/writer.ts";
import { databaseUrl } from "./harness/env.ts";
import { serverVersion } from "./harness/util.ts";
import { poll, until } from "./harness/wait.ts";
import {
  commandComplete,
  concat,
  cstr,
  dataRow,
  encoder,
  fakeClient,
  int16,
  int32,
  message,
  type Peer,
  readyForQuery,
  rowDescription,
  withServer,
} from "./harness/fake_server.ts";

const url = databaseUrl();
const quiet = { onnotice: () => {} };

/** The server's walsenders (replication connections). */
async function walsenders(sql: Sql): Promise<number[]> {
  const rows = await sql`
    select pid from pg_stat_activity where backend_type = 'walsender' order by pid`;
  return rows.map((r) => r.pid as number);
}

/** Waits until the server has no walsender left (a closed one may take a moment to exit). */
async function noWalsenders(sql: Sql): Promise<void> {
  await poll(async () => (await walsenders(sql)).length === 0, 5000);
  assert.deepEqual(await walsenders(sql), [], "every replication connection closed");
}

/** Runs `fn` with publication `name` FOR ALL TABLES, dropping it (and `tables`) afterwards. */
async function withPublication(
  sql: Sql,
  name: string,
  tables: string[],
  fn: () => Promise<void>,
): Promise<void> {
  await sql.unsafe(`create publication ${name} for all tables`);
  try {
    await fn();
  } finally {
    for (const t of tables) await sql.unsafe(`drop table if exists ${t}`);
    await sql.unsafe(`drop publication if exists ${name}`);
  }
}

// ---------------------------------------------------------------------------------------------
// postgres.js's tests

Deno.test("subscribe: inserts, updates and deletes as postgres.js reports them", async () => {
  await using sql = postgres(url, { ...quiet, publications: "alltables" });
  await withPublication(sql, "alltables", ["sub_test"], async () => {
    const result: unknown[] = [];
    const { unsubscribe } = await sql.subscribe("*", (row, { command, old }) => {
      result.push(command, row?.name, row?.id, old && old.name, old && old.id);
    });
    // Keeps the stream open after `unsubscribe`, to see the last insert arrive elsewhere.
    const sentinel: string[] = [];
    const other = await sql.subscribe("insert:sub_test", (row) => sentinel.push(row?.name));

    await sql`create table sub_test (id serial primary key, name text)`;
    await sql`alter table sub_test replica identity default`;
    await sql`insert into sub_test (name) values ('Murray')`;
    await sql`update sub_test set name = 'Rothbard'`;
    await sql`update sub_test set id = 2`;
    await sql`delete from sub_test`;
    await sql`alter table sub_test replica identity full`;
    await sql`insert into sub_test (name) values ('Murray')`;
    await sql`update sub_test set name = 'Rothbard'`;
    await sql`delete from sub_test`;
    await until("seven changes", () => result.length === 7 * 5);
    await unsubscribe();
    await sql`insert into sub_test (name) values ('Oh noes')`;
    await until("the sentinel's insert", () => sentinel.includes("Oh noes"));
    assert.equal(
      result.join(","),
      "insert,Murray,1,,,update,Rothbard,1,,,update,Rothbard,2,,1,delete,,2,,," +
        "insert,Murray,2,,,update,Rothbard,2,Murray,2,delete,Rothbard,2,,",
    );
    assert.deepEqual(sentinel, ["Murray", "Murray", "Oh noes"]);
    await other.unsubscribe();
  });
});

Deno.test("subscribe with transform: rows keyed and decoded as query results are", async () => {
  await using sql = postgres(url, {
    ...quiet,
    publications: "alltables",
    transform: { column: { from: postgres.toCamel, to: postgres.fromCamel } },
  });
  await withPublication(sql, "alltables", ["sub_test"], async () => {
    const result: unknown[] = [];
    const { unsubscribe } = await sql.subscribe("*", (row, { command, old }) => {
      result.push(command, row?.nameInCamel || row?.id, old && old.nameInCamel);
    });
    await sql`create table sub_test (id serial primary key, name_in_camel text)`;
    await sql`insert into sub_test (name_in_camel) values ('Murray')`;
    await sql`update sub_test set name_in_camel = 'Rothbard'`;
    await sql`delete from sub_test`;
    await sql`alter table sub_test replica identity full`;
    await sql`insert into sub_test (name_in_camel) values ('Murray')`;
    await sql`update sub_test set name_in_camel = 'Rothbard'`;
    await sql`delete from sub_test`;
    await until("six changes", () => result.length === 6 * 3);
    await unsubscribe();
    assert.equal(
      result.join(","),
      "insert,Murray,,update,Rothbard,,delete,1,,insert,Murray,,update,Rothbard,Murray,delete,Rothbard,",
    );
  });
});

Deno.test("subscribe reconnects and calls onsubscribe again", async () => {
  await using sql = postgres(url, { ...quiet, publications: "alltables", fetch_types: false });
  await withPublication(sql, "alltables", ["sub_test"], async () => {
    const result: unknown[] = [];
    const errors: Error[] = [];
    let onsubscribes = 0;
    const handle = await sql.subscribe(
      "*",
      (row, { command, old }) => result.push(command, row?.name || row?.id, old && old.name),
      () => onsubscribes++,
      (e) => errors.push(e),
    );
    assert.equal(onsubscribes, 1, "onsubscribe runs before subscribe resolves");
    await sql`create table sub_test (id serial primary key, name text)`;
    await sql`insert into sub_test (name) values ('Murray')`;
    await until("the insert", () => result.length === 3);

    const before = handle.state.pid;
    assert.ok(before > 0);
    await sql`select pg_terminate_backend(${before})`;
    await until("the second onsubscribe", () => onsubscribes === 2);
    assert.notEqual(handle.state.pid, before, "state follows the new connection");
    assert.ok(errors.length >= 1 && errors[0] instanceof ConnectionError, String(errors[0]));

    await sql`delete from sub_test`;
    await until("the delete", () => result.length === 6);
    await handle.unsubscribe();
    assert.equal(onsubscribes + result.join(","), "2insert,Murray,,delete,1,");
  });
});

Deno.test("subscribe: closing the handle's sql drops the stream; it reconnects and calls onsubscribe", async () => {
  // postgres.js's 'subscribe reconnects and calls onsubscribe', which drops the stream through
  // the handle's `sql` (its replication client) instead of terminating the backend.
  await using sql = postgres(url, { ...quiet, publications: "alltables", fetch_types: false });
  await withPublication(sql, "alltables", ["sub_test"], async () => {
    const result: unknown[] = [];
    const errors: Error[] = [];
    let onsubscribes = 0;
    const { unsubscribe, state, sql: subscribeSql } = await sql.subscribe(
      "*",
      (row, { command, old }) => result.push(command, row?.name || row?.id, old && old.name),
      () => onsubscribes++,
      (e) => errors.push(e),
    );
    await sql`create table sub_test (id serial primary key, name text)`;
    await sql`insert into sub_test (name) values ('Murray')`;
    await until("the insert", () => result.length === 3);

    const before = state.pid;
    await subscribeSql.close();
    // Closed on our side; the server's walsender may take a moment to exit.
    await until(
      "the old replication connection gone",
      async () => !(await walsenders(sql)).includes(before),
      5000,
    );
    await until("the second onsubscribe", () => onsubscribes === 2);
    await sql`delete from sub_test`;
    await until("the delete", () => result.length === 6);
    await unsubscribe();
    assert.equal(onsubscribes + result.join(","), "2insert,Murray,,delete,1,");
    assert.deepEqual(errors, [], "closing on purpose is not reported as an error");

    // end() does the same; after unsubscribe() neither reopens anything.
    await subscribeSql.end();
    await noWalsenders(sql);
    assert.equal(onsubscribes, 2);
  });
});

Deno.test("subscribe: the handle's sql.end() drops the shared stream for every subscription; unsubscribe stops for good", async () => {
  await using sql = postgres(url, { ...quiet, publications: "alltables" });
  await withPublication(sql, "alltables", ["sub_test"], async () => {
    const seen: string[] = [];
    let aSubscribes = 0;
    let bSubscribes = 0;
    const a = await sql.subscribe("insert:sub_test", (row) => seen.push(`a${row?.id}`), () => {
      aSubscribes++;
    });
    const b = await sql.subscribe("insert:sub_test", (row) => seen.push(`b${row?.id}`), () => {
      bSubscribes++;
    });
    await sql`create table sub_test (id int primary key)`;
    const before = a.state.pid;
    await a.sql.end();
    await until("both onsubscribes again", () => aSubscribes === 2 && bSubscribes === 2);
    assert.notEqual(b.state.pid, before, "both handles follow the new connection");
    assert.equal(a.state.pid, b.state.pid);
    await sql`insert into sub_test values (1)`;
    await until("the insert, to both", () => seen.length === 2);
    assert.deepEqual(seen.sort(), ["a1", "b1"]);
    await a.unsubscribe();
    await a.sql.close(); // a left: its sql no longer touches b's stream
    assert.equal(bSubscribes, 2);
    await b.unsubscribe();
    await noWalsenders(sql);
  });
});

// ---------------------------------------------------------------------------------------------
// Patterns, values and errors against the server

Deno.test("subscribe: patterns filter by operation, schema, table and key", async () => {
  await using sql = postgres(url, { ...quiet, publications: "sub_pub" });
  await sql`create schema if not exists sub_other`;
  await sql`create table sub_keys (id int primary key, v text)`;
  await sql`create table sub_other.sub_keys (id int primary key, v text)`;
  await sql`create table sub_pair (a int, b text, v text, primary key (a, b))`;
  try {
    await withPublication(sql, "sub_pub", [], async () => {
      const got: Record<string, string[]> = {};
      const patterns = [
        "insert",
        "update:sub_keys=1",
        "delete:public.sub_keys",
        "*:sub_other.sub_keys",
        "sub_pair",
        "update:sub_pair=7,x",
        "truncate:sub_keys",
        "*",
      ];
      const handles = await Promise.all(patterns.map((p) => {
        got[p] = [];
        return sql.subscribe(p, (row, info) => {
          const schema = info.relation.schema === "public" ? "" : info.relation.schema + ".";
          got[p].push(`${info.command} ${schema}${info.relation.table} ${row?.v ?? "-"}`);
        });
      }));
      await sql`insert into sub_keys values (1, 'a'), (2, 'b')`;
      await sql`update sub_keys set v = 'a2' where id = 1`;
      await sql`update sub_keys set v = 'b2' where id = 2`;
      await sql`delete from sub_keys where id = 2`;
      await sql`insert into sub_other.sub_keys values (1, 'o')`;
      await sql`insert into sub_pair values (7, 'x', 'p'), (7, 'y', 'q')`;
      await sql`update sub_pair set v = 'p2'`;
      await sql`truncate sub_keys`;
      await sql`insert into sub_keys values (9, 'last')`;
      await until("the last insert", () => got["*"].includes("insert sub_keys last"));
      assert.deepEqual(got, {
        "insert": [
          "insert sub_keys a",
          "insert sub_keys b",
          "insert sub_other.sub_keys o",
          "insert sub_pair p",
          "insert sub_pair q",
          "insert sub_keys last",
        ],
        "update:sub_keys=1": ["update sub_keys a2"],
        // A delete under the default replica identity sends the key only: v is null.
        "delete:public.sub_keys": ["delete sub_keys -"],
        "*:sub_other.sub_keys": ["insert sub_other.sub_keys o"],
        "sub_pair": [
          "insert sub_pair p",
          "insert sub_pair q",
          "update sub_pair p2",
          "update sub_pair p2",
        ],
        "update:sub_pair=7,x": ["update sub_pair p2"],
        "truncate:sub_keys": ["truncate sub_keys -"],
        // `*` is insert, update and delete, as in postgres.js: no truncate.
        "*": [
          "insert sub_keys a",
          "insert sub_keys b",
          "update sub_keys a2",
          "update sub_keys b2",
          "delete sub_keys -",
          "insert sub_other.sub_keys o",
          "insert sub_pair p",
          "insert sub_pair q",
          "update sub_pair p2",
          "update sub_pair p2",
          "insert sub_keys last",
        ],
      });
      await Promise.all(handles.map((h) => h.unsubscribe()));
    });
  } finally {
    await sql`drop table if exists sub_keys, sub_other.sub_keys, sub_pair`;
    await sql`drop schema if exists sub_other`;
  }
});

Deno.test("subscribe: values go through the type parsers; truncate info says cascade", async () => {
  await using sql = postgres(url, { ...quiet, publications: "sub_pub" });
  await withPublication(sql, "sub_pub", ["sub_types"], async () => {
    const rows: Record<string, unknown>[] = [];
    const truncates: unknown[] = [];
    const a = await sql.subscribe("insert:sub_types", (row) => rows.push(row!));
    const b = await sql.subscribe("truncate:sub_types", (row, info) => {
      assert.equal(row, null);
      truncates.push(info.command === "truncate" && info.cascade);
    });
    await sql`create table sub_types (
      i int, b bool, j jsonb, t timestamptz, a int[], n numeric, x text, z text)`;
    await sql`insert into sub_types values
      (7, true, '{"k":[1,2]}', '2024-01-02T03:04:05Z', '{1,2,3}', 1.50, repeat('é', 3), null)`;
    await sql`truncate sub_types cascade`;
    await until("the truncate", () => truncates.length === 1);
    assert.deepEqual(rows, [{
      i: 7,
      b: true,
      j: { k: [1, 2] },
      t: new Date("2024-01-02T03:04:05Z"),
      a: [1, 2, 3],
      n: "1.50",
      x: "ééé",
      z: null,
    }]);
    assert.deepEqual(truncates, [true]);
    await a.unsubscribe();
    await b.unsubscribe();
  });
});

Deno.test("subscribe: a parser set in sql.options.parsers while streaming applies to later changes", async () => {
  await using sql = postgres(url, { ...quiet, publications: "pgpipe_parsers_pub" });
  await withPublication(sql, "pgpipe_parsers_pub", ["sub_parsers"], async () => {
    await sql`create table sub_parsers (id int primary key, at timestamp)`;
    const seen: unknown[] = [];
    const { unsubscribe } = await sql.subscribe("insert:sub_parsers", (row) => seen.push(row?.at));
    await sql`insert into sub_parsers values (1, '2024-01-02 03:04:05.123456')`;
    await until("the first insert", () => seen.length === 1);
    // The relation was described before this: its decoders are picked again for the next row.
    sql.options.parsers[1114] = (text: string) => `text:${text}`;
    await sql`insert into sub_parsers values (2, '2024-01-02 03:04:05.123456')`;
    await until("the second insert", () => seen.length === 2);
    assert.ok(seen[0] instanceof Date);
    assert.equal(seen[1], "text:2024-01-02 03:04:05.123456");
    await unsubscribe();
  });
});

Deno.test("subscribe: rows arrive as the publication picks them: column lists and row filters from PostgreSQL 15, stored generated columns from 18", async () => {
  await using sql = postgres(url, { ...quiet, publications: "sub_pick_pub" });
  const version = await serverVersion(sql);
  await sql`create table sub_pick (id int primary key, name text, secret text, n int,
    twice int generated always as (n * 2) stored)`;
  try {
    // 18 publishes a generated column it is asked for; 15 to 17 refuse it in a column list.
    const pick = version >= 180000
      ? "(id, name, n, twice) where (n > 0)"
      : version >= 150000
      ? "(id, name, n) where (n > 0)"
      : "";
    await sql.unsafe(`create publication sub_pick_pub for table sub_pick ${pick}
      with (publish = 'insert')`);
    const rows: Record<string, unknown>[] = [];
    const { unsubscribe } = await sql.subscribe("insert:sub_pick", (row) => rows.push(row!));
    await sql`insert into sub_pick (id, name, secret, n) values
      (1, 'kept', 'x', 1), (2, 'filtered', 'y', 0), (3, 'last', 'z', 5)`;
    await until("the last insert", () => rows.some((r) => r.id === 3));
    const expected = version >= 180000
      ? [{ id: 1, name: "kept", n: 1, twice: 2 }, { id: 3, name: "last", n: 5, twice: 10 }]
      : version >= 150000
      ? [{ id: 1, name: "kept", n: 1 }, { id: 3, name: "last", n: 5 }]
      // No column lists or row filters, and generated columns are never published, before 15.
      : [
        { id: 1, name: "kept", secret: "x", n: 1 },
        { id: 2, name: "filtered", secret: "y", n: 0 },
        { id: 3, name: "last", secret: "z", n: 5 },
      ];
    assert.deepEqual(rows, expected);
    await unsubscribe();
  } finally {
    await sql`drop publication if exists sub_pick_pub`;
    await sql`drop table if exists sub_pick`;
  }
});

Deno.test("subscribe: what a handler or onsubscribe throws goes to its onerror; the stream goes on", async () => {
  await using sql = postgres(url, { ...quiet, publications: "sub_pub" });
  await withPublication(sql, "sub_pub", ["sub_err"], async () => {
    const errors: Error[] = [];
    const good: string[] = [];
    const bad = await sql.subscribe(
      "insert:sub_err",
      (row) => {
        throw new Error(`handler saw ${row?.v}`);
      },
      () => {
        throw new Error("onsubscribe failed");
      },
      (e) => errors.push(e),
    );
    const ok = await sql.subscribe("insert:sub_err", (row) => good.push(row?.v));
    await sql`create table sub_err (v text)`;
    await sql`insert into sub_err values ('one')`;
    await sql`insert into sub_err values ('two')`;
    await until("both inserts", () => good.length === 2);
    assert.deepEqual(good, ["one", "two"]);
    assert.deepEqual(errors.map((e) => e.message), [
      "onsubscribe failed",
      "handler saw one",
      "handler saw two",
    ]);
    await bad.unsubscribe();
    await ok.unsubscribe();
  });
});

Deno.test("subscribe: a value transform that throws is reported, and later rows still come", async () => {
  await using sql = postgres(url, {
    ...quiet,
    publications: "sub_pub",
    transform: {
      value: (v) => {
        if (v === "boom") throw new Error("cannot transform boom");
        return v;
      },
    },
  });
  await withPublication(sql, "sub_pub", ["sub_bad", "sub_fine"], async () => {
    const errors: Error[] = [];
    const bad: unknown[] = [];
    const fine: unknown[] = [];
    const a = await sql.subscribe("*:sub_bad=1", (row) => bad.push(row?.v), undefined, (e) => {
      errors.push(e);
    });
    // Another table's subscriber is not told of sub_bad's failure.
    const b = await sql.subscribe("*:sub_fine", (row) => fine.push(row?.v), undefined, (e) => {
      fine.push(`error: ${e.message}`);
    });
    await sql`create table sub_bad (id int primary key, v text)`;
    await sql`create table sub_fine (v text)`;
    await sql`insert into sub_bad values (1, 'boom')`;
    await sql`update sub_bad set v = 'calm'`;
    await sql`insert into sub_fine values ('after')`;
    await until("the later rows", () => bad.length === 1 && fine.length === 1);
    assert.deepEqual(errors.map((e) => e.message), ["cannot transform boom"]);
    assert.deepEqual(bad, ["calm"]);
    assert.deepEqual(fine, ["after"]);
    await a.unsubscribe();
    await b.unsubscribe();
  });
});

Deno.test("subscribe: a column transform that throws fails its table's changes only", async () => {
  await using sql = postgres(url, {
    ...quiet,
    publications: "sub_pub",
    transform: {
      column: (c) => {
        if (c === "explode") throw new Error("cannot name explode");
        return c.toUpperCase();
      },
    },
  });
  await withPublication(sql, "sub_pub", ["sub_named", "sub_plain"], async () => {
    const got: unknown[] = [];
    const errors: string[] = [];
    const handle = await sql.subscribe("insert", (row) => got.push(row), undefined, (e) => {
      errors.push(e.message);
    });
    await sql`create table sub_named (explode text)`;
    await sql`create table sub_plain (v text)`;
    await sql`insert into sub_named values ('a')`;
    await sql`insert into sub_named values ('b')`;
    await sql`insert into sub_plain values ('c')`;
    await until("the plain insert", () => got.length === 1);
    assert.deepEqual(got, [{ V: "c" }]);
    assert.deepEqual(errors, ["cannot name explode", "cannot name explode"]);
    await handle.unsubscribe();
  });
});

Deno.test("subscribe: a missing publication rejects with the server's error; the client goes on", async () => {
  await using sql = postgres(url, { ...quiet, publications: "sub_missing" });
  const err = await sql.subscribe("*", () => {}).catch((e) => e);
  assert.ok(err instanceof PostgresError, String(err));
  assert.equal(err.code, "42704");
  const [{ x }] = await sql`select 1 as x`;
  assert.equal(x, 1);
  await noWalsenders(sql); // the failed attempt's connection is gone
});

Deno.test("subscribe: bad arguments reject with QueryError before connecting", async () => {
  await using sql = postgres(url, quiet);
  for (const pattern of ["upsert:t", "insert:.t", "*=1", "truncate:t=1", 5]) {
    await assert.rejects(
      sql.subscribe(pattern as string, () => {}),
      (e) => e instanceof QueryError && e.code === "INVALID_SUBSCRIBE_PATTERN",
      String(pattern),
    );
  }
  await assert.rejects(
    sql.subscribe("*", "nope" as unknown as () => void),
    (e) => e instanceof QueryError && e.code === "INVALID_ARGUMENTS",
  );
  await assert.rejects(
    sql.subscribe("*", () => {}, 1 as unknown as () => void),
    (e) => e instanceof QueryError && e.code === "INVALID_ARGUMENTS",
  );
  assert.throws(() => postgres(url, { publications: "a,,b" }), TypeError);
  assert.equal(sql.options.publications, "alltables");
  await using fromUrl = postgres(`${url}${url.includes("?") ? "&" : "?"}publications=a,%22B%22`);
  assert.equal(fromUrl.options.publications, 'a,"B"', "read from the URL, not sent as a parameter");
  assert.throws(() => postgres(url, { publications: 7 as unknown as string }), TypeError);
});

Deno.test("subscribe: the last unsubscribe closes the stream; the next subscribe opens one", async () => {
  await using sql = postgres(url, { ...quiet, publications: "sub_pub" });
  await withPublication(sql, "sub_pub", ["sub_life"], async () => {
    const seen: string[] = [];
    const a = await sql.subscribe("insert", (row) => seen.push(`a ${row?.v}`));
    const b = await sql.subscribe("insert", (row) => seen.push(`b ${row?.v}`));
    assert.equal(a.state.pid, b.state.pid, "one stream for every subscription");
    assert.deepEqual(await walsenders(sql), [a.state.pid]);
    const [{ slots }] = await sql`
      select count(*)::int as slots from pg_replication_slots where temporary and active_pid = ${a.state.pid}`;
    assert.equal(slots, 1);

    const first = a.state.pid;
    await a.unsubscribe();
    assert.deepEqual(await walsenders(sql), [first], "b still streams");
    await b.unsubscribe();
    await noWalsenders(sql);
    const [{ temp }] = await sql`
      select count(*)::int as temp from pg_replication_slots where temporary`;
    assert.equal(temp, 0, "the temporary slot went with it");

    await sql`create table sub_life (v text)`;
    const c = await sql.subscribe("insert:sub_life", (row) => seen.push(`c ${row?.v}`));
    assert.notEqual(c.state.pid, first);
    assert.equal(b.state.pid, c.state.pid, "a handle's state is the stream streaming now");
    await sql`insert into sub_life values ('x')`;
    await until("c's insert", () => seen.length === 1);
    assert.deepEqual(seen, ["c x"]);
    await c.unsubscribe();
  });
});

Deno.test("subscribe: sql.end() closes the stream; subscribe after it rejects", async () => {
  const admin = postgres(url, quiet);
  try {
    await withPublication(admin, "sub_pub", [], async () => {
      const sql = postgres(url, { ...quiet, publications: "sub_pub" });
      const handle = await sql.subscribe("*", () => {});
      const pid = handle.state.pid;
      assert.deepEqual(await walsenders(admin), [pid]);
      await sql.end();
      await noWalsenders(admin);
      await assert.rejects(
        sql.subscribe("*", () => {}),
        (e) => e instanceof ConnectionError && e.code === "CONNECTION_ENDED",
      );
      await handle.unsubscribe(); // after the end: nothing to do, and no error
    });
  } finally {
    await admin.end();
  }
});

// ---------------------------------------------------------------------------------------------
// Patterns and publications, without a server

Deno.test("subscribe patterns normalise as postgres.js reads them", () => {
  const cases: [string, string][] = [
    ["*", "*"],
    ["", "*"],
    ["insert", "insert"],
    ["INSERT", "insert"],
    ["insert:test", "insert:public.test"],
    ["insert:public.test", "insert:public.test"],
    ["update:test=1", "update:public.test=1"],
    ["*:test", "*:public.test"],
    ["test", "*:public.test"],
    ["delete:app.users=1,a", "delete:app.users=1,a"],
    ["insert:app.*", "insert:app.*"],
    ["insert:*", "insert"],
    ["truncate:test", "truncate:public.test"],
  ];
  for (const [pattern, normal] of cases) assert.equal(parsePattern(pattern), normal, pattern);
  for (const bad of ["upsert:t", "insert:.t", "insert:s.", "*=1", "insert:*=1", "truncate:t=1"]) {
    assert.throws(() => parsePattern(bad), QueryError, bad);
  }
  assert.deepEqual(changeKeys("update", "public", "t", "1"), [
    "*",
    "*:public.*",
    "*:public.t",
    "*:public.t=1",
    "update",
    "update:public.*",
    "update:public.t",
    "update:public.t=1",
  ]);
  assert.deepEqual(changeKeys("truncate", "s", "t", null), [
    "truncate",
    "truncate:s.*",
    "truncate:s.t",
  ]);
});

Deno.test("publications are read as the server reads publication_names", () => {
  assert.deepEqual(parsePublications("alltables"), ["alltables"]);
  assert.deepEqual(parsePublications(' A , "B c","d""e" ,f'), ["a", "B c", 'd"e', "f"]);
  for (const bad of ["", "a,", ",a", '"a', "a b", '"a"b']) {
    assert.throws(() => parsePublications(bad), TypeError, bad);
  }
});

// ---------------------------------------------------------------------------------------------
// The protocol layer: byte vectors

function u64(v: bigint): Uint8Array {
  const out = new Uint8Array(8);
  new DataView(out.buffer).setBigUint64(0, v);
  return out;
}
const byte = (c: string) => encoder.encode(c);
const textCol = (s: string) =>
  concat(byte("t"), int32(encoder.encode(s).length), encoder.encode(s));
const tuple = (...cols: Uint8Array[]) => concat(int16(cols.length), ...cols);

/** A Relation message: oid 16384 public.t (id int4 key, v text). */
const RELATION = concat(
  byte("R"),
  int32(16384),
  cstr("public"),
  cstr("t"),
  byte("d"),
  int16(2),
  concat(new Uint8Array([1]), cstr("id"), int32(23), int32(-1)),
  concat(new Uint8Array([0]), cstr("v"), int32(25), int32(-1)),
);
const INSERT = concat(byte("I"), int32(16384), byte("N"), tuple(textCol("1"), textCol("é")));
const decode = (b: Uint8Array) => pgoutputMessage(b, 0, b.length);

Deno.test("pgoutput: every message of protocol version 1 decodes", () => {
  assert.deepEqual(decode(RELATION), {
    type: "relation",
    oid: 16384,
    schema: "public",
    table: "t",
    replicaIdentity: "d",
    columns: [
      { key: true, name: "id", type: 23, typmod: -1 },
      { key: false, name: "v", type: 25, typmod: -1 },
    ],
  });
  assert.deepEqual(decode(INSERT), { type: "insert", relation: 16384, tuple: ["1", "é"] });
  const keyOnly = tuple(textCol("1"), byte("n"));
  assert.deepEqual(
    decode(
      concat(
        byte("U"),
        int32(16384),
        byte("K"),
        keyOnly,
        byte("N"),
        tuple(textCol("2"), byte("u")),
      ),
    ),
    { type: "update", relation: 16384, old: ["1", null], key: true, tuple: ["2", undefined] },
  );
  assert.deepEqual(
    decode(concat(byte("U"), int32(16384), byte("N"), tuple(textCol("2"), textCol("x")))),
    { type: "update", relation: 16384, old: null, key: false, tuple: ["2", "x"] },
  );
  assert.deepEqual(
    decode(concat(byte("D"), int32(16384), byte("O"), tuple(textCol("1"), textCol("x")))),
    { type: "delete", relation: 16384, old: ["1", "x"], key: false },
  );
  assert.deepEqual(decode(concat(byte("B"), u64(0x16B3748n), u64(5n), int32(-1))), {
    type: "begin",
    finalLsn: 0x16B3748n,
    commitTime: 5n,
    xid: 0xffffffff,
  });
  assert.deepEqual(
    decode(concat(byte("C"), new Uint8Array([0]), u64(1n), u64(2n), u64(3n))),
    { type: "commit", flags: 0, commitLsn: 1n, endLsn: 2n, commitTime: 3n },
  );
  assert.deepEqual(decode(concat(byte("T"), int32(2), new Uint8Array([3]), int32(1), int32(2))), {
    type: "truncate",
    relations: [1, 2],
    cascade: true,
    restartIdentity: true,
  });
  assert.deepEqual(decode(concat(byte("Y"), int32(99), cstr(""), cstr("mood"))), {
    type: "type",
    oid: 99,
    schema: "pg_catalog",
    name: "mood",
  });
  assert.deepEqual(decode(concat(byte("O"), u64(7n), cstr("node1"))), {
    type: "origin",
    lsn: 7n,
    name: "node1",
  });
  assert.deepEqual(
    decode(concat(byte("M"), new Uint8Array([1]), u64(9n), cstr("p"), int32(2), byte("hi"))),
    { type: "message", transactional: true, lsn: 9n, prefix: "p", content: byte("hi") },
  );
  assert.deepEqual(decode(byte("Z")), { type: "unknown", tag: 0x5a });
});

Deno.test("pgoutput: truncated or malformed messages are protocol violations", () => {
  const bad = [
    new Uint8Array(0),
    RELATION.subarray(0, RELATION.length - 1),
    INSERT.subarray(0, INSERT.length - 1),
    concat(INSERT, new Uint8Array([0])), // a byte after the fields
    concat(byte("I"), int32(1), byte("O"), tuple(textCol("1"))), // O where N belongs
    concat(byte("I"), int32(1), byte("N"), int16(1), byte("q")), // unknown column kind
    concat(byte("I"), int32(1), byte("N"), int16(1), byte("t"), int32(-5)), // negative length
    concat(byte("I"), int32(1), byte("N"), int16(1), byte("t"), int32(1 << 30)), // runs past
    concat(byte("T"), int32(1 << 30), new Uint8Array([0])), // more OIDs than bytes
    concat(byte("O"), u64(7n), byte("unterminated")),
  ];
  for (const b of bad) assert.throws(() => decode(b), ProtocolViolation, String(b));
});

Deno.test("replication messages: XLogData, keepalives, status updates and LSNs", () => {
  const payload = INSERT;
  const xlog = concat(byte("w"), u64(1n), u64(2n), u64(3n), payload);
  const m = replicationMessage(xlog, 0, xlog.length);
  assert.equal(m.kind, "xlog");
  if (m.kind === "xlog") {
    assert.deepEqual([m.walStart, m.walEnd, m.sentAt], [1n, 2n, 3n]);
    assert.deepEqual(xlog.subarray(m.payloadStart, m.payloadEnd), payload);
  }
  const keep = concat(byte("k"), u64(0x100000000n), u64(4n), new Uint8Array([1]));
  assert.deepEqual(replicationMessage(keep, 0, keep.length), {
    kind: "keepalive",
    walEnd: 0x100000000n,
    sentAt: 4n,
    replyRequested: true,
  });
  for (const b of [new Uint8Array(0), byte("x"), keep.subarray(0, 17), xlog.subarray(0, 24)]) {
    assert.throws(() => replicationMessage(b, 0, b.length), ProtocolViolation);
  }

  const w = new Writer();
  standbyStatusUpdate(w, 0x1_0000_00FFn, 77n, true);
  const out = w.buf.subarray(0, w.length);
  assert.deepEqual(
    out,
    concat(
      byte("d"),
      int32(4 + 34),
      byte("r"),
      ...[1, 2, 3].map(() => u64(0x1_0000_00FFn)),
      u64(77n),
      new Uint8Array([1]),
    ),
  );

  assert.equal(parseLsn("16/B374D848"), 0x16_B374D848n);
  assert.equal(formatLsn(0x16_B374D848n), "16/B374D848");
  assert.equal(formatLsn(parseLsn("0/0")), "0/0");
  assert.throws(() => parseLsn("16B374D848"), ProtocolViolation);
  const now = Date.UTC(2024, 0, 2, 3, 4, 5, 6);
  assert.equal(clockToDate(postgresClock(now)).getTime(), now);
  assert.equal(postgresClock(Date.UTC(2000, 0, 1)), 0n);
});

// ---------------------------------------------------------------------------------------------
// A fake walsender: what the driver sends, and what it does with bad data

const copyData = (body: Uint8Array) => message("d", body);
const xlogData = (payload: Uint8Array) =>
  copyData(concat(byte("w"), u64(0n), u64(0n), u64(0n), payload));
const keepalive = (walEnd: bigint, reply: boolean) =>
  copyData(concat(byte("k"), u64(walEnd), u64(0n), new Uint8Array([reply ? 1 : 0])));
const COPY_BOTH = message("W", new Uint8Array([0]), int16(0));
const TEXT = (name: string) => ({ name, type: 25 });

/** What the fake saw on each connection. */
interface Seen {
  replication?: string;
  queries: string[];
  status: bigint[];
}

/** Reads the next message, which must be a standby status update; returns its flushed LSN. */
async function statusUpdate(peer: Peer): Promise<bigint> {
  const m = await peer.message();
  assert.ok(m.type === "d" && m.body[0] === 0x72, `expected a status update, got ${m.type}`);
  return new DataView(m.body.buffer, m.body.byteOffset).getBigUint64(9);
}

/**
 * Serves one replication connection: the publication check, the slot and
 * START_REPLICATION, then `stream` (which gets the peer), then answers CopyDone.
 */
async function walsender(
  peer: Peer,
  seen: Seen,
  stream: (peer: Peer) => Promise<void>,
): Promise<void> {
  const params = await peer.startup();
  seen.replication = params.get("replication");
  await peer.send(
    concat(message("R", int32(0)), message("K", int32(4000), int32(1)), readyForQuery()),
  );
  for (;;) {
    const m = await peer.message();
    if (m.type === "X") return;
    if (m.type === "d" && m.body[0] === 0x72) {
      seen.status.push(new DataView(m.body.buffer, m.body.byteOffset).getBigUint64(9));
      continue;
    }
    if (m.type === "c") {
      await peer.send(concat(message("c"), commandComplete("START_REPLICATION"), readyForQuery()));
      continue;
    }
    assert.equal(m.type, "Q");
    const text = new TextDecoder().decode(m.body.subarray(0, -1));
    seen.queries.push(text);
    if (text.includes("pg_get_publication_tables")) {
      await peer.send(
        concat(
          rowDescription([{ name: "count", type: 20 }]),
          dataRow(["1"]),
          commandComplete("SELECT 1"),
          readyForQuery(),
        ),
      );
    } else if (text.startsWith("CREATE_REPLICATION_SLOT")) {
      await peer.send(concat(
        rowDescription(
          ["slot_name", "consistent_point", "snapshot_name", "output_plugin"].map(TEXT),
        ),
        dataRow(["s", "0/16B3748", null, "pgoutput"]),
        commandComplete("CREATE_REPLICATION_SLOT"),
        readyForQuery(),
      ));
    } else if (text.startsWith("START_REPLICATION")) {
      await peer.send(COPY_BOTH);
      await stream(peer);
    } else {
      assert.fail(`unexpected query ${text}`);
    }
  }
}

function replicationClient(port: number, extra: Options = {}): Sql {
  return fakeClient(port, { fetch_types: false, ...extra });
}

Deno.test("subscribe (fake server): replication startup, keepalive replies, and a bad message reconnects", async () => {
  const seen: Seen[] = [{ queries: [], status: [] }, { queries: [], status: [] }];
  const change = (v: string) =>
    concat(
      xlogData(RELATION),
      xlogData(concat(byte("B"), u64(0x16B3800n), u64(0n), int32(1))),
      xlogData(concat(byte("I"), int32(16384), byte("N"), tuple(textCol("1"), textCol(v)))),
      xlogData(concat(byte("C"), new Uint8Array([0]), u64(0x16B3800n), u64(0x16B3900n), u64(0n))),
    );
  await withServer(
    (peer, index) =>
      walsender(peer, seen[index] ?? { queries: [], status: [] }, async (p) => {
        if (index === 0) {
          // A keepalive that asks for an answer, a change, then an insert into an undescribed table.
          await p.send(concat(keepalive(0x16B3780n, true), change("first")));
          // Waits for the reply: the connection fails (and drops unsent bytes) at the bad message.
          seen[0].status.push(await statusUpdate(p));
          await p.send(xlogData(concat(byte("I"), int32(99), byte("N"), tuple(textCol("1")))));
        } else {
          // This keepalive is behind the commit's end, which stays the position reached.
          await p.send(concat(change("second"), keepalive(0x16B3850n, true)));
        }
      }),
    async (server) => {
      const sql = replicationClient(server.port, { publications: 'Pub, "Other"' });
      try {
        const rows: unknown[] = [];
        const errors: Error[] = [];
        let onsubscribes = 0;
        const handle = await sql.subscribe(
          "insert:t",
          (row, info) => rows.push([info.command, info.relation.table, row?.id, row?.v]),
          () => onsubscribes++,
          (e) => errors.push(e),
        );
        await until("the second connection's change", () => rows.length === 2);
        await until("its keepalive reply", () => seen[1].status.length > 0);
        assert.deepEqual(rows, [["insert", "t", 1, "first"], ["insert", "t", 1, "second"]]);
        assert.equal(onsubscribes, 2);
        assert.equal(errors.length, 1);
        assert.ok(
          errors[0] instanceof ConnectionError && errors[0].code === "PROTOCOL_VIOLATION",
          String(errors[0]),
        );

        assert.equal(seen[0].replication, "database");
        assert.match(seen[0].queries[0], /pg_get_publication_tables/);
        assert.match(seen[0].queries[0], /array\[E'pub', E'Other'\]/);
        assert.match(
          seen[0].queries[1],
          /^CREATE_REPLICATION_SLOT pgpipe_[0-9a-f]{16} TEMPORARY LOGICAL pgoutput/,
        );
        assert.match(
          seen[0].queries[2],
          /^START_REPLICATION SLOT pgpipe_[0-9a-f]{16} LOGICAL 0\/16B3748 \(proto_version '1', publication_names 'Pub, "Other"'\)$/,
        );
        // The keepalive came before any change: everything up to its position is acknowledged.
        assert.equal(seen[0].status[0], 0x16B3780n);
        // After a commit, the position reached is the commit's end.
        assert.equal(seen[1].status[0], 0x16B3900n);
        await handle.unsubscribe();
        await until("the polite close", () => server.results.length === 2);
        await server.results[1];
      } finally {
        await sql.end();
      }
    },
  );
});

Deno.test("subscribe (fake server): an error from the server mid-stream reconnects", async () => {
  let connections = 0;
  await withServer((peer, index) =>
    walsender(peer, { queries: [], status: [] }, async (p) => {
      connections++;
      if (index === 0) {
        await p.send(concat(
          message(
            "E",
            cstr("SERROR"),
            cstr("VERROR"),
            cstr("C58000"),
            cstr("Mstream broke"),
            cstr(""),
          ),
          readyForQuery(),
        ));
      }
    }), async (server) => {
    const sql = replicationClient(server.port);
    try {
      const errors: Error[] = [];
      let onsubscribes = 0;
      const handle = await sql.subscribe(
        "*",
        () => {},
        () => onsubscribes++,
        (e) => errors.push(e),
      );
      await until("the reconnect", () => onsubscribes === 2);
      assert.equal(connections, 2);
      assert.ok(
        errors[0] instanceof PostgresError && errors[0].code === "58000",
        String(errors[0]),
      );
      await handle.unsubscribe();
    } finally {
      await sql.end();
    }
  });
});
