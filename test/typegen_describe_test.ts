/**
 * The typed-SQL describer (src/typegen/describer.ts) against a real schema: on a server
 * (`--pg=installed`: a database of its own, described through `{ database }`) and in process
 * (`--pg=pglite`: the same migrations applied by `{ migrations }`). Every type of the mapping is
 * checked against what pgpipe returns at run time, each nullability rule against the rows its
 * query gives, and the migrations folder is Drizzle Kit's format as it is.
 */
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { join } from "node:path";
import postgres, { ConnectionError, type Options, type Sql } from "../mod.ts";
import { pglite } from "../pglite.ts";
import { PGlite } from "@electric-sql/pglite";
import { MigrationError, openDescriber } from "../src/typegen/describer.ts";
import { readMigrations } from "../src/typegen/migrations.ts";
import { contribExtensionsOf } from "../src/typegen/pglite_extensions.ts";
import { NodeTreeError, parseNodeTree, type PgNode } from "../src/typegen/node_tree.ts";
import type { ColumnType, Describer, SchemaSource, TypegenOptions } from "../src/typegen/model.ts";
import { quiet } from "./harness/connect.ts";
import { databaseUrl } from "./harness/env.ts";
import { onPglite, recordSkip } from "./harness/pglite_mode.ts";
import { valueMatches } from "./harness/type_text.ts";
import { withEnv } from "./harness/util.ts";

const SCHEMA = fileURLToPath(new URL("./fixtures/typegen_schema/", import.meta.url));
const DRIZZLE = fileURLToPath(new URL("./fixtures/drizzle/", import.meta.url));

/** The schema's database, clients of it to run queries, and describers of it. */
interface Fixture {
  /** Runs `fn` with a client whose options `options` stands for (one client at a time). */
  withClient<T>(options: TypegenOptions, fn: (sql: Sql) => Promise<T>): Promise<T>;
  /** A describer of the schema with `options` (one per option set, opened on first use). */
  describer(options?: TypegenOptions): Promise<Describer>;
  [Symbol.asyncDispose](): Promise<void>;
}

/** The client options a TypegenOptions stands for, as a program would write them. */
function clientOptions(options: TypegenOptions): Options {
  const transform = options.transform === "camel"
    ? postgres.camel
    : options.transform === "pascal"
    ? postgres.pascal
    : options.transform === "kebab"
    ? postgres.kebab
    : undefined;
  return {
    ...quiet,
    ...(options.bigint ? { types: { bigint: postgres.BigInt } } : {}),
    ...(transform === undefined ? {} : { transform }),
  };
}

/** Applies the fixture's migrations through `sql`, as the describer applies them to PGlite. */
async function migrate(sql: Sql, dir: string): Promise<void> {
  for (const statement of await readMigrations(dir)) await sql.unsafe(statement.text);
}

/**
 * On a server: a new database with the schema, described through `{ database }`. On PGlite: a
 * PGlite of the test's own with the schema (PGlite serves one client at a time), described
 * through `{ migrations }`, which applies the same files to another PGlite.
 */
async function openFixture(): Promise<Fixture> {
  const describers = new Map<string, Promise<Describer>>();
  let source: SchemaSource;
  let makeClient: (o: Options) => Sql;
  let drop: () => Promise<void>;
  if (onPglite) {
    const db = new PGlite();
    makeClient = (o) => postgres(pglite(db, o));
    source = { migrations: SCHEMA };
    drop = () => db.close();
  } else {
    const admin = postgres(databaseUrl(), quiet);
    const name = `typegen_${crypto.randomUUID().replaceAll("-", "").slice(0, 12)}`;
    await admin.unsafe(`create database ${name}`);
    const url = new URL(databaseUrl());
    url.pathname = `/${name}`;
    makeClient = (o) => postgres(url.href, o);
    source = { database: url.href };
    drop = async () => {
      await admin.unsafe(`drop database ${name} with (force)`).finally(() => admin.end());
    };
  }
  const withClient = async <T>(options: TypegenOptions, fn: (sql: Sql) => Promise<T>) => {
    const sql = makeClient(clientOptions(options));
    try {
      return await fn(sql);
    } finally {
      await sql.end();
    }
  };
  await withClient({}, (sql) => migrate(sql, SCHEMA));
  return {
    withClient,
    describer(options = {}) {
      const key = JSON.stringify(options);
      let d = describers.get(key);
      if (d === undefined) {
        d = openDescriber(source, options);
        describers.set(key, d);
      }
      return d;
    },
    async [Symbol.asyncDispose]() {
      for (const d of describers.values()) await (await d.catch(() => null))?.close();
      await drop();
    },
  };
}

