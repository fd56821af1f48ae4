// Test-only npm imports, pinned where they are used.
// deno-lint-ignore-file no-import-prefix
/**
 * Kysely 0.28 over pgpipe. One Kysely program (schema builder, CRUD with returning, joins,
 * subqueries, CTEs, aggregates, JSON helpers, transactions, savepoints, `db.connection()`,
 * `stream()`, introspection, the Migrator, errors) runs on three stacks: kysely-postgres-js over
 * postgres.js (npm), the same dialect over pgpipe (only the import changed), and pgpipe's own
 * dialect (`@pgpipe/pgpipe/kysely`). Their transcripts must be equal. Then the dialect's own
 * guarantees: concurrent queries pipeline on one connection, a transaction keeps its connection
 * to itself, `db.connection()` keeps one session, streams read in Kysely's chunks.
 *
 * npm packages are test-only imports here; nothing in mod.ts's graph imports them.
 */
import assert from "node:assert/strict";
import { promises as fs } from "node:fs";
import * as path from "node:path";
import {
  AbortedTransactionError,
  CamelCasePlugin,
  CompiledQuery,
  FileMigrationProvider,
  type Generated,
  Kysely,
  type Migration,
  Migrator,
  NoResultError,
  sql,
} from "npm:kysely@^0.28.19";
import { jsonArrayFrom, jsonObjectFrom } from "npm:kysely@^0.28.19/helpers/postgres";
import { PostgresJSDialect } from "npm:kysely-postgres-js@3.0.0";
import postgresJs from "npm:postgres@3.4.9";
import postgres, { PostgresError } from "../mod.ts";
import { PgpipeDialect } from "../kysely.ts";
import { pglite } from "../pglite.ts";
import { type PgpipeConnection, PgpipeDriver } from "../src/kysely/driver.ts";
import { needsSession } from "../src/kysely/session_statement.ts";
import { databaseUrl } from "./harness/env.ts";
import { tapProxy } from "./harness/tap_proxy.ts";
import { serverVersion } from "./harness/util.ts";
import { settledYet, until } from "./harness/wait.ts";
import { quiet } from "./harness/connect.ts";

const url = databaseUrl();

interface Database {
  person: {
    id: Generated<number>;
    first_name: string;
    last_name: string | null;
    gender: "female" | "male" | "other";
    born: Date | null;
    balance: string | null;
    tags: string[] | null;
    meta: unknown;
    photo: Uint8Array | null;
  };
  pet: { id: Generated<number>; owner_id: number; name: string; species: string };
  toy: { id: Generated<number>; pet_id: number; name: string; price: string };
  audit: { id: Generated<number>; note: string };
  counter: { name: string; n: number };
}

/** A stack: how a Kysely instance is made, with the search_path its client connects with. */
interface Stack {
  name: string;
  make(schema: string, max?: number): Kysely<Database>;
}

const stacks: Stack[] = [
  {
    name: "kysely-postgres-js + postgres.js",
    make: (schema, max = 4) =>
      new Kysely<Database>({
        dialect: new PostgresJSDialect({
          postgres: postgresJs(url, { max, ...quiet, connection: { search_path: schema } }),
        }),
      }),
  },
  {
    name: "kysely-postgres-js + pgpipe",
    make: (schema, max = 4) =>
      new Kysely<Database>({
        dialect: new PostgresJSDialect({
          // deno-lint-ignore no-explicit-any
          postgres: postgres(url, { max, ...quiet, connection: { search_path: schema } }) as any,
        }),
      }),
  },
  {
    name: "PgpipeDialect",
    make: (schema, max = 4) =>
      new Kysely<Database>({
        dialect: new PgpipeDialect({
          postgres: postgres(url, { max, ...quiet, connection: { search_path: schema } }),
        }),
      }),
  },
];

/**
 * Runs `fn` in a fresh schema (the clients connect with it as their search_path), dropped after:
 * Kysely's Migrator looks for its tables in every schema, so none may be left for the next run.
 */
async function inSchema<T>(name: string, fn: () => Promise<T>): Promise<T> {
  await using admin = postgres(url, { max: 1, ...quiet });
  await admin.unsafe(`drop schema if exists ${name} cascade; create schema ${name}`);
  try {
    return await fn();
  } finally {
    await admin.unsafe(`drop schema if exists ${name} cascade`);
  }
}

/** Values made comparable: dates as ISO text, bytes as hex, bigints tagged, errors by fields. */
function plain(value: unknown, schema: string): unknown {
  if (value instanceof Date) return { date: value.toISOString() };
  if (value instanceof Uint8Array) return { hex: [...value].map((b) => b.toString(16)).join("") };
  if (typeof value === "bigint") return { bigint: value.toString() };
  if (typeof value === "string") return value.replaceAll(schema, "<schema>");
  if (value instanceof Error) return errorFields(value, schema);
  if (Array.isArray(value)) return value.map((v) => plain(v, schema));
  if (value !== null && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, plain(v, schema)]));
  }
  return value;
}

function errorFields(e: Error, schema: string): unknown {
  const f = e as unknown as Record<string, unknown>;
  const fields: Record<string, unknown> = { name: e.name, message: e.message };
  for (
    const k of ["code", "detail", "constraint_name", "table_name", "column_name", "schema_name"]
  ) {
    if (f[k] !== undefined) fields[k] = plain(f[k], schema);
  }
  return fields;
}

/** Runs `fn` and records its value, or the error it threw. */
async function step(
  out: Record<string, unknown>,
  name: string,
  schema: string,
  fn: () => Promise<unknown>,
): Promise<void> {
  try {
    out[name] = plain(await fn(), schema);
  } catch (e) {
    out[name] = { threw: plain(e, schema) };
  }
}