/**
 * A step sharing the enclosing test's clients (their sockets outlive each step); `serverOnly`
 * skips it on PGlite, saying so in the run's summary.
 */
function step(t: Deno.TestContext, name: string, fn: () => Promise<void>, serverOnly = false) {
  if (serverOnly) recordSkip(name, "DATABASE_URL names a server");
  const ignore = serverOnly && onPglite;
  return t.step({ name, fn, ignore, sanitizeOps: false, sanitizeResources: false });
}

/** The types of `text`, which must describe. */
async function described(d: Describer, text: string): Promise<ColumnType[]> {
  const [r] = await d.describe([text]);
  assert.ok(r.ok, `${text}: ${r.ok ? "" : r.message}`);
  return r.columns;
}

/** Describes `text` against a describer opened on the migrations in `dir`, closed afterwards. */
async function describedFrom(dir: string, text: string): Promise<ColumnType[]> {
  const describer = await openDescriber({ migrations: dir }, {});
  try {
    return await described(describer, text);
  } finally {
    await describer.close();
  }
}

/** Asserts every value of `rows` has the type its column was described with. */
function assertRowsMatch(rows: readonly Record<string, unknown>[], columns: ColumnType[]) {
  assert.ok(rows.length > 0, "the check needs rows");
  for (const row of rows) {
    assert.deepEqual(Object.keys(row).sort(), columns.map((c) => c.name).sort());
    for (const c of columns) {
      assert.ok(
        valueMatches(row[c.name], c.type, c.nullable),
        `${c.name}: ${Deno.inspect(row[c.name])} is not ${c.type}${c.nullable ? " | null" : ""}`,
      );
    }
  }
}

/** Runs `text` in a transaction that is rolled back, and gives its result. */
async function rolledBack(
  sql: Sql,
  text: string,
  values: unknown[] = [],
): Promise<readonly Record<string, unknown>[] & { count: number }> {
  let result: (readonly Record<string, unknown>[] & { count: number }) | undefined;
  const undo = new Error("roll back");
  await sql.begin(async (tx) => {
    result = await tx.unsafe(text, values);
    throw undo;
  }).catch((e) => {
    if (e !== undo) throw e;
  });
  return result!;
}

/** A row of tg_everything: one value of every type of the mapping. */
const EVERYTHING_ROW = `
  insert into tg_everything (i2, i4, i8, f4, f8, num, o, b, t, vc, ch, nm, u, ts, tstz, d, tm,
    ttz, iv, js, jsb, "by", ip, pt, rng, mood, pos, short, pair, a_i4, a_i8, a_f8, a_num, a_t,
    a_b, a_u, a_d, a_tstz, a_jsb, a_by, a_mood, a_pos, a_pair)
  values (1, 2, 3, 1.5, 2.5, 12.34, 7, true, 'text', 'vc', 'abc', 'nm',
    '00000000-0000-0000-0000-000000000001', '2024-01-02 03:04:05', '2024-01-02 03:04:05+00',
    '2024-01-02', '03:04:05', '03:04:05+02', '1 day', '{"a":[1,2]}', '{"b":null}',
    '\\x0102'::bytea, '127.0.0.1', '(1,2)', '[1,5)', 'happy', 5, 'short', row(1, 'x'),
    '{1,2}', '{3}', '{1.5}', '{1.25}', '{a,b}', '{t,f}',
    '{00000000-0000-0000-0000-000000000002}', '{2024-01-02}', '{2024-01-02 03:04:05+00}',
    array['{"c":1}'::jsonb], array['\\x01'::bytea], '{sad,ok}', '{1,2}',
    array[row(1, 'x')::tg_pair])`;

/** The type text of each column of tg_everything, with the client's default options. */
const EVERYTHING_TYPES: Record<string, string> = {
  id: "number",
  i2: "number",
  i4: "number",
  i8: "string",
  f4: "number",
  f8: "number",
  num: "string",
  o: "number",
  b: "boolean",
  t: "string",
  vc: "string",
  ch: "string",
  nm: "string",
  u: "string",
  ts: "Date",
  tstz: "Date",
  d: "Date",
  tm: "string",
  ttz: "string",
  iv: "string",
  js: "unknown",
  jsb: "unknown",
  by: "Buffer",
  ip: "string",
  pt: "string",
  rng: "string",
  mood: '"sad" | "ok" | "happy"',
  pos: "number",
  short: "string",
  pair: "string",
  a_i4: "(number | null)[]",
  a_i8: "(string | null)[]",
  a_f8: "(number | null)[]",
  a_num: "(string | null)[]",
  a_t: "(string | null)[]",
  a_b: "(boolean | null)[]",
  a_u: "(string | null)[]",
  a_d: "(Date | null)[]",
  a_tstz: "(Date | null)[]",
  a_jsb: "unknown[]",
  a_by: "(Buffer | null)[]",
  a_mood: '("sad" | "ok" | "happy" | null)[]',
  a_pos: "(string | null)[]",
  a_pair: "(string | null)[]",
};