/** The Kysely program every stack runs; returns what each step gave. */
async function program(
  db: Kysely<Database>,
  schema: string,
  version: number,
): Promise<Record<string, unknown>> {
  const out: Record<string, unknown> = {};
  const s = (name: string, fn: () => Promise<unknown>) => step(out, name, schema, fn);

  await s("schema builder", async () => {
    await db.schema.createType("gender").asEnum(["female", "male", "other"]).execute();
    await db.schema.createTable("person")
      .addColumn("id", "serial", (c) => c.primaryKey())
      .addColumn("first_name", "varchar(50)", (c) => c.notNull())
      .addColumn("last_name", "text")
      .addColumn("gender", sql`gender`, (c) => c.notNull())
      .addColumn("born", "timestamptz")
      .addColumn("balance", "numeric(12, 2)")
      .addColumn("tags", sql`text[]`)
      .addColumn("meta", "jsonb")
      .addColumn("photo", "bytea")
      .execute();
    await db.schema.createTable("pet")
      .addColumn("id", "serial", (c) => c.primaryKey())
      .addColumn(
        "owner_id",
        "integer",
        (c) => c.references("person.id").onDelete("cascade").notNull(),
      )
      .addColumn("name", "text", (c) => c.notNull().unique())
      .addColumn("species", "text", (c) => c.notNull())
      .execute();
    await db.schema.createTable("toy")
      .addColumn("id", "serial", (c) => c.primaryKey())
      .addColumn("pet_id", "integer", (c) => c.references("pet.id").onDelete("cascade").notNull())
      .addColumn("name", "text", (c) => c.notNull())
      .addColumn("price", "numeric(8, 2)", (c) => c.notNull().check(sql`price >= 0`))
      .execute();
    await db.schema.createTable("audit").ifNotExists()
      .addColumn("id", "serial", (c) => c.primaryKey())
      .addColumn("note", "text", (c) => c.notNull())
      .execute();
    await db.schema.createTable("counter")
      .addColumn("name", "text", (c) => c.primaryKey())
      .addColumn("n", "integer", (c) => c.notNull().defaultTo(0))
      .execute();
    await db.schema.createIndex("pet_species").on("pet").column("species").execute();
    await db.schema.alterTable("person").addColumn("nick", "text").execute();
    await db.schema.alterTable("person").dropColumn("nick").execute();
    await db.schema.createView("dogs").as(
      db.selectFrom("pet").select(["id", "name"]).where("species", "=", "dog"),
    ).execute();
    return "ok";
  });

  await s("insert returning one", () =>
    db.insertInto("person").values({
      first_name: "Jennifer",
      last_name: "Aniston",
      gender: "female",
      born: new Date("1969-02-11T00:00:00Z"),
      balance: "1234.50",
      tags: ["actor", "friends"],
      meta: { city: "LA", shows: ["Friends"], n: 1 },
      photo: new Uint8Array([1, 2, 255]),
    }).returningAll().executeTakeFirstOrThrow());
  await s("insert returning many", () =>
    db.insertInto("person").values([
      { first_name: "Arnold", last_name: "Schwarzenegger", gender: "male" },
      { first_name: "Sylvester", last_name: null, gender: "male", tags: [] },
    ]).returning(["id", "first_name"]).execute());
  await s("insert result", () =>
    db.insertInto("pet").values([
      { owner_id: 1, name: "Catto", species: "cat" },
      { owner_id: 2, name: "Doggo", species: "dog" },
      { owner_id: 2, name: "Doggo 2", species: "dog" },
      { owner_id: 3, name: "Hammo", species: "hamster" },
    ]).executeTakeFirst());
  await s(
    "insert from select",
    () =>
      db.insertInto("toy").columns(["pet_id", "name", "price"]).expression(
        db.selectFrom("pet").select([
          "id",
          sql<string>`name || ' ball'`.as("name"),
          sql`9.99`.as("price"),
        ]),
      ).execute(),
  );
  await s(
    "upsert",
    () =>
      db.insertInto("counter").values([{ name: "a", n: 1 }, { name: "b", n: 1 }]).onConflict((oc) =>
        oc.column("name").doUpdateSet((eb) => ({ n: eb("counter.n", "+", eb.ref("excluded.n")) }))
      ).execute().then(() =>
        db.insertInto("counter").values({ name: "a", n: 5 }).onConflict((oc) =>
          oc.column("name").doUpdateSet({ n: sql`counter.n + excluded.n` })
        ).returningAll().execute()
      ),
  );
  await s(
    "on conflict do nothing",
    () =>
      db.insertInto("counter").values({ name: "b", n: 7 }).onConflict((oc) => oc.doNothing())
        .executeTakeFirst(),
  );

  await s(
    "select where order limit",
    () =>
      db.selectFrom("person").select([
        "id",
        "first_name",
        "born",
        "balance",
        "tags",
        "meta",
        "photo",
      ])
        .where("gender", "=", "male").orderBy("id", "desc").limit(5).offset(0).execute(),
  );
  await s(
    "select take first",
    () => db.selectFrom("person").selectAll().where("id", "=", 999).executeTakeFirst(),
  );
  await s(
    "select take first or throw",
    () =>
      db.selectFrom("person").selectAll().where("id", "=", 999).executeTakeFirstOrThrow()
        .catch((e) => ({ noResult: e instanceof NoResultError })),
  );
  await s(
    "where in, like, is null, or",
    () =>
      db.selectFrom("person").select("first_name").where((eb) =>
        eb.or([
          eb("first_name", "in", ["Arnold", "Nobody"]),
          eb("last_name", "is", null),
          eb("last_name", "like", "Ani%"),
        ])
      ).orderBy("first_name").execute(),
  );

  await s(
    "update returning",
    () =>
      db.updateTable("person").set({ balance: "10.00", last_name: "Stallone" })
        .where("first_name", "=", "Sylvester").returning(["id", "balance", "last_name"]).execute(),
  );
  await s(
    "update result",
    () =>
      db.updateTable("pet").set((eb) => ({ name: eb.fn("upper", ["name"]) }))
        .where("species", "=", "dog").executeTakeFirst(),
  );
  await s("update from", () =>
    db.updateTable("toy").from("pet").set({ price: "19.99" })
      .whereRef("toy.pet_id", "=", "pet.id").where("pet.species", "=", "cat")
      .returning(["toy.id", "toy.price"]).execute());

  await s("inner join", () =>
    db.selectFrom("person").innerJoin("pet", "pet.owner_id", "person.id")
      .select(["person.first_name", "pet.name as pet"]).orderBy("pet.id").execute());
  await s(
    "left join with aggregate",
    () =>
      db.selectFrom("person").leftJoin("pet", "pet.owner_id", "person.id")
        .select(["person.id", (eb) => eb.fn.count<string>("pet.id").as("pets")])
        .groupBy("person.id").orderBy("person.id").execute(),
  );
  await s("json helpers", () =>
    db.selectFrom("person").select((eb) => [
      "person.first_name",
      jsonArrayFrom(
        eb.selectFrom("pet").select(["pet.name", "pet.species"]).whereRef(
          "pet.owner_id",
          "=",
          "person.id",
        ).orderBy("pet.id"),
      ).as("pets"),
      jsonObjectFrom(
        eb.selectFrom("pet").select("pet.name").whereRef("pet.owner_id", "=", "person.id")
          .orderBy("pet.id").limit(1),
      ).as("first_pet"),
    ]).orderBy("person.id").execute());

  await s("subqueries", () =>
    db.selectFrom("person").select((eb) => [
      "first_name",
      eb.selectFrom("pet").select(eb.fn.countAll<string>().as("c"))
        .whereRef("pet.owner_id", "=", "person.id").as("pet_count"),
    ]).where((eb) =>
      eb.exists(eb.selectFrom("pet").select("pet.id").whereRef("pet.owner_id", "=", "person.id"))
    ).where("id", "in", db.selectFrom("pet").select("owner_id").where("species", "!=", "cat"))
      .orderBy("first_name").execute());
  await s(
    "cte",
    () =>
      db.with(
        "dog_owners",
        (qb) => qb.selectFrom("pet").select("owner_id").where("species", "=", "dog").distinct(),
      ).selectFrom(
        "person",
      ).innerJoin("dog_owners", "dog_owners.owner_id", "person.id")
        .select("person.first_name").execute(),
  );
  await s(
    "recursive cte",
    () =>
      db.withRecursive("n(v)", (qb) =>
        qb.selectNoFrom(sql<number>`1`.as("v")).unionAll(
          qb.selectFrom("n").select(sql<number>`v + 1`.as("v")).where("v", "<", 5),
        )).selectFrom("n").select((eb) => eb.fn.sum<string>("v").as("total")).execute(),
  );
  await s("aggregates", () =>
    db.selectFrom("pet").select((eb) => [
      "species",
      eb.fn.countAll<string>().as("n"),
      eb.fn.max("name").as("last"),
      sql<string>`string_agg(name, ',' order by name)`.as("names"),
    ]).groupBy("species").having((eb) => eb.fn.countAll(), ">=", 1).orderBy("species").execute());
  await s("numeric aggregates", () =>
    db.selectFrom("toy").select((eb) => [
      eb.fn.sum<string>("price").as("sum"),
      eb.fn.avg<string>("price").as("avg"),
      eb.fn.min("price").as("min"),
    ]).execute());
  await s("set operations", () =>
    db.selectFrom("person").select("first_name as name").union(
      db.selectFrom("pet").select("name"),
    ).orderBy("name").execute());
  await s("view", () => db.selectFrom("dogs" as "pet").selectAll().orderBy("id").execute());
  await s(
    "raw sql with parameters",
    () =>
      sql<{ a: number; b: string; c: boolean; d: string }>`select ${1}::int as a, ${"x"}::text as b,
      ${true} as c, ${sql.lit("lit")} as d, ${sql.ref("person.first_name")} as e
      from person where id = ${1}`.execute(db),
  );
  await s(
    "raw sql result of update",
    () => sql`update counter set n = n + 1 where name = ${"a"}`.execute(db),
  );
  await s(
    "executeQuery compiled",
    () => db.executeQuery(CompiledQuery.raw("select $1::int + 1 as two", [1])),
  );
  await s(
    "types roundtrip",
    () =>
      sql`select ${new Date("2020-01-02T03:04:05.678Z")}::timestamptz as ts,
      '2020-01-02'::date as d, 12345678901234::int8 as big, 1.5::float8 as f,
      '1.10'::numeric as num, array[1, 2]::int4[] as ints, '{"a": [1, null]}'::jsonb as j,
      null::text as nothing, '\\x00ff'::bytea as bytes, ${[1, 2, 3]}::int[] as param_ints`
        .execute(db),
  );
  await s("camel case plugin", () =>
    db.withPlugin(new CamelCasePlugin()).selectFrom("person")
      .select(["first_name", "last_name"]).orderBy("id").limit(1).execute());

  await s("transaction commit", async () => {
    const r = await db.transaction().execute(async (trx) => {
      const p = await trx.insertInto("person").values({ first_name: "Tx", gender: "other" })
        .returning("id").executeTakeFirstOrThrow();
      await trx.insertInto("audit").values({ note: `person ${p.id}` }).execute();
      return p.id;
    });
    return [r, await db.selectFrom("audit").select("note").execute()];
  });
  await s("transaction rollback", async () => {
    const err = await db.transaction().execute(async (trx) => {
      await trx.insertInto("audit").values({ note: "rolled back" }).execute();
      throw new Error("boom");
    }).catch((e) => e);
    return [err, await db.selectFrom("audit").select("note").orderBy("id").execute()];
  });
  await s("transaction failing statement", async () => {
    const err = await db.transaction().execute(async (trx) => {
      await trx.insertInto("audit").values({ note: "before dup" }).execute();
      await trx.insertInto("pet").values({ owner_id: 1, name: "Catto", species: "cat" }).execute();
    }).catch((e) => e);
    return [err, await db.selectFrom("audit").select("note").orderBy("id").execute()];
  });
  await s("isolation level and access mode", async () => {
    const levels = [];
    for (const level of ["serializable", "repeatable read", "read committed"] as const) {
      levels.push(
        await db.transaction().setIsolationLevel(level).execute((trx) =>
          sql<{ l: string }>`select current_setting('transaction_isolation') as l`.execute(trx)
        ),
      );
    }
    const readOnly = await db.transaction().setAccessMode("read only").execute((trx) =>
      trx.insertInto("audit").values({ note: "read only" }).execute()
    ).catch((e) => e);
    return [levels, readOnly];
  });
  await s("controlled transaction with savepoints", async () => {
    const trx = await db.startTransaction().execute();
    await trx.insertInto("audit").values({ note: "ctl 1" }).execute();
    const sp = await trx.savepoint("sp1").execute();
    await sp.insertInto("audit").values({ note: "ctl undone" }).execute();
    const back = await sp.rollbackToSavepoint("sp1").execute();
    const sp2 = await back.savepoint("sp2").execute();
    await sp2.insertInto("audit").values({ note: "ctl 2" }).execute();
    const done = await sp2.releaseSavepoint("sp2").execute();
    await done.commit().execute();
    const rolled = await db.startTransaction().execute();
    await rolled.insertInto("audit").values({ note: "never" }).execute();
    await rolled.rollback().execute();
    return [
      trx.isCommitted,
      rolled.isRolledBack,
      await db.selectFrom("audit").select("note").orderBy("id").execute(),
    ];
  });
  await s(
    "nested transaction inside connection",
    () =>
      db.connection().execute((conn) =>
        conn.transaction().execute((trx) =>
          trx.insertInto("audit").values({ note: "via connection" }).returning("note").execute()
        )
      ),
  );

  await s("connection keeps one session", () =>
    db.connection().execute(async (conn) => {
      await sql`select set_config('app.who', 'ada', false)`.execute(conn);
      await sql`create temp table scratch (v int)`.execute(conn);
      await sql`insert into scratch values (1), (2)`.execute(conn);
      const a = await sql<{ u: string }>`select current_setting('app.who') as u`.execute(conn);
      const b = await sql<{ n: string }>`select count(*) as n from scratch`.execute(conn);
      await sql`drop table scratch`.execute(conn);
      await sql`reset app.who`.execute(conn);
      return [a.rows, b.rows];
    }));

  await s("stream", async () => {
    const rows = [];
    for await (const row of db.selectFrom("pet").select(["id", "name"]).orderBy("id").stream(2)) {
      rows.push(row);
    }
    const early = [];
    for await (const row of db.selectFrom("audit").select("note").orderBy("id").stream(1)) {
      early.push(row);
      if (early.length === 2) break;
    }
    return [rows, early, await db.selectFrom("counter").select("name").orderBy("name").execute()];
  });
  await s("stream in transaction", () =>
    db.transaction().execute(async (trx) => {
      const rows = [];
      for await (const r of trx.selectFrom("toy").select("name").orderBy("id").stream(3)) {
        rows.push(r);
      }
      return rows;
    }));

  await s("introspection", async () => {
    const tables = (await db.introspection.getTables()).filter((t) => t.schema === schema);
    tables.sort((a, b) => a.name.localeCompare(b.name));
    const schemas = (await db.introspection.getSchemas()).map((x) => x.name)
      .filter((n) => n === schema);
    return [tables, schemas];
  });

  const migrations: Record<string, Migration> = {
    "001_books": {
      async up(m) {
        await m.schema.createTable("book").addColumn("id", "serial", (c) => c.primaryKey())
          .addColumn("title", "text").execute();
      },
      async down(m) {
        await m.schema.dropTable("book").execute();
      },
    },
    "002_book_year": {
      async up(m) {
        await m.schema.alterTable("book").addColumn("year", "integer").execute();
        await sql`insert into book (title, year) values ('Dune', 1965)`.execute(m);
      },
      async down(m) {
        await m.schema.alterTable("book").dropColumn("year").execute();
      },
    },
  };
  const provider = { getMigrations: () => Promise.resolve(migrations) };
  await s("migrator", async () => {
    const migrator = new Migrator({ db, provider });
    const up = await migrator.migrateToLatest();
    const book = await sql`select title, year from book`.execute(db);
    const down = await migrator.migrateDown();
    const list = (await migrator.getMigrations()).map((m) => [m.name, m.executedAt !== undefined]);
    const again = await migrator.migrateToLatest();
    return [up, book.rows, down, list, again];
  });
  await s("migrator without transactions", async () => {
    const migrator = new Migrator({
      db,
      provider,
      migrationTableName: "plain_migration",
      migrationLockTableName: "plain_migration_lock",
      disableTransactions: true,
    });
    await sql`drop table book`.execute(db);
    return [await migrator.migrateToLatest(), await migrator.migrateTo("001_books")];
  });
  await s("failed migration", async () => {
    const migrator = new Migrator({
      db,
      provider: {
        getMigrations: () =>
          Promise.resolve({
            ...migrations,
            "003_broken": {
              async up(m) {
                await m.schema.createTable("half").addColumn("id", "integer").execute();
                await sql`select * from no_such_table`.execute(m);
              },
            },
          }),
      },
    });
    const r = await migrator.migrateToLatest();
    const half = await sql`select to_regclass('half')::text as t`.execute(db);
    return [r, half.rows];
  });

  await s("file migration provider", async () => {
    const folder = await Deno.makeTempDir({ prefix: "kysely_migrations_" });
    try {
      await Deno.writeTextFile(
        path.join(folder, "2024_01_shelf.ts"),
        `export async function up(db: any) {
  await db.schema.createTable("shelf").addColumn("id", "serial", (c: any) => c.primaryKey())
    .addColumn("label", "text").execute();
  await db.insertInto("shelf").values([{ label: "a" }, { label: "b" }]).execute();
}
export async function down(db: any) {
  await db.schema.dropTable("shelf").execute();
}
`,
      );
      const migrator = new Migrator({
        db,
        provider: new FileMigrationProvider({ fs, path, migrationFolder: folder }),
        migrationTableName: "file_migration",
        migrationLockTableName: "file_migration_lock",
      });
      const up = await migrator.migrateToLatest();
      const shelf = await sql`select label from shelf order by id`.execute(db);
      const down = await migrator.migrateDown();
      return [up, shelf.rows, down];
    } finally {
      await Deno.remove(folder, { recursive: true });
    }
  });

  await s(
    "unique violation",
    () => db.insertInto("pet").values({ owner_id: 1, name: "Catto", species: "cat" }).execute(),
  );
  await s(
    "check violation",
    () => db.insertInto("toy").values({ pet_id: 1, name: "bad", price: "-1" }).execute(),
  );
  await s(
    "foreign key violation",
    () => db.insertInto("pet").values({ owner_id: 999, name: "Ghost", species: "cat" }).execute(),
  );
  await s("syntax error", () => sql`selec 1`.execute(db));
  await s(
    "still usable after errors",
    () => db.selectFrom("pet").select((eb) => eb.fn.countAll<string>().as("n")).execute(),
  );

  await s(
    "delete returning",
    () => db.deleteFrom("pet").where("species", "=", "hamster").returning(["id", "name"]).execute(),
  );
  await s(
    "delete result",
    () => db.deleteFrom("person").where("first_name", "=", "Arnold").executeTakeFirst(),
  );
  await s("cascade left", () => db.selectFrom("pet").select("name").orderBy("id").execute());
  if (version >= 150000) { // MERGE is PostgreSQL 15's
    await s(
      "merge",
      () =>
        db.mergeInto("counter as c").using("person as p", "c.name", "p.first_name")
          .whenMatched().thenUpdateSet({ n: 100 })
          .whenNotMatched().thenInsertValues((eb) => ({ name: eb.ref("p.first_name"), n: 1 }))
          .executeTakeFirst(),
    );
  }
  await s("schema teardown", async () => {
    await db.schema.dropView("dogs").execute();
    await db.schema.dropTable("toy").execute();
    await db.schema.dropTable("pet").cascade().execute();
    await db.schema.dropIndex("pet_species").ifExists().execute();
    return "ok";
  });
  return out;
}

Deno.test("one Kysely program gives the same results over postgres.js, kysely-postgres-js on pgpipe, and PgpipeDialect", async () => {
  let version: number;
  {
    await using admin = postgres(url, { max: 1, ...quiet });
    version = await serverVersion(admin);
  }
  const transcripts: Record<string, unknown>[] = [];
  for (const [i, stack] of stacks.entries()) {
    const schema = `kysely_conf_${i}`;
    transcripts.push(
      await inSchema(schema, async () => {
        const db = stack.make(schema);
        try {
          return await program(db, schema, version);
        } finally {
          await db.destroy();
        }
      }),
    );
  }
  const [reference, ...others] = transcripts;
  // The program must have done real work on the reference stack: only the error steps threw.
  const throwing = ["unique violation", "check violation", "foreign key violation", "syntax error"];
  for (const [name, value] of Object.entries(reference)) {
    const threw = typeof value === "object" && value !== null && "threw" in value;
    assert.equal(threw, throwing.includes(name), `${name}: ${JSON.stringify(value)}`);
  }
  for (const [i, t] of others.entries()) {
    for (const name of Object.keys(reference)) {
      assert.deepStrictEqual(t[name], reference[name], `${stacks[i + 1].name}: step "${name}"`);
    }
    assert.deepStrictEqual(Object.keys(t), Object.keys(reference));
  }
});