Deno.test({
  name: "typegen describer: types, nullability and parameters of a schema, checked at run time",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async (t) => {
    await using fx = await openFixture();
    await fx.withClient({}, (sql) => sql.unsafe(EVERYTHING_ROW));

    await step(t, "every type of the mapping is what pgpipe returns", async () => {
      const columns = await described(await fx.describer(), "select * from tg_everything");
      assert.deepEqual(
        Object.fromEntries(columns.map((c) => [c.name, c.type])),
        EVERYTHING_TYPES,
      );
      assert.deepEqual(columns.filter((c) => c.nullable), [], "every column is NOT NULL");
      const rows = await fx.withClient({}, (sql) => sql`select * from tg_everything`);
      assertRowsMatch(rows, columns);
      // `unknown` matches anything: the JSON values are checked as values.
      assert.deepEqual(rows[0].js, { a: [1, 2] });
      assert.deepEqual(rows[0].jsb, { b: null });
      assert.deepEqual(rows[0].a_jsb, [{ c: 1 }]);
    });

    await step(t, "bigint mode: int8 is bigint, in arrays too", async () => {
      const columns = await described(
        await fx.describer({ bigint: true }),
        "select i8, a_i8, num from tg_everything",
      );
      assert.deepEqual(columns.map((c) => c.type), ["bigint", "(bigint | null)[]", "string"]);
      const rows = await fx.withClient(
        { bigint: true },
        (sql) => sql`select i8, a_i8, num from tg_everything`,
      );
      assertRowsMatch(rows, columns);
    });

    await step(
      t,
      "the column names are the transform's (pgpipe's own case functions)",
      async () => {
        const text = "select a_i4, created_at, a_i4 as x_y_z from tg_everything, tg_users limit 1";
        await fx.withClient({}, (sql) => sql`insert into tg_users (name) values ('transform')`);
        const camel = await described(await fx.describer({ transform: "camel" }), text);
        assert.deepEqual(camel.map((c) => c.name), ["aI4", "createdAt", "xYZ"]);
        const rows = await fx.withClient({ transform: "camel" }, (sql) => sql.unsafe(text));
        assertRowsMatch(rows, camel);
        await fx.withClient({}, (sql) => sql`delete from tg_users where name = 'transform'`);
      },
    );

    await step(t, "a name given twice is one key, with the last value's type", async () => {
      const text = "select 1 as a, 'x' as b, 'y'::text as a";
      const columns = await described(await fx.describer(), text);
      assert.deepEqual(columns, [
        { name: "a", type: "string", nullable: false },
        { name: "b", type: "string", nullable: false },
      ]);
      assertRowsMatch(await fx.withClient({}, (sql) => sql.unsafe(text)), columns);
    });

    await step(
      t,
      "parameters: the types pgpipe sends as each, null only where it may go",
      async () => {
        const insert = `insert into tg_everything (i2, i4, i8, f4, f8, num, o, b, t, vc, ch, nm, u,
        ts, tstz, d, tm, ttz, iv, js, jsb, "by", ip, pt, rng, mood, pos, short, pair, a_i4, a_i8,
        a_f8, a_num, a_t, a_b, a_u, a_d, a_tstz, a_jsb, a_by, a_mood, a_pos, a_pair)
        values (${Array.from({ length: 43 }, (_, i) => `$${i + 1}`).join(", ")})`;
        const [r] = await (await fx.describer()).describe([insert]);
        assert.ok(r.ok, r.ok ? "" : r.message);
        assert.deepEqual(r.params, [
          "number",
          "number",
          "bigint | number | string",
          "number",
          "number",
          "bigint | number | string",
          "number",
          "boolean",
          "string",
          "string",
          "string",
          "string",
          "string",
          "Date | string",
          "Date | string",
          "Date | string",
          "string",
          "string",
          "string",
          "unknown",
          "unknown",
          "Uint8Array",
          "string",
          "string",
          "string",
          '"sad" | "ok" | "happy"',
          "number",
          "string",
          "string",
          "readonly (number | null)[]",
          "readonly (bigint | number | string | null)[]",
          "readonly (number | null)[]",
          "readonly (bigint | number | string | null)[]",
          "readonly (string | null)[]",
          "readonly (boolean | null)[]",
          "readonly (string | null)[]",
          "readonly (Date | string | null)[]",
          "readonly (Date | string | null)[]",
          "readonly unknown[]",
          "readonly (Uint8Array | null)[]",
          'readonly ("sad" | "ok" | "happy" | null)[]',
          "readonly (number | null)[]",
          "readonly (string | null)[]",
        ]);
        // Values of those types go in: the accepted types are what pgpipe sends as each.
        const values: unknown[] = [
          1,
          2,
          3n,
          1.5,
          2.5,
          "1.25",
          7,
          false,
          "t",
          "v",
          "abc",
          "n",
          "00000000-0000-0000-0000-000000000003",
          new Date(0),
          new Date(0),
          "2024-01-03",
          "01:02:03",
          "01:02:03+00",
          "2 hours",
          { a: 1 },
          5,
          new Uint8Array([1, 2]),
          "::1",
          "(0,0)",
          "[2,3)",
          "sad",
          3,
          "s",
          "(2,y)",
          [1, null],
          ["1", 2, 3n],
          [1.5],
          [1, "2.5"],
          ["a", null],
          [true],
          ["00000000-0000-0000-0000-000000000004"],
          [new Date(0)],
          [new Date(0)],
          [{ z: 1 }],
          [new Uint8Array([3])],
          ["ok", null],
          [1],
          ["(3,z)"],
        ];
        values.forEach((v, i) => {
          assert.ok(
            valueMatches(v, r.params[i]),
            `$${i + 1}: ${Deno.inspect(v)} is ${r.params[i]}`,
          );
        });
        const inserted = await fx.withClient({}, (sql) => rolledBack(sql, insert, values));
        assert.equal(inserted.count, 1);
      },
    );

    await fx.withClient({}, (sql) =>
      sql.unsafe(`
        insert into tg_users (name, email) values ('ada', null), ('bob', 'bob@x');
        insert into tg_posts (author_id, title, body)
          select id, title, body from tg_users, (values ('first', null), ('second', 'b')) v(title, body)
          where name = 'ada';
      `));

    await step(
      t,
      "nullability: each rule, and no column proved non-null is null at run time",
      async () => {
        const describer = await fx.describer();
        const texts = NULLABILITY.map((c) => c.text);
        const results = await describer.describe(texts);
        for (const [i, c] of NULLABILITY.entries()) {
          const r = results[i];
          assert.ok(r.ok, `${c.text}: ${r.ok ? "" : r.message}`);
          assert.deepEqual(
            r.columns.map((col) => col.nullable),
            c.nullable,
            `${c.rule}: ${c.text}`,
          );
          if (c.params !== undefined) assert.deepEqual(r.params, c.params, c.rule);
          // The rows prove the flags (and the types) sound on this data.
          if (r.columns.length > 0) {
            const rows = await fx.withClient({}, (sql) => rolledBack(sql, c.text, c.values ?? []));
            assertRowsMatch(rows, r.columns);
          }
        }
        // The data does exercise the nullable side: the left join gives a null title.
        const rows = await fx.withClient({}, (sql) => sql.unsafe(NULLABILITY[0].text));
        assert.ok(rows.some((row) => row.title === null));
      },
    );

    await step(
      t,
      "a misspelt column fails alone, with the server's position and code",
      async () => {
        const texts = [
          "select id,\n  nmae from tg_users",
          "select id from tg_users",
          "selec 1",
        ];
        const [misspelt, fine, syntax] = await (await fx.describer()).describe(texts);
        assert.deepEqual(misspelt, {
          ok: false,
          message: 'column "nmae" does not exist',
          position: texts[0].indexOf("nmae") + 1,
          code: "42703",
        });
        assert.ok(fine.ok);
        assert.ok(!syntax.ok && syntax.code === "42601" && syntax.position === 1, String(syntax));
      },
    );

    await step(
      t,
      "a statement that fails after the server logged its tree leaves the others theirs",
      async () => {
        // The rewriter refuses an insert into a view it cannot update: after parse analysis,
        // whose tree the session already logged. The next statement must not take that tree.
        const [view, joined] = await (await fx.describer()).describe([
          "insert into tg_post_counts (author_id) values (1) returning author_id",
          NULLABILITY[0].text,
        ]);
        assert.ok(!view.ok && /cannot insert into view/.test(view.message), JSON.stringify(view));
        assert.ok(joined.ok);
        assert.deepEqual(joined.columns.map((c) => c.nullable), NULLABILITY[0].nullable);
      },
    );

    await step(t, "describing never runs a statement: nothing is written", async () => {
      const describer = await fx.describer();
      const writes = [
        "delete from tg_posts",
        "drop table tg_posts",
        "insert into tg_users (name) values ('written')",
        "update tg_users set name = 'changed'",
      ];
      const results = await describer.describe(writes);
      assert.deepEqual(results.map((r) => r.ok), [true, true, true, true]);
      // Had the drop run, the table would be gone for the describer's own session too.
      assert.ok((await describer.describe(["select * from tg_posts"]))[0].ok);
      if (!onPglite) {
        const [counts] = await fx.withClient(
          {},
          (sql) =>
            sql`select (select count(*) from tg_posts) as posts,
            (select count(*) from tg_users where name in ('written', 'changed')) as users`,
        );
        assert.deepEqual(counts, { posts: "2", users: "0" });
      }
    });

    await step(t, "500 queries described at once, the misspelt ones failing alone", async () => {
      const texts = Array.from(
        { length: 500 },
        (_, i) =>
          i % 50 === 49
            ? `select id, nme_${i} from tg_users`
            : `select u.id, u.name, p.title, ${i} as k ${JOINED} where u.id = $1`,
      );
      const results = await (await fx.describer()).describe(texts);
      assert.equal(results.length, 500);
      const ok = results.filter((r) => r.ok);
      const failed = results.filter((r) => !r.ok);
      assert.equal(ok.length, 490);
      assert.equal(failed.length, 10);
      for (const r of ok) {
        assert.deepEqual(r.columns.map((c) => c.nullable), [false, false, true, false]);
        assert.deepEqual(r.params, ["number | null"]);
      }
      for (const [k, r] of failed.entries()) {
        assert.ok(!r.ok && r.code === "42703" && r.message.includes(`nme_${k * 50 + 49}`));
      }
    });

    await step(t, "{ database: undefined } reads DATABASE_URL", async () => {
      const o = await fx.withClient({}, (sql) => Promise.resolve(sql.options));
      const target = `postgres://${o.user}@${o.host[0]}:${o.port[0]}/${o.database}`;
      await withEnv({ DATABASE_URL: target }, async () => {
        const describer = await openDescriber({ database: undefined }, {});
        try {
          const columns = await described(describer, "select name from tg_users");
          assert.deepEqual(columns, [{ name: "name", type: "string", nullable: false }]);
        } finally {
          await describer.close();
        }
      });
    }, true);
  },
});