Deno.test("the Kysely program over PgpipeDialect on postgres(pglite()), PostgreSQL in this process, gives postgres.js's results on the server", async () => {
  let version: number;
  {
    await using admin = postgres(url, { max: 1, ...quiet });
    version = await serverVersion(admin); // both runs take the server's branches
  }
  const schema = "kysely_pglite";
  const reference = await inSchema(schema, async () => {
    const db = stacks[0].make(schema);
    try {
      return await program(db, schema, version);
    } finally {
      await db.destroy();
    }
  });
  const sql = postgres(pglite(undefined, { ...quiet, connection: { search_path: schema } }));
  await sql.unsafe(`create schema ${schema}`);
  const db = new Kysely<Database>({ dialect: new PgpipeDialect({ postgres: sql }) });
  let actual: Record<string, unknown>;
  try {
    actual = await program(db, schema, version);
  } finally {
    await db.destroy();
  }
  for (const name of Object.keys(reference)) {
    assert.deepStrictEqual(actual[name], reference[name], `on PGlite: step "${name}"`);
  }
  assert.deepStrictEqual(Object.keys(actual), Object.keys(reference));
});

/** A PgpipeDialect Kysely over a new pgpipe client of `max` connections. */
function pgpipeDb<DB = Database>(max: number): Kysely<DB> {
  return new Kysely<DB>({
    dialect: new PgpipeDialect({ postgres: postgres(url, { max, ...quiet }) }),
  });
}

/** Sync messages among what the driver wrote through the tap proxy: one per query. */
function syncs(types: string[]): number {
  return types.filter((t) => t === "S").length;
}

Deno.test("PgpipeDialect: concurrent queries outside a transaction are all on the wire of one connection before any answer", async () => {
  await using proxy = tapProxy(url); // a pgpipe client of max 1 through a proxy that can hold answers
  const db = new Kysely<Database>({ dialect: new PgpipeDialect({ postgres: proxy.sql }) });
  await sql`select 1`.execute(db); // connected
  let open!: () => void;
  proxy.state.gate = new Promise<void>((resolve) => open = resolve);
  proxy.state.recording = true;
  const queries = Array.from(
    { length: 20 },
    (_, i) => sql<{ i: number }>`select ${i}::int as i`.execute(db),
  );
  try {
    // No answer can arrive while the gate is shut: every query was written without waiting.
    await until("all 20 queries written under the gate", () => syncs(proxy.types()) >= 20);
  } finally {
    proxy.state.gate = null;
    open();
  }
  const rows = await Promise.all(queries);
  assert.deepEqual(rows.map((r) => r.rows[0].i), Array.from({ length: 20 }, (_, i) => i));
});

Deno.test("kysely-postgres-js on pgpipe reserves per query: the second query waits for the first's answer", async () => {
  // The contrast that motivates PgpipeDialect, on the same client through the same proxy.
  await using proxy = tapProxy(url);
  // The client as the dialect sees it, keeping the reservations it asks for.
  const reservations: Promise<unknown>[] = [];
  const client = Object.assign((...args: unknown[]) => (proxy.sql as any)(...args), {
    reserve: () => {
      const reserved = proxy.sql.reserve();
      reservations.push(reserved);
      return reserved;
    },
    end: () => proxy.sql.end(),
  });
  const db = new Kysely<Database>({
    // deno-lint-ignore no-explicit-any
    dialect: new PostgresJSDialect({ postgres: client as any }),
  });
  await sql`select 1`.execute(db);
  reservations.length = 0;
  let open!: () => void;
  proxy.state.gate = new Promise<void>((resolve) => open = resolve);
  proxy.state.recording = true;
  const queries = [1, 2].map((i) => sql<{ i: number }>`select ${i}::int as i`.execute(db));
  try {
    await until("the first query written", () => syncs(proxy.types()) >= 1);
    await until("the second query's reserve()", () => reservations.length === 2);
    // The second query asked for its connection, and the pool keeps it waiting: the reserved
    // one is released only after an answer, and none can pass the gate.
    assert.equal(await settledYet(reservations[1]), false, "the second reservation waits");
    assert.equal(syncs(proxy.types()), 1, "the second query was not written under the gate");
  } finally {
    proxy.state.gate = null;
    open();
  }
  assert.deepEqual((await Promise.all(queries)).map((r) => r.rows[0].i), [1, 2]);
  assert.equal(syncs(proxy.types()), 2, "then it was");
});