/** A nullability rule: a query, the nullable flag of each column, and its parameters' types. */
interface Rule {
  rule: string;
  text: string;
  nullable: boolean[];
  params?: string[];
  values?: unknown[];
}

const JOINED = "from tg_users u left join tg_posts p on p.author_id = u.id";

const NULLABILITY: Rule[] = [
  {
    rule: "left join: the right side may be null; NOT NULL and primary key columns of the left not",
    text: `select u.id, u.name, u.email, p.title, p.body ${JOINED}`,
    nullable: [false, false, true, true, true],
  },
  {
    rule: "right join: the left side may be null",
    text: "select u.name, p.title from tg_users u right join tg_posts p on p.author_id = u.id",
    nullable: [true, false],
  },
  {
    rule: "full join: both sides may be null",
    text: "select u.name, p.title from tg_users u full join tg_posts p on p.author_id = u.id",
    nullable: [true, true],
  },
  {
    rule: "inner join: NOT NULL columns stay non-null",
    text: "select u.name, p.title from tg_users u join tg_posts p on p.author_id = u.id",
    nullable: [false, false],
  },
  {
    rule: "an inner join nested on the nullable side of a left join",
    text: "select u.name, p.title, v.name as other from tg_users u left join " +
      "(tg_posts p join tg_users v on v.id = p.author_id) on p.author_id = u.id",
    nullable: [false, true, true],
  },
  {
    rule: "left join using: the merged column is the left one",
    text: "select id, title from tg_users left join tg_posts using (id)",
    nullable: [false, true],
  },
  {
    rule: "count(*) and count(x) are never null; other aggregates may be",
    text: `select count(*) as n, count(p.body) as c, max(u.id) as m, sum(u.id) as s ${JOINED}`,
    nullable: [false, false, true, true],
  },
  {
    rule: "coalesce is non-null when an argument is",
    text: "select coalesce(u.email, 'none') as e, coalesce(u.email, p.body) as x, " +
      `coalesce(p.title, u.name) as y ${JOINED}`,
    nullable: [false, true, false],
  },
  {
    rule: "literals: non-null unless null",
    text: "select 1 as one, 'a' as a, null::int as n, true as t, 1.5 as f, 2::int8 as big",
    nullable: [false, false, true, false, false, false],
  },
  {
    rule: "a parameter may be null",
    text: "select $1::int as p",
    nullable: [true],
    params: ["number | null"],
    values: [1],
  },
  {
    rule: "subqueries and CTEs keep what their columns prove",
    text: "with x as (select email, name from tg_users) " +
      "select s.n, x.email from (select name as n, id from tg_users) s join x on x.name = s.n",
    nullable: [false, true],
  },
  {
    rule: "union all of non-null columns",
    text: "select name from tg_users union all select title from tg_posts",
    nullable: [false],
  },
  {
    rule: "union with a nullable arm",
    text: "select name from tg_users union select body from tg_posts",
    nullable: [true],
  },
  {
    rule: "group by keeps a NOT NULL column",
    text: "select author_id, count(*) as n from tg_posts group by author_id",
    nullable: [false, false],
  },
  {
    rule: "rollup's total row nulls the grouped column",
    text: "select author_id, count(*) as n from tg_posts group by rollup (author_id)",
    nullable: [true, false],
  },
  {
    rule: "expressions: case with else, exists, is null, casts prove; others do not",
    text: "select (select name from tg_users limit 1) as s, " +
      "case when id > 1 then 'a' else 'b' end as c, case when id > 1 then 'a' end as d, " +
      "exists (select 1 from tg_posts) as e, id + 1 as plus, id::text as cast, " +
      "email is null as isnull, ('1'::jsonb)::int as j from tg_users",
    // A cast from jsonb proves nothing: since PostgreSQL 17 'null'::jsonb::int is null.
    nullable: [true, false, true, false, true, false, false, true],
  },
  {
    rule: "left join lateral",
    text: "select u.name, l.title from tg_users u left join lateral " +
      "(select title from tg_posts p where p.author_id = u.id limit 1) l on true",
    nullable: [false, true],
  },
  {
    rule: "window functions: row_number is never null, lag may be",
    text: "select row_number() over () as r, lag(id) over () as l from tg_users",
    nullable: [false, true],
  },
  {
    rule: "values lists: a column with a null in any row may be null",
    text: "select * from (values (1, null::int), (2, 3)) v(a, b)",
    nullable: [false, true],
  },
  {
    rule: "a view's columns are its definition's: count(*) never null, the grouped column not",
    text: "select author_id, posts from tg_post_counts",
    nullable: [false, false],
  },
  {
    rule: "a view on a view, on the nullable side of a left join",
    text: "select u.name, c.author_id, c.n, c.posts from tg_users u left join " +
      "tg_counted c on c.author_id = u.id",
    nullable: [false, true, true, true],
  },
  {
    rule: "a view's view, joined inner",
    text: "select author_id, n, posts from tg_counted",
    nullable: [false, true, false],
  },
  {
    rule: "insert returning: NOT NULL columns are non-null; a NOT NULL target takes no null",
    text: "insert into tg_users (name, email) values ($1, $2) " +
      "returning id, name, email, mood, created_at",
    nullable: [false, false, true, false, false],
    params: ["string", "string | null"],
    values: ["new", null],
  },
  {
    rule: "update returning: set to a NOT NULL column takes no null",
    text: "update tg_posts set body = $1, title = $2 where id = $3 returning title, body",
    nullable: [false, true],
    params: ["string | null", "string", "number | null"],
    values: [null, "t", 1],
  },
  {
    rule: "on conflict do update: its set takes no null for a NOT NULL column, nor a cast one",
    text: "insert into tg_users (name, email) values ($1::varchar, $2) on conflict (id) " +
      "do update set name = $3, email = $4 returning id",
    nullable: [false],
    params: ["string", "string | null", "string", "string | null"],
    values: ["a", null, "b", null],
  },
  {
    rule: "insert of several rows: each row's value for a NOT NULL column",
    text: "insert into tg_posts (author_id, title, body) values ($1, $2, $3), ($4, $5, $6)",
    nullable: [],
    params: ["number", "string", "string | null", "number", "string", "string | null"],
  },
  {
    rule: "a table with a BEFORE ROW trigger may fill a NOT NULL column: null goes in",
    text: "insert into tg_slugs (title, slug) values ($1, $2) returning slug",
    nullable: [false],
    params: ["string | null", "string | null"],
    values: ["A title", null],
  },
  {
    rule: "names the tree writes with escapes are read back, so the rules still apply",
    text: 'select 1 as "a b", 2 as "(x)", 3 as ":y", 4 as """q", 5 as "1abc", ' +
      '6 as "back\\slash", 7 as "{}", 8 as "<>", 9 as "é ü"',
    nullable: [false, false, false, false, false, false, false, false, false],
  },
  {
    rule: "a table with a rule: what a write returns is the rule's, and its null goes in",
    text: "insert into tg_notes (note) values ($1) returning id, note",
    nullable: [true, true],
    params: ["string | null"],
    values: [null],
  },
  {
    rule: "delete returning",
    text: "delete from tg_posts where id = $1 returning id, body",
    nullable: [false, true],
    params: ["number | null"],
    values: [1],
  },
];

Deno.test({
  name: "typegen describer: a Drizzle Kit migrations folder, as it is, on an in-process PGlite",
  // PGlite's node:fs mount keeps handles of its own between calls (as in pglite_test.ts).
  sanitizeResources: false,
  fn: async () => {
    // test/fixtures/drizzle is Drizzle Kit's output for the ORM tests: breakpoints, a piece
    // holding two statements, a view, a function with semicolons in it, and meta/_journal.json.
    const describer = await openDescriber({ migrations: DRIZZLE }, { transform: "camel" });
    try {
      const [users, view, wrong] = await describer.describe([
        "select id, name, age, mood, tags, nickname, created_at from orm_drizzle.users",
        "select * from orm_drizzle.active_users",
        "select id from orm_drizzle.nowhere",
      ]);
      assert.ok(users.ok, users.ok ? "" : users.message);
      assert.deepEqual(users.columns, [
        { name: "id", type: "number", nullable: false },
        { name: "name", type: "string", nullable: false },
        { name: "age", type: "number", nullable: true },
        { name: "mood", type: '"sad" | "ok" | "happy"', nullable: true },
        { name: "tags", type: "(string | null)[]", nullable: false },
        { name: "nickname", type: "string", nullable: true }, // added by the second migration
        { name: "createdAt", type: "Date", nullable: false },
      ]);
      // A view's columns are its definition's: `select id, name, created_at from users where
      // active`, all NOT NULL columns.
      assert.ok(view.ok, view.ok ? "" : view.message);
      assert.deepEqual(view.columns.map((c) => [c.name, c.nullable]), [
        ["id", false],
        ["name", false],
        ["createdAt", false],
      ]);
      assert.ok(!wrong.ok && wrong.code === "42P01");
      // Written through, a view returns what its trigger or rule made: nothing is proved.
      const [written] = await describer.describe([
        "insert into orm_drizzle.active_users (name) values ($1) returning id, name",
      ]);
      assert.ok(written.ok, written.ok ? "" : written.message);
      assert.deepEqual(written.columns.map((c) => c.nullable), [true, true]);
      assert.deepEqual(written.params, ["string | null"]);
    } finally {
      await describer.close();
    }
  },
});