Deno.test("PgpipeDialect: a transaction's statements share one backend and no other query enters it", async () => {
  const db = pgpipeDb(2);
  try {
    await db.schema.createTable("kysely_tx_probe").ifNotExists()
      .addColumn("id", "integer").execute();
    await sql`truncate kysely_tx_probe`.execute(db);
    const outside: Promise<{ n: string }[]>[] = [];
    const pids = await db.transaction().execute(async (trx) => {
      const seen: number[] = [];
      const pid = async () =>
        seen.push(
          (await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(trx)).rows[0].pid,
        );
      await pid();
      await sql`insert into kysely_tx_probe values (1)`.execute(trx);
      // Issued while the row is uncommitted: a query that ran inside the transaction would see it.
      for (let i = 0; i < 30; i++) {
        outside.push(
          sql<{ n: string }>`select count(*) as n from kysely_tx_probe`.execute(db).then((r) =>
            r.rows
          ),
        );
      }
      await pid();
      await Promise.all(outside);
      await pid();
      return seen;
    });
    assert.equal(new Set(pids).size, 1, `pids ${pids}`);
    for (const rows of await Promise.all(outside)) assert.deepEqual(rows, [{ n: "0" }]);
    const after = await sql<{ n: string }>`select count(*) as n from kysely_tx_probe`.execute(db);
    assert.deepEqual(after.rows, [{ n: "1" }]);
    await db.schema.dropTable("kysely_tx_probe").execute();
  } finally {
    await db.destroy();
  }
});

Deno.test("PgpipeDialect: 50 concurrent transactions, half failing, each on one backend", async () => {
  const db = pgpipeDb(4);
  try {
    await db.schema.createTable("kysely_tx_many").ifNotExists()
      .addColumn("id", "integer", (c) => c.primaryKey()).execute();
    await sql`truncate kysely_tx_many`.execute(db);
    const runs = Array.from({ length: 50 }, (_, id) =>
      db.transaction().execute(async (trx) => {
        const a = await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(trx);
        await sql`insert into kysely_tx_many values (${id})`.execute(trx);
        const b = await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(trx);
        if (id % 2 === 1) throw new Error(`fail ${id}`);
        return a.rows[0].pid === b.rows[0].pid;
      }));
    const settled = await Promise.allSettled(runs);
    for (const [id, r] of settled.entries()) {
      if (id % 2 === 1) assert.equal(r.status, "rejected");
      else assert.deepEqual(r, { status: "fulfilled", value: true });
    }
    const ids = await sql<{ id: number }>`select id from kysely_tx_many order by id`.execute(db);
    assert.deepEqual(ids.rows.map((r) => r.id), Array.from({ length: 25 }, (_, i) => i * 2));
    await db.schema.dropTable("kysely_tx_many").execute();
  } finally {
    await db.destroy();
  }
});

Deno.test("PgpipeDialect: db.connection() keeps one session, and queries outside do not enter it", async () => {
  const db = pgpipeDb(2);
  try {
    const outside: Promise<unknown>[] = [];
    const inside = await db.connection().execute(async (conn) => {
      const pid1 = await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(conn);
      await sql`select set_config('app.who', 'conn', false)`.execute(conn);
      const lock = await sql<{ got: boolean }>`select pg_try_advisory_lock(4242) as got`
        .execute(conn);
      for (let i = 0; i < 20; i++) {
        // Plain queries: they go to the pool, on the other connection.
        outside.push(
          sql<{ who: string | null }>`select current_setting('app.who', true) as who`.execute(db)
            .then((r) => r.rows[0].who),
        );
      }
      // Needs a session: reserves the other connection, where the lock is someone else's.
      outside.push(
        sql<{ got: boolean }>`select pg_try_advisory_lock(4242) as got`.execute(db).then((r) =>
          r.rows[0].got
        ),
      );
      await Promise.all(outside);
      await sql`create temp table kysely_scratch as select 7 as v`.execute(conn);
      const v = await sql<{ v: number }>`select v from kysely_scratch`.execute(conn);
      const who = await sql<{ who: string }>`select current_setting('app.who') as who`.execute(
        conn,
      );
      const pid2 = await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(conn);
      await sql`select pg_advisory_unlock(4242)`.execute(conn);
      await sql`reset app.who`.execute(conn);
      await sql`drop table kysely_scratch`.execute(conn);
      return [
        lock.rows[0].got,
        v.rows[0].v,
        who.rows[0].who,
        pid1.rows[0].pid === pid2.rows[0].pid,
      ];
    });
    assert.deepEqual(inside, [true, 7, "conn", true]);
    const seen = await Promise.all(outside);
    assert.equal(seen.length, 21);
    for (const who of seen.slice(0, 20)) assert.ok(who === null || who === "", `saw ${who}`);
    assert.equal(seen[20], false);
  } finally {
    await db.destroy();
  }
});

Deno.test("PgpipeDialect: a connection lease runs a lone plain statement on the pool and holds from the second", async () => {
  const driver = new PgpipeDriver({ postgres: postgres(url, { max: 2, ...quiet }) });
  await driver.init();
  try {
    const lease = await driver.acquireConnection() as PgpipeConnection;
    await lease.executeQuery(CompiledQuery.raw("select 1 as one"));
    assert.equal(lease.held, false);
    await lease.executeQuery(CompiledQuery.raw("select set_config('app.who', 'x', false)"));
    assert.equal(lease.held, true);
    const who = await lease.executeQuery<{ who: string }>(
      CompiledQuery.raw("select current_setting('app.who') as who"),
    );
    assert.deepEqual(who.rows, [{ who: "x" }]);
    await lease.executeQuery(CompiledQuery.raw("reset app.who"));
    await driver.releaseConnection(lease);
    await assert.rejects(lease.executeQuery(CompiledQuery.raw("select 1")), /already released/);

    const session = await driver.acquireConnection() as PgpipeConnection;
    await session.executeQuery(CompiledQuery.raw("create temp table t_first (v int)"));
    assert.equal(session.held, true); // a session statement holds from the first
    await driver.releaseConnection(session);
  } finally {
    await driver.destroy();
  }
});

Deno.test("PgpipeDialect: executeQuery's result shape matches Kysely's pg driver", async () => {
  const driver = new PgpipeDriver({ postgres: postgres(url, { max: 1, ...quiet }) });
  await driver.init();
  const lease = await driver.acquireConnection();
  try {
    const q = (text: string, params: unknown[] = []) =>
      lease.executeQuery(CompiledQuery.raw(text, params));
    await q("create temp table shape (id int primary key, v text)");
    assert.deepEqual(await q("insert into shape values (1, 'a'), (2, 'b'), (3, 'c')"), {
      numAffectedRows: 3n,
      rows: [],
    });
    assert.deepEqual(await q("insert into shape values ($1, $2) returning id", [4, "d"]), {
      numAffectedRows: 1n,
      rows: [{ id: 4 }],
    });
    assert.deepEqual(await q("update shape set v = 'z' where id > $1", [2]), {
      numAffectedRows: 2n,
      rows: [],
    });
    assert.deepEqual(await q("select id from shape where id < $1 order by id", [3]), {
      numAffectedRows: undefined,
      rows: [{ id: 1 }, { id: 2 }],
    });
    const version = await q("select current_setting('server_version_num')::int as v");
    if ((version.rows[0] as { v: number }).v >= 150000) { // MERGE is PostgreSQL 15's
      assert.deepEqual(
        await q(
          "merge into shape s using (values (1), (9)) as n(id) on s.id = n.id " +
            "when matched then delete when not matched then insert values (n.id, 'm')",
        ),
        { numAffectedRows: 2n, rows: [] },
      );
    }
    assert.deepEqual(await q("delete from shape"), { numAffectedRows: 4n, rows: [] });
    // Several statements in one text (a migration's): neither rows nor a count, as the pg driver.
    assert.deepEqual(await q("insert into shape values (20, 'x'); select 1 as one"), {
      numAffectedRows: undefined,
      rows: [],
    });
    const ddl = await q("create temp table shape2 (v int)");
    assert.deepEqual(ddl, { numAffectedRows: undefined, rows: [] });
  } finally {
    await driver.releaseConnection(lease);
    await driver.destroy();
  }
});

Deno.test("PgpipeDialect: streamQuery reads through a cursor in the chunks Kysely asks for", async () => {
  const driver = new PgpipeDriver({ postgres: postgres(url, { max: 1, ...quiet }) });
  await driver.init();
  try {
    const chunks: number[][] = [];
    const lease = await driver.acquireConnection();
    const query = CompiledQuery.raw("select generate_series(1, $1::int) as n", [7]);
    for await (const r of lease.streamQuery<{ n: number }>(query, 3)) {
      chunks.push(r.rows.map((row) => row.n));
    }
    await driver.releaseConnection(lease);
    assert.deepEqual(chunks, [[1, 2, 3], [4, 5, 6], [7]]);
    // Stopped early: the cursor is closed and the connection takes the next query.
    const again = await driver.acquireConnection();
    for await (const r of again.streamQuery(query, 2)) {
      assert.equal(r.rows.length, 2);
      break;
    }
    const after = await again.executeQuery(CompiledQuery.raw("select 1 as one"));
    assert.deepEqual(after.rows, [{ one: 1 }]);
    await driver.releaseConnection(again);
    await assert.rejects(
      (async () => {
        for await (const _ of again.streamQuery(query, 0)) { /* never */ }
      })(),
      RangeError,
    );
  } finally {
    await driver.destroy();
  }
});

Deno.test("PgpipeDialect: a commit the server answers with ROLLBACK throws AbortedTransactionError (kysely-postgres-js resolves)", async () => {
  for (const stack of stacks) {
    const db = stack.make("public", 2);
    try {
      await sql`create table if not exists kysely_abort (id int primary key)`.execute(db);
      await sql`truncate kysely_abort`.execute(db);
      const outcome = await db.transaction().execute(async (trx) => {
        await sql`insert into kysely_abort values (1)`.execute(trx);
        // Caught: the callback goes on, but the server has aborted the block.
        await sql`insert into kysely_abort values (1)`.execute(trx).catch(() => {});
        return "callback returned";
      }).then((v) => v, (e) => e);
      const rows = await sql`select * from kysely_abort`.execute(db);
      assert.deepEqual(rows.rows, [], stack.name); // rolled back everywhere
      if (stack.name === "PgpipeDialect") {
        assert.ok(outcome instanceof AbortedTransactionError, String(outcome));
        const trx = await db.startTransaction().execute();
        await sql`select 1/0`.execute(trx).catch(() => {});
        await assert.rejects(trx.commit().execute(), AbortedTransactionError);
        assert.equal(trx.isRolledBack, true);
      } else {
        assert.equal(outcome, "callback returned", stack.name); // silently rolled back
      }
      await sql`drop table kysely_abort`.execute(db);
    } finally {
      await db.destroy();
    }
  }
});

Deno.test("JSON strings: postgres.js stores a JSON string, pgpipe (both dialects) parses the text as Kysely's pg driver does", async () => {
  const typeOf: Record<string, unknown[]> = {};
  for (const [i, stack] of stacks.entries()) {
    const schema = `kysely_json_${i}`;
    typeOf[stack.name] = await inSchema(schema, async () => {
      const db = stack.make(schema, 1);
      try {
        await sql`create table doc (j jsonb)`.execute(db);
        await sql`insert into doc values (${JSON.stringify({ a: 1 })})`.execute(db);
        await sql`insert into doc values (${{ a: 2 }})`.execute(db);
        const bare = await sql`insert into doc values (${"hello"})`.execute(db).then(
          () => "stored",
          (e) => (e as PostgresError).code,
        );
        const r = await sql<{ t: string }>`select jsonb_typeof(j) as t from doc`.execute(db);
        return [...r.rows.map((x) => x.t), bare];
      } finally {
        await db.destroy();
      }
    });
  }
  assert.deepEqual(typeOf, {
    "kysely-postgres-js + postgres.js": ["string", "object", "string", "stored"],
    "kysely-postgres-js + pgpipe": ["object", "object", "22P02"],
    "PgpipeDialect": ["object", "object", "22P02"],
  });
});

Deno.test("PgpipeDialect: server errors reach Kysely as pgpipe's PostgresError, with the caller's frames", async () => {
  const db = pgpipeDb(1);
  try {
    const err = await sql`select 1 from no_such_table_kysely`.execute(db).catch((e) => e);
    assert.ok(err instanceof PostgresError);
    assert.equal(err.code, "42P01");
    assert.match(err.stack ?? "", /orm_kysely_test\.ts/);
    const inTx = await db.transaction().execute((trx) => sql`select 1/0`.execute(trx)).catch((e) =>
      e
    );
    assert.ok(inTx instanceof PostgresError && inTx.code === "22012", String(inTx));
    assert.deepEqual((await sql<{ ok: number }>`select 1 as ok`.execute(db)).rows, [{ ok: 1 }]);
  } finally {
    await db.destroy();
  }
});