Deno.test({
  name:
    "typegen describer: a NOT NULL constraint not yet validated proves nothing (PGlite: PostgreSQL 18)",
  sanitizeResources: false,
  fn: async () => {
    const dir = await Deno.makeTempDir({ prefix: "typegen_not_valid_" });
    try {
      await Deno.writeTextFile(
        join(dir, "0000_not_valid.sql"),
        "create table t (a int, b int not null);\ninsert into t values (null, 1);\n" +
          "alter table t add constraint a_set not null a not valid;\n",
      );
      const columns = await describedFrom(dir, "select a, b from t");
      assert.deepEqual(columns.map((c) => [c.name, c.nullable]), [["a", true], ["b", false]]);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test({
  name:
    "typegen describer: migrations in order with numbers by value, undo halves left out, Drizzle Kit 1's folders read",
  sanitizeResources: false,
  fn: async () => {
    const dir = await Deno.makeTempDir({ prefix: "typegen_layouts_" });
    try {
      const write = (name: string, text: string) => Deno.writeTextFile(join(dir, name), text);
      // Flyway-like numbering: V10 after V2, though "V1" < "V2" < "V10" is not name order.
      await write("V1__users.up.sql", "create table users (id int primary key);\n");
      await write("V1__users.down.sql", "drop table users;\n");
      await write("V2__age.sql", "alter table users add column age int;\n");
      await write("V10__age_not_null.sql", "alter table users alter column age set not null;\n");
      await Deno.mkdir(join(dir, "V20_name"));
      await Deno.writeTextFile(
        join(dir, "V20_name", "migration.sql"),
        "alter table users add column name text not null;\n",
      );
      await Deno.mkdir(join(dir, "meta"));
      await Deno.writeTextFile(join(dir, "meta", "_journal.json"), "{}");
      const files = (await readMigrations(dir)).map((m) => m.file.slice(dir.length + 1));
      assert.deepEqual(files, [
        "V1__users.up.sql",
        "V2__age.sql",
        "V10__age_not_null.sql",
        join("V20_name", "migration.sql"),
      ]);
      const columns = await describedFrom(dir, "select id, age, name from users");
      assert.deepEqual(columns.map((c) => [c.name, c.nullable]), [
        ["id", false],
        ["age", false],
        ["name", false],
      ]);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test({
  name:
    "typegen describer: the contrib extensions the migrations create are loaded into PGlite (uuid-ossp, pgcrypto, citext)",
  sanitizeResources: false,
  fn: async () => {
    const dir = await Deno.makeTempDir({ prefix: "typegen_extensions_" });
    try {
      await Deno.writeTextFile(
        join(dir, "0000_extensions.sql"),
        'CREATE EXTENSION IF NOT EXISTS "uuid-ossp";--> statement-breakpoint\n' +
          "create extension pgcrypto;\n--> statement-breakpoint\n" +
          "CREATE EXTENSION IF NOT EXISTS citext;\n--> statement-breakpoint\n" +
          "CREATE TABLE u (id uuid PRIMARY KEY DEFAULT uuid_generate_v4(), email citext NOT NULL);\n",
      );
      assert.deepEqual(contribExtensionsOf(await readMigrations(dir)), [
        "uuid_ossp",
        "pgcrypto",
        "citext",
      ]);
      const columns = await describedFrom(
        dir,
        "select id, email, digest(email::text, 'sha256') as hash from u",
      );
      assert.deepEqual(columns.map((c) => [c.name, c.type, c.nullable]), [
        ["id", "string", false],
        ["email", "string", false],
        ["hash", "Buffer", true],
      ]);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test("typegen describer: a server that cannot be reached rejects the open", async () => {
  // Port 1 of loopback: nothing listens there.
  const error = await openDescriber({ database: "postgres://nobody@127.0.0.1:1/none" }, {}).then(
    (d) => d.close().then(() => assert.fail("nothing listens on port 1")),
    (e: unknown) => e,
  );
  assert.ok(error instanceof ConnectionError, String(error));
});

Deno.test({
  name: "typegen describer: a failing migration names its file, statement and line",
  sanitizeResources: false,
  fn: async () => {
    const dir = await Deno.makeTempDir({ prefix: "typegen_migrations_" });
    try {
      await Deno.writeTextFile(
        join(dir, "0000_first.sql"),
        'CREATE TABLE "a" ("id" serial PRIMARY KEY);\n',
      );
      await Deno.writeTextFile(
        join(dir, "0001_second.sql"),
        'CREATE TABLE "b" ("id" serial PRIMARY KEY);\n--> statement-breakpoint\n' +
          'ALTER TABLE "b"\n  ADD COLUMN "x" no_such_type;\n',
      );
      await Deno.writeTextFile(join(dir, "notes.txt"), "not a migration");
      await Deno.mkdir(join(dir, "meta"));
      await Deno.writeTextFile(join(dir, "meta", "0002_ignored.sql"), "this is not sql");
      const error = await openDescriber({ migrations: dir }, {}).then(
        (d) => d.close().then(() => assert.fail("the migration should have failed")),
        (e: unknown) => e,
      );
      assert.ok(error instanceof MigrationError, String(error));
      assert.equal(error.file, join(dir, "0001_second.sql"));
      assert.equal(error.statement, 2);
      assert.equal(error.line, 4, "the line of no_such_type");
      assert.match(error.message, /0001_second\.sql:4: statement 2: type "no_such_type"/);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test("typegen describer: the tree reader reads what nodeToString writes, and refuses the rest", () => {
  const tree = parseNodeTree(
    "{QUERY :commandType 1 :rtable <> :targetList ({TARGETENTRY :expr {CONST :consttype 23 " +
      ":constisnull false :constvalue 4 [ 1 0 0 0 0 0 0 0 ]} :resno 1 :resname \\<> " +
      ':resjunk false}) :cols (i 1 2) :names ("a\\ b" "") :empty ()}',
  );
  assert.equal(tree.tag, "QUERY");
  const [entry] = tree.fields.targetList as PgNode[];
  assert.equal(entry.fields.resname, "<>", "an escaped <> is a name, not null");
  assert.equal((entry.fields.expr as PgNode).fields.constisnull, "false");
  assert.deepEqual(tree.fields.cols, ["1", "2"]);
  assert.deepEqual(tree.fields.names, ["a b", ""]);
  assert.deepEqual(tree.fields.empty, []);
  assert.equal(tree.fields.rtable, null);
  // PostgreSQL 13 and 14's shorter tags read as the later ones.
  const old = parseNodeTree("{QUERY :rtable ({RTE :rtekind 0}) :x {COALESCE :args <>}}");
  assert.equal((old.fields.rtable as PgNode[])[0].tag, "RANGETBLENTRY");
  assert.equal((old.fields.x as PgNode).tag, "COALESCEEXPR");
  for (const bad of ["", "{QUERY :a 1", "{QUERY a 1}", "{QUERY :a (1}", "{Q} extra"]) {
    assert.throws(() => parseNodeTree(bad), NodeTreeError, bad);
  }
});