Deno.test("PgpipeDialect: db.destroy() ends the client; a factory is called once", async () => {
  let made = 0;
  const client = postgres(url, { max: 1, ...quiet });
  const db = new Kysely<Database>({
    dialect: new PgpipeDialect({ postgres: () => (made++, client) }),
  });
  await Promise.all([sql`select 1`.execute(db), sql`select 2`.execute(db)]);
  assert.equal(made, 1);
  await db.destroy();
  await assert.rejects(
    client`select 1`,
    (e) => (e as { code?: string }).code === "CONNECTION_ENDED",
  );
});

Deno.test("needsSession: session statements and functions count; plain DML and quoted look-alikes do not", () => {
  const yes = [
    "set search_path = x",
    "  SET LOCAL statement_timeout = 1",
    "reset all",
    "begin",
    "start transaction isolation level serializable",
    "select set_config('a.b', 'c', false)",
    "select pg_advisory_lock(1)",
    "select pg_try_advisory_lock($1)",
    "create temp table t (v int)",
    "create temporary table t (v int)",
    "select * into temp t from x",
    "select currval('s')",
    "select lastval()",
    "select nextval('s')",
    "select pg_backend_pid()",
    "listen ch",
    "do $$ begin perform 1; end $$",
    "call proc()",
    "declare c cursor for select 1",
    "prepare p as select 1",
    "discard all",
    "lock table t",
    "/* c */ set x = 1",
    "-- c\nset x = 1",
    "select 1; set x = 2",
  ];
  const no = [
    'select * from "person" where "id" = $1',
    'insert into "pet" ("name") values ($1) on conflict do nothing',
    'update "person" set "name" = $1 where "id" = $2',
    'delete from "person" where "id" = $1',
    'select case when "a" then 1 else 2 end as "x" from "t"',
    'select "temp", "set_config" from "weather"',
    "select 'set x = 1' as s",
    "select $$lastval()$$ as s",
    'with "x" as (select 1) select * from "x"',
    'create table "t" ("id" serial primary key)',
    'alter table "t" add column "start" int',
    'select * from "t" order by "id" fetch first 10 rows only',
    'select "begin", "end" from "ranges"',
  ];
  for (const text of yes) assert.equal(needsSession(text), true, text);
  for (const text of no) assert.equal(needsSession(text), false, text);
});

Deno.test("PgpipeDialect: onReserveConnection sees each lease first; a session statement there holds it", async () => {
  let calls = 0;
  const db = new Kysely<Database>({
    dialect: new PgpipeDialect({
      postgres: postgres(url, { max: 2, ...quiet }),
      onReserveConnection: async (connection) => {
        calls++;
        await connection.executeQuery(
          CompiledQuery.raw("select set_config('app.tenant', 'acme', false)"),
        );
      },
    }),
  });
  try {
    const rows = await Promise.all(
      Array.from(
        { length: 5 },
        () =>
          sql<{ t: string }>`select current_setting('app.tenant') as t`.execute(db).then((r) =>
            r.rows[0].t
          ),
      ),
    );
    assert.deepEqual(rows, ["acme", "acme", "acme", "acme", "acme"]);
    assert.equal(calls, 5);
  } finally {
    await db.destroy();
  }
});

/** A client of two open, idle connections (the pool hands a lone query to the first). */
async function twoConnections(): Promise<ReturnType<typeof postgres>> {
  const client = postgres(url, { max: 2, ...quiet });
  const first = await client.reserve();
  const second = await client.reserve(); // the first is taken: a second connection opens
  first.release();
  second.release();
  return client;
}

Deno.test("PgpipeDialect: db.connection() holds the connection its first statement ran on: an insert's serial is there for lastval()", async () => {
  const client = await twoConnections();
  const db = new Kysely<Database>({ dialect: new PgpipeDialect({ postgres: client }) });
  try {
    await sql`create table kysely_pin (id serial primary key, v int)`.execute(db);
    const [inserted, last] = await db.connection().execute(async (conn) => {
      // The first statement needs no session as far as its text shows: it runs on the pool.
      const ins = await sql<{ id: number }>`insert into kysely_pin (v) values (1) returning id`
        .execute(conn);
      // A lone query keeps that connection busy, so the other one looks freer now.
      const busy = client`select pg_sleep(0.1)`.execute();
      const read = await sql<{ id: string }>`select lastval() as id`.execute(conn);
      await busy;
      return [ins.rows[0].id, Number(read.rows[0].id)];
    });
    assert.equal(last, inserted, "lastval() ran in the insert's session");
    // Sent together: the second statement waits for the first, then holds its connection.
    const [a, b] = await db.connection().execute((conn) =>
      Promise.all([
        sql<{ id: number }>`insert into kysely_pin (v) values (2) returning id`.execute(conn),
        sql<{ id: string }>`select lastval() as id`.execute(conn),
      ])
    );
    assert.equal(Number(b.rows[0].id), a.rows[0].id);
    await sql`drop table kysely_pin`.execute(db);
  } finally {
    await db.destroy();
  }
});

Deno.test("PgpipeDialect: db.connection() holds another connection when its first statement's is taken", async () => {
  const client = await twoConnections();
  const db = new Kysely<Database>({ dialect: new PgpipeDialect({ postgres: client }) });
  try {
    const [mine, theirs] = await db.connection().execute(async (conn) => {
      await sql`select 1`.execute(conn); // on the pool's first connection
      const tx = await client.begin(); // which a transaction now takes (it is the first idle one)
      try {
        const [{ pid: taken }] = await tx`select pg_backend_pid() as pid`;
        const r = await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(conn);
        return [r.rows[0].pid, taken];
      } finally {
        await tx.commit();
      }
    });
    assert.notEqual(mine, theirs, "never the connection another caller holds");
  } finally {
    await db.destroy();
  }
});

Deno.test("PgpipeDialect: a `postgres` that is not a client (or a function returning one) is a TypeError saying so", async () => {
  for (const given of [undefined, "postgres://x", () => ({ not: "a client" })]) {
    const db = new Kysely<Database>({
      dialect: new PgpipeDialect({ postgres: given as unknown as ReturnType<typeof postgres> }),
    });
    await assert.rejects(
      sql`select 1`.execute(db),
      (e) => e instanceof TypeError && /must be a pgpipe client/.test(e.message),
      String(given),
    );
    await db.destroy();
  }
});
