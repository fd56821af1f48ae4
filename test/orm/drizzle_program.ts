// deno-lint-ignore-file no-import-prefix -- npm packages are test-only imports, pinned here
// One Drizzle ORM program, written as for postgres.js, that test/orm_drizzle_test.ts runs over
// postgres.js and over pgpipe, through Drizzle's postgres-js driver and through pgpipe's
// (`@pgpipe/pgpipe/drizzle`): every step's outcome (what Drizzle returned, or the error that
// reached the program) is recorded so the runs can be compared step by step. It covers
// drizzle-orm/postgres-js 0.45's surface: the migrator, the query builder, the relational query
// API, transactions and savepoints, prepared statements, raw SQL, views, enums, every column type
// and mode, and errors. It imports neither driver itself (the caller hands it one), so a run
// through pgpipe's needs no postgres.js (test/orm/drizzle_subpath_run.ts).
import { Buffer } from "node:buffer";
import { fileURLToPath } from "node:url";
import {
  aliasedTable,
  and,
  arrayContained,
  arrayContains,
  arrayOverlaps,
  asc,
  avg,
  between,
  count,
  countDistinct,
  desc,
  eq,
  exists,
  getTableColumns,
  gt,
  gte,
  ilike,
  inArray,
  isNotNull,
  isNull,
  like,
  lt,
  max,
  min,
  ne,
  not,
  notInArray,
  or,
  sql,
  sum,
} from "npm:drizzle-orm@0.45.4";
import {
  alias,
  except,
  exceptAll,
  intersect,
  intersectAll,
  type PgSelect,
  union,
  unionAll,
} from "npm:drizzle-orm@0.45.4/pg-core";
import type { PostgresJsDatabase } from "../../drizzle.ts";
import * as schema from "./drizzle_schema.ts";

const { activeUsers, comments, everything, mood, postCounts, posts, users, SCHEMA } = schema;

/** The database the program works with. */
type Db = PostgresJsDatabase<typeof schema>;

/**
 * The driver a run goes through: `drizzle` and `migrate` of `drizzle-orm/postgres-js` (and its
 * migrator), or of `@pgpipe/pgpipe/drizzle` (and its migrator).
 */
export interface DrizzleDriver {
  drizzle(
    ...params: [client: any, config: { schema: typeof schema }] | [
      config: { client: any; schema: typeof schema },
    ]
  ): Db;
  migrate(db: Db, config: { migrationsFolder: string; migrationsSchema?: string }): Promise<void>;
}

/** The migrations of test/fixtures/drizzle/. */
export const MIGRATIONS = fileURLToPath(new URL("../fixtures/drizzle", import.meta.url));

/** What one step gave: its value, or the error that reached the program. */
export type Outcome = { ok: unknown } | { error: Record<string, unknown> };

/** The fields of a server error a program may read (postgres.js's names). */
const ERROR_FIELDS = [
  "name",
  "message",
  "severity",
  "severity_local",
  "code",
  "detail",
  "hint",
  "position",
  "internal_position",
  "internal_query",
  "where",
  "schema_name",
  "table_name",
  "column_name",
  "data_type",
  "constraint_name",
  "file",
  "routine",
  "query",
];

/** An error as the program sees it: Drizzle's wrapper and the driver's error under it. */
function describeError(e: unknown): Record<string, unknown> {
  if (!(e instanceof Error)) return { thrown: String(e) };
  const out: Record<string, unknown> = { class: e.constructor.name, message: e.message };
  const cause = (e as { cause?: unknown }).cause;
  if (cause instanceof Error) {
    const fields: Record<string, unknown> = { class: cause.constructor.name };
    for (const f of ERROR_FIELDS) fields[f] = (cause as unknown as Record<string, unknown>)[f];
    out.cause = fields;
  }
  return out;
}

/** A driver result (postgres.js's RowList, pgpipe's Result) as plain data. */
function plain(result: unknown): unknown {
  if (!Array.isArray(result)) return result;
  const r = result as unknown[] & {
    count?: unknown;
    command?: unknown;
    columns?: { name: string; type: number; table: number; number: number }[];
  };
  return {
    rows: r.map((row) => Array.isArray(row) ? [...row] : { ...(row as object) }),
    count: r.count,
    command: r.command,
    columns: r.columns?.map((c) => ({
      name: c.name,
      // A user-defined type's OID is new in each run (the schema is made again).
      type: c.type >= 16384 ? "user-defined" : c.type,
      table: c.table === 0 ? 0 : "table",
      number: c.number,
    })),
  };
}

const ada = {
  name: "Ada",
  email: "ada@example.com",
  age: 36,
  mood: "happy" as const,
  createdAt: new Date("2024-01-02T03:04:05.123Z"),
  seenAt: "2024-01-02 03:04:05.123456+00",
  born: new Date("1815-12-10"),
  bornText: "1815-12-10",
  meta: { tags: ["math", "engines"], level: 3 },
  settings: { theme: "dark", nested: { on: true, list: [1, 2.5, null] } },
  tags: ["a", "b c", 'q"uote', "comma,", "{brace}", "NULL", "back\\slash", ""],
  score: "1234.5678",
  visits: 42,
  balance: 9007199254740993n,
  uid: "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
};

const grace = {
  name: "Grace",
  email: "grace@example.com",
  age: 85,
  mood: "ok" as const,
  createdAt: new Date("1906-12-09T12:00:00.000Z"),
  seenAt: "2023-06-30 23:59:59.999999+00",
  born: new Date("1906-12-09"),
  bornText: "1906-12-09",
  meta: "just a string",
  settings: {},
  tags: ["cobol"],
  score: "-0.0001",
  visits: 0,
  balance: -5n,
  uid: "b0eebc99-9c0b-4ef8-bb6d-6bb9bd380a12",
};

const linus = {
  name: "Linus",
  email: "linus@example.com",
  age: null,
  active: false,
  mood: "sad" as const,
  createdAt: new Date("1991-08-25T20:57:08.000Z"),
  seenAt: null,
  born: null,
  bornText: null,
  meta: [1, 2, 3],
  settings: null,
  tags: [],
  score: null,
  visits: null,
  balance: null,
  uid: "c0eebc99-9c0b-4ef8-bb6d-6bb9bd380a13",
};

/** A row with a value in every column of `everything`. */
const full = {
  small: -32768,
  int: 2147483647,
  big53: 9007199254740991,
  big64: 9223372036854775807n,
  real: 1.5,
  double: 3.141592653589793,
  numeric: "12345678901234567890.123456789",
  numericNumber: 1.25,
  numericBigint: 123456789012345678901234567890n,
  bool: false,
  text: "héllo ☃ 'single' \"double\" \\ back\nnew line",
  textEnum: "a" as const,
  varchar: "varchar",
  char: "ab",
  json: { a: [1, "x", null], b: { c: true }, s: "text" },
  jsonb: { z: 1, a: [1.5e300, "ü"], nested: { deep: [{}] } },
  uuid: "d0eebc99-9c0b-4ef8-bb6d-6bb9bd380a14",
  date: new Date("2024-02-29"),
  dateString: "2024-02-29",
  time: "13:14:15.123456",
  timeTz: "13:14:15+02",
  timestamp: new Date("2024-01-02T03:04:05.123Z"),
  timestampString: "2024-01-02 03:04:05.123456",
  timestampTz: new Date("2024-01-02T03:04:05.123Z"),
  timestampTzString: "2024-01-02 03:04:05.123456+05:30",
  interval: "1 year 2 mons 3 days 04:05:06.789",
  intervalDay: "3 days 04:05:06.789",
  point: [1.5, -2] as [number, number],
  pointXy: { x: 3, y: 4 },
  line: [1, -1, 0] as [number, number, number],
  lineAbc: { a: 2, b: 3, c: 4 },
  inet: "192.168.0.1/24",
  cidr: "10.0.0.0/8",
  macaddr: "08:00:2b:01:02:03",
  macaddr8: "08:00:2b:01:02:03:04:05",
  bit: "1010",
  bytes: Buffer.from([0, 1, 2, 127, 128, 255]),
  price: 123456,
  mood: "sad" as const,
  moods: ["sad", "happy"] as ("sad" | "ok" | "happy")[],
  texts: ["a", "", "with space", "NULL", 'q"uote', "back\\slash", "{}", "ü"],
  ints: [1, 2, 3],
  matrix: [[1, 2], [3, 4]],
  bools: [true, false],
  numerics: ["1.10", "-2.5", "NaN"],
  dates: [new Date("2024-01-01"), new Date("2024-12-31")],
  dateStrings: ["2024-01-01", "2024-12-31"],
  timestamps: [new Date("2024-01-02T03:04:05.123Z"), new Date("1999-12-31T23:59:59.999Z")],
  timestampTzStrings: ["2024-01-02 03:04:05.123456+00", "2024-07-01 00:00:00.000001+00"],
  uuids: ["e0eebc99-9c0b-4ef8-bb6d-6bb9bd380a15"],
  jsonbs: [{ a: 1 }, [1, 2], "s", 5],
};

/**
 * Runs the program over `client` (a postgres.js or pgpipe client) through `driver`; step name →
 * outcome.
 */
export async function drizzleProgram(
  client: unknown,
  { drizzle, migrate }: DrizzleDriver,
): Promise<Record<string, Outcome>> {
  const out: Record<string, Outcome> = {};
  const db = drizzle(client, { schema });
  const step = async (name: string, fn: () => Promise<unknown>) => {
    try {
      out[name] = { ok: await fn() };
    } catch (e) {
      out[name] = { error: describeError(e) };
    }
  };

  await db.execute(sql.raw(`drop schema if exists ${SCHEMA} cascade`));

  // --- the migrator -------------------------------------------------------------------------
  const migrations = { migrationsFolder: MIGRATIONS, migrationsSchema: SCHEMA };
  await step("migrate", async () => {
    await migrate(db, migrations);
    await migrate(db, migrations); // applied already: nothing to do
    return plain(
      await db.execute(
        sql`select id, hash, created_at from ${sql.identifier(SCHEMA)}.__drizzle_migrations
          order by id`,
      ),
    );
  });
  await step("migrated objects", async () =>
    plain(
      await db.execute(sql`select table_name, table_type from information_schema.tables
        where table_schema = ${SCHEMA} order by table_name`),
    ));

  // Defaults that differ between runs (now(), gen_random_uuid()) made fixed, so runs compare.
  await db.execute(sql`alter table ${users} alter column created_at
    set default '2020-02-02 02:02:02.020202+00', alter column uid
    set default 'f0eebc99-9c0b-4ef8-bb6d-6bb9bd380a10'`);

  // --- insert -------------------------------------------------------------------------------
  await step("insert returning", () => db.insert(users).values([ada, grace, linus]).returning());
  await step(
    "insert one returning some",
    () =>
      db.insert(users).values({ name: "Tim", email: "tim@example.com", age: 69, uid: null })
        .returning({ id: users.id, name: users.name, mood: users.mood, tags: users.tags }),
  );
  await step(
    "insert on conflict do nothing",
    () => db.insert(users).values({ ...ada, name: "Ada again" }).onConflictDoNothing().returning(),
  );
  await step(
    "insert on conflict do nothing target",
    () =>
      db.insert(users).values({ ...grace, name: "Grace again" })
        .onConflictDoNothing({ target: users.email }).returning({ id: users.id }),
  );
  await step(
    "insert on conflict do update",
    () =>
      db.insert(users).values({ ...grace, age: 86, nickname: "Amazing" })
        .onConflictDoUpdate({
          target: users.email,
          set: { age: sql`excluded.age`, nickname: sql`excluded.nickname` },
          setWhere: sql`${users.age} < excluded.age`,
        }).returning({ id: users.id, age: users.age, nickname: users.nickname }),
  );
  await step("insert posts", () =>
    db.insert(posts).values([
      {
        authorId: 1,
        title: "Notes",
        body: "on the engine",
        publishedAt: "1843-09-01 10:00:00.5",
        views: 10,
      },
      { authorId: 1, title: "Bernoulli", body: null, publishedAt: null, views: 3 },
      {
        authorId: 2,
        title: "COBOL",
        body: "business",
        publishedAt: "1959-05-28 09:30:00.123456",
      },
      { authorId: 4, title: "Web", body: "www", publishedAt: "1989-03-12 00:00:00" },
    ]).returning());
  await step("insert comments", () =>
    db.insert(comments).values([
      { postId: 1, authorId: 2, text: "great", createdAt: new Date("2024-05-01T10:00:00.5Z") },
      { postId: 1, authorId: 3, text: "meh", createdAt: new Date("2024-05-02T11:00:00Z") },
      { postId: 3, authorId: 1, text: "nice", createdAt: new Date("2024-05-03T12:00:00.25Z") },
    ]).returning());
  await step("insert select", () =>
    db.insert(comments).select(
      db.select({
        id: sql<number>`nextval(${`${SCHEMA}.comments_id_seq`}::regclass)`.as("id"),
        postId: posts.id,
        authorId: posts.authorId,
        text: sql<string>`'self: ' || ${posts.title}`.as("text"),
        createdAt: sql<Date>`timestamp '2024-06-01 00:00:00'`.as("created_at"),
      }).from(posts).where(eq(posts.id, 2)),
    ).returning({ id: comments.id, text: comments.text, createdAt: comments.createdAt }));
  await step("insert every type", () => db.insert(everything).values(full).returning());
  await step("insert nulls", () =>
    db.insert(everything).values({}).returning({
      id: everything.id,
      int: everything.int,
      json: everything.json,
      timestampTzString: everything.timestampTzString,
      moods: everything.moods,
      smallSerial: everything.smallSerial,
      bigSerial64: everything.bigSerial64,
    }));
  await step(
    "insert overriding system value",
    () =>
      db.insert(everything).overridingSystemValue().values({ id: 1000, text: "forced" })
        .returning({ id: everything.id, text: everything.text }),
  );
  // One row per insert: PostgreSQL 13 refuses DEFAULT for a GENERATED ALWAYS identity column
  // in a multi-row VALUES.
  await step("insert json strings and scalars", async () => {
    const rows = [
      { json: "a string" as unknown as object, jsonb: "a string" as unknown as object },
      { json: 42 as unknown as object, jsonb: [1, "two", { three: 3 }] },
      { json: null, jsonb: { 'quote"key': "back\\slash", unicode: "☃\u00e9" } },
    ];
    const out = [];
    for (const row of rows) {
      out.push(
        ...await db.insert(everything).values(row).returning({
          json: everything.json,
          jsonb: everything.jsonb,
        }),
      );
    }
    return out;
  });

  // --- select -------------------------------------------------------------------------------
  await step("select all", () => db.select().from(users).orderBy(users.id));
  await step("select every type", () => db.select().from(everything).orderBy(everything.id));
  await step("select fields and expressions", () =>
    db.select({
      id: users.id,
      upper: sql<string>`upper(${users.name})`,
      ageNext: sql<number>`${users.age} + 1`.mapWith(Number),
      isOld: sql<boolean>`${users.age} > 50`,
      nested: { name: users.name, email: users.email },
    }).from(users).orderBy(desc(users.id)));
  await step("select where operators", async () => [
    await db.select({ id: users.id }).from(users).where(
      and(gt(users.age, 30), lt(users.age, 100), ne(users.name, "x")),
    ),
    await db.select({ id: users.id }).from(users).where(
      or(like(users.name, "A%"), ilike(users.email, "%GRACE%")),
    ),
    await db.select({ id: users.id }).from(users).where(inArray(users.id, [1, 3, 99])),
    await db.select({ id: users.id }).from(users).where(notInArray(users.id, [1])),
    await db.select({ id: users.id }).from(users).where(isNull(users.age)),
    await db.select({ id: users.id }).from(users).where(isNotNull(users.score)),
    await db.select({ id: users.id }).from(users).where(between(users.age, 30, 70)),
    await db.select({ id: users.id }).from(users).where(not(eq(users.active, true))),
    await db.select({ id: users.id }).from(users).where(eq(users.mood, "happy")),
    await db.select({ id: users.id }).from(users).where(
      sql`${users.tags} @> array[${"a"}]::text[]`,
    ),
    await db.select({ id: users.id }).from(users).where(
      sql`${users.meta} ->> 'level' = ${"3"}`,
    ),
    await db.select({ id: users.id }).from(users).where(
      gte(users.createdAt, new Date("1950-01-01T00:00:00Z")),
    ),
    await db.select({ id: users.id }).from(users).where(
      eq(users.seenAt, "2024-01-02 03:04:05.123456+00"),
    ),
    await db.select({ id: users.id }).from(users).where(eq(users.balance, 9007199254740993n)),
    await db.select({ id: users.id }).from(users).where(arrayContains(users.tags, ["a", "b c"])),
    await db.select({ id: users.id }).from(users).where(arrayOverlaps(users.tags, ["cobol", "x"])),
    await db.select({ id: users.id }).from(users).where(
      arrayContained(users.tags, [
        "a",
        "b c",
        'q"uote',
        "comma,",
        "{brace}",
        "NULL",
        "back\\slash",
        "",
      ]),
    ).orderBy(users.id),
    await db.select({ id: everything.id }).from(everything).where(eq(everything.price, 123456)),
  ]);
  await step("select order limit offset distinct", async () => [
    await db.select({ name: users.name }).from(users).orderBy(asc(users.age), desc(users.id))
      .limit(2).offset(1),
    await db.selectDistinct({ mood: users.mood }).from(users).orderBy(users.mood),
    await db.selectDistinctOn([posts.authorId], { authorId: posts.authorId, title: posts.title })
      .from(posts).orderBy(posts.authorId, desc(posts.views)),
    await db.select().from(users).orderBy(sql`${users.age} desc nulls last`).limit(1),
  ]);
  await step("joins", async () => {
    const commenter = alias(users, "commenter");
    return [
      await db.select().from(posts).innerJoin(users, eq(posts.authorId, users.id))
        .orderBy(posts.id),
      await db.select({ user: users.name, post: posts.title }).from(users)
        .leftJoin(posts, eq(posts.authorId, users.id)).orderBy(users.id, posts.id),
      await db.select({ post: posts.title, user: users.name }).from(posts)
        .rightJoin(users, eq(posts.authorId, users.id)).orderBy(users.id, posts.id),
      await db.select({ post: posts.title, comment: comments.text }).from(posts)
        .fullJoin(comments, eq(comments.postId, posts.id)).orderBy(posts.id, comments.id),
      await db.select({ post: posts.title, comment: comments.text, by: commenter.name })
        .from(comments).innerJoin(posts, eq(comments.postId, posts.id))
        .innerJoin(commenter, eq(comments.authorId, commenter.id)).orderBy(comments.id),
      await db.select().from(users).crossJoin(posts)
        .where(and(eq(users.id, 1), eq(posts.id, 1))),
    ];
  });
  await step("aliased table", () => {
    const u = aliasedTable(users, "u");
    return db.select({ id: u.id, name: u.name }).from(u).where(eq(u.id, 2));
  });
  await step("subqueries", async () => {
    const counts = db.select({ authorId: posts.authorId, n: count().as("n") }).from(posts)
      .groupBy(posts.authorId).as("counts");
    return [
      await db.select({ name: users.name, n: counts.n }).from(users)
        .leftJoin(counts, eq(users.id, counts.authorId)).orderBy(users.id),
      await db.select({ id: users.id }).from(users).where(
        exists(db.select().from(posts).where(eq(posts.authorId, users.id))),
      ).orderBy(users.id),
      await db.select({ id: users.id }).from(users).where(
        inArray(users.id, db.select({ id: comments.authorId }).from(comments)),
      ).orderBy(users.id),
      await db.select().from(counts).orderBy(counts.authorId),
      await db.select({
        id: users.id,
        latest: sql<string>`(select max(${posts.publishedAt}) from ${posts}
          where ${posts.authorId} = ${users.id})`,
      }).from(users).orderBy(users.id),
    ];
  });
  await step("CTEs", async () => {
    const adults = db.$with("adults").as(
      db.select().from(users).where(gte(users.age, 18)),
    );
    const busy = db.$with("busy").as(
      db.select({ authorId: posts.authorId, total: sum(posts.views).as("total") }).from(posts)
        .groupBy(posts.authorId),
    );
    return [
      await db.with(adults).select({ name: adults.name, age: adults.age }).from(adults)
        .orderBy(adults.id),
      await db.with(adults, busy).select({ name: adults.name, total: busy.total }).from(adults)
        .innerJoin(busy, eq(busy.authorId, adults.id)).orderBy(adults.id),
      await db.with(busy).update(posts).set({ views: sql`${posts.views} + 1` })
        .where(inArray(posts.authorId, db.select({ id: busy.authorId }).from(busy)))
        .returning({ id: posts.id, views: posts.views }),
    ];
  });
  await step("set operations", async () => {
    const a = db.select({ id: users.id }).from(users).where(lt(users.id, 3));
    const b = db.select({ id: users.id }).from(users).where(gt(users.id, 1));
    return [
      await union(a, b).orderBy(sql`1`),
      await unionAll(a, b).orderBy(sql`1`),
      await intersect(a, b),
      await intersectAll(a, b),
      await except(a, b),
      await exceptAll(a, b),
      await db.select({ id: users.id }).from(users).where(eq(users.id, 1))
        .union(db.select({ id: posts.id }).from(posts).where(eq(posts.id, 4))).orderBy(sql`1`),
    ];
  });
  await step("aggregates", async () => [
    await db.select({
      n: count(),
      ages: count(users.age),
      moods: countDistinct(users.mood),
      total: sum(users.age),
      average: avg(users.age),
      youngest: min(users.age),
      oldest: max(users.createdAt),
      firstSeen: min(users.seenAt),
    }).from(users),
    await db.select({ authorId: posts.authorId, views: sum(posts.views).mapWith(Number) })
      .from(posts).groupBy(posts.authorId).having(({ views }) => gt(views, 0))
      .orderBy(posts.authorId),
    await db.$count(users),
    await db.$count(users, eq(users.active, true)),
    await db.select({
      id: users.id,
      posts: db.$count(posts, eq(posts.authorId, users.id)),
    }).from(users).orderBy(users.id),
  ]);
  await step("dynamic query and locking", async () => {
    const withAge = <T extends PgSelect>(q: T, age: number) => q.where(gt(users.age, age));
    const dynamic = await withAge(db.select({ id: users.id }).from(users).$dynamic(), 40);
    const locked = await db.transaction((tx) =>
      tx.select({ id: users.id }).from(users).where(eq(users.id, 1)).for("update", {
        skipLocked: true,
      })
    );
    return [dynamic, locked];
  });
  await step(
    "getTableColumns",
    () =>
      db.select({ ...getTableColumns(posts), author: users.name }).from(posts)
        .innerJoin(users, eq(users.id, posts.authorId)).where(eq(posts.id, 3)),
  );

  // --- the relational query API ---------------------------------------------------------------
  await step("findMany with nested with", () =>
    db.query.users.findMany({
      with: {
        posts: {
          with: { comments: { orderBy: (c, { asc }) => [asc(c.id)] } },
          orderBy: (p, { desc }) => [desc(p.id)],
        },
      },
      orderBy: (u, { asc }) => [asc(u.id)],
    }));
  await step("findMany columns extras where limit offset", () =>
    db.query.users.findMany({
      columns: { id: true, name: true, createdAt: true, seenAt: true, balance: true },
      extras: {
        lower: sql<string>`lower(${users.name})`.as("lower"),
        born: sql<string>`${users.born}`.as("born_raw"),
      },
      where: (u, { gt }) => gt(u.age, 10),
      orderBy: (u, { desc }) => [desc(u.age)],
      limit: 2,
      offset: 0,
      with: {
        posts: {
          columns: { title: true, publishedAt: true },
          where: (p, { gt }) => gt(p.views, 0),
          limit: 1,
        },
        comments: { columns: { text: true, createdAt: true } },
      },
    }));
  await step(
    "findMany excluding columns, through drizzle({ client, schema })",
    () =>
      drizzle({ client, schema }).query.posts.findMany({
        columns: { body: false, publishedAt: false },
        with: { author: { columns: { id: true, tags: true, balance: true } } },
        orderBy: (p, { asc }) => [asc(p.id)],
      }),
  );
  await step("findFirst", async () => [
    await db.query.posts.findFirst({
      where: (p, { eq }) => eq(p.id, 3),
      with: { author: true, comments: { with: { author: { columns: { name: true } } } } },
    }),
    await db.query.users.findFirst({ where: (u, { eq }) => eq(u.id, 999) }),
    await db.query.comments.findFirst({
      with: { post: { with: { author: { columns: { email: true, meta: true } } } } },
      orderBy: (c, { desc }) => [desc(c.createdAt)],
    }),
  ]);

  // --- update and delete ----------------------------------------------------------------------
  await step("update returning", () =>
    db.update(users).set({
      age: sql`${users.age} + 1`,
      nickname: "updated",
      seenAt: "2025-05-05 05:05:05.505505+00",
      meta: { level: 9 },
      tags: ["x", "y"],
    }).where(eq(users.id, 1)).returning());
  await step(
    "update from",
    () =>
      db.update(posts).set({ title: sql`${users.name} || ': ' || ${posts.title}` }).from(users)
        .where(and(eq(posts.authorId, users.id), eq(users.id, 2))).returning({
          id: posts.id,
          title: posts.title,
        }),
  );
  await step(
    "update nothing",
    () => db.update(users).set({ age: 1 }).where(eq(users.id, 999)).returning(),
  );
  await step(
    "delete returning",
    () => db.delete(comments).where(like(comments.text, "self%")).returning(),
  );

  // --- transactions ---------------------------------------------------------------------------
  await step("transaction commit", async () => {
    const result = await db.transaction(async (tx) => {
      const [u] = await tx.insert(users).values({ name: "Tx", email: "tx@example.com" })
        .returning({ id: users.id });
      await tx.insert(posts).values({ authorId: u.id, title: "in tx" });
      return tx.select({ title: posts.title }).from(posts).where(eq(posts.authorId, u.id));
    });
    return [result, await db.$count(users, eq(users.email, "tx@example.com"))];
  });
  await step("transaction rollback()", async () => {
    const e = await db.transaction(async (tx) => {
      await tx.insert(users).values({ name: "Gone", email: "gone@example.com" });
      tx.rollback();
    }).catch((e) => describeError(e));
    return [e, await db.$count(users, eq(users.email, "gone@example.com"))];
  });
  await step("transaction throws", async () => {
    const e = await db.transaction(async (tx) => {
      await tx.insert(users).values({ name: "Boom", email: "boom@example.com" });
      throw new Error("boom");
    }).catch((e) => describeError(e));
    return [e, await db.$count(users, eq(users.email, "boom@example.com"))];
  });
  await step("transaction query error", async () => {
    const e = await db.transaction(async (tx) => {
      await tx.insert(users).values({ name: "Dup", email: "dup@example.com" });
      await tx.insert(users).values({ name: "Dup", email: "dup@example.com" });
    }).catch((e) => describeError(e));
    return [e, await db.$count(users, eq(users.email, "dup@example.com"))];
  });
  await step("nested transactions (savepoints)", async () => {
    await db.transaction(async (tx) => {
      await tx.insert(users).values({ name: "Outer", email: "outer@example.com" });
      await tx.transaction(async (tx2) => {
        await tx2.insert(users).values({ name: "Inner", email: "inner@example.com" });
        tx2.rollback();
      }).catch(() => {});
      await tx.transaction(async (tx2) => {
        await tx2.insert(users).values({ name: "Kept", email: "kept@example.com" });
        await tx2.transaction(async (tx3) => {
          await tx3.update(users).set({ age: 7 }).where(eq(users.email, "kept@example.com"));
        });
      });
      await tx.transaction(async (tx2) => {
        await tx2.insert(users).values({ name: "Failed", email: "failed@example.com" });
        throw new Error("inner failure");
      }).catch(() => {});
    });
    return db.select({ name: users.name, age: users.age }).from(users).where(
      inArray(users.email, [
        "outer@example.com",
        "inner@example.com",
        "kept@example.com",
        "failed@example.com",
      ]),
    ).orderBy(users.id);
  });
  await step("transaction config", () =>
    db.transaction(
      (tx) =>
        tx.execute(sql`select current_setting('transaction_isolation') as isolation,
          current_setting('transaction_read_only') as read_only,
          current_setting('transaction_deferrable') as deferrable`).then(plain),
      { isolationLevel: "serializable", accessMode: "read only", deferrable: true },
    ));
  await step("transaction concurrent queries", () =>
    db.transaction(async (tx) => {
      const rows = await Promise.all(
        Array.from({ length: 10 }, (_, i) =>
          tx.insert(comments).values({
            postId: 1,
            authorId: 1,
            text: `c${i}`,
            createdAt: new Date(Date.UTC(2024, 0, 1, 0, 0, i)),
          }).returning({ text: comments.text })),
      );
      return rows.flat().map((r) => r.text).sort();
    }));

  // --- prepared statements --------------------------------------------------------------------
  await step("prepared concurrently", async () => {
    const byId = db.select().from(users).where(eq(users.id, sql.placeholder("id")))
      .prepare("user_by_id");
    const ids = Array.from({ length: 30 }, (_, i) => (i % 4) + 1);
    return await Promise.all(ids.map((id) => byId.execute({ id })));
  });
  await step("prepared insert, limit and relational", async () => {
    const insert = db.insert(comments).values({
      postId: sql.placeholder("post"),
      authorId: sql.placeholder("author"),
      text: sql.placeholder("text"),
      createdAt: sql.placeholder("at"),
    }).returning({ text: comments.text }).prepare("insert_comment");
    const page = db.select({ id: posts.id }).from(posts).orderBy(posts.id)
      .limit(sql.placeholder("limit")).offset(sql.placeholder("offset")).prepare("page");
    const find = db.query.users.findFirst({
      where: (u, { eq }) => eq(u.email, sql.placeholder("email")),
      with: { posts: true },
    }).prepare("find_user");
    return [
      await Promise.all([
        insert.execute({ post: 1, author: 2, text: "p1", at: new Date("2024-07-01T00:00:00Z") }),
        insert.execute({ post: 3, author: 3, text: "p2", at: new Date("2024-07-02T00:00:00Z") }),
      ]),
      await Promise.all([
        page.execute({ limit: 2, offset: 0 }),
        page.execute({ limit: 2, offset: 2 }),
      ]),
      await find.execute({ email: "grace@example.com" }),
    ];
  });
  await step("prepared every type", async () => {
    const q = db.select().from(everything).where(eq(everything.id, sql.placeholder("id")))
      .prepare("everything_by_id");
    // The first run describes the statement; later runs reuse it (pgpipe: binary columns).
    return [await q.execute({ id: 1 }), await q.execute({ id: 1 }), await q.execute({ id: 1 })];
  });

  // --- raw SQL ------------------------------------------------------------------------------
  await step("execute raw rows", async () =>
    plain(
      await db.execute(sql`select ${users.id}, ${users.createdAt}, ${users.seenAt}, ${users.born},
        ${users.meta}, ${users.settings}, ${users.tags}, ${users.score}, ${users.balance},
        ${users.mood}, ${users.active} from ${users} order by ${users.id}`),
    ));
  await step("execute raw every type", async () => {
    // Not the enum array: whether a connection knows a type created after it opened depends on
    // which connection runs the query, with either driver (fetch_types runs as each one opens).
    const columns = Object.values(getTableColumns(everything)).filter((c) => c.name !== "moods");
    return plain(
      await db.execute(
        sql`select ${
          sql.join(columns.map((c) => sql.identifier(c.name)), sql`, `)
        } from ${everything} where id = 1`,
      ),
    );
  });
  await step("execute raw text of json", async () =>
    plain(
      await db.execute(
        sql`select json::text as json, jsonb::text as jsonb from ${everything} order by id`,
      ),
    ));
  await step("execute with parameters", async () =>
    plain(
      await db.execute(sql`select ${1}::int as one, ${"two"} as two, ${true} as yes,
        ${new Date("2024-01-02T03:04:05.123Z").toISOString()}::timestamptz as at,
        ${10n} + 1 as big, ${null}::text as nothing`),
    ));
  await step("execute raw, identifier, join", async () =>
    plain(
      await db.execute(sql`select ${sql.identifier("name")} from ${sql.raw(`${SCHEMA}.users`)}
        where id in (${sql.join([sql`${1}`, sql`${2}`], sql`, `)}) order by 1`),
    ));
  await step("execute function from a migration", async () =>
    plain(
      await db.execute(sql`select ${sql.identifier(SCHEMA)}.bump_views(${1}, ${5}) as views`),
    ));
  await step("execute utility statements", async () => [
    plain(await db.execute(sql`set local statement_timeout = 1000`)),
    plain(await db.execute(sql`show datestyle`)),
    plain(await db.execute(sql.raw(`select 1 as a; select 2 as b`))),
  ]);

  // --- views, enums -------------------------------------------------------------------------
  await step("view", () => db.select().from(activeUsers).orderBy(activeUsers.id));
  await step("materialized view", async () => {
    await db.refreshMaterializedView(postCounts);
    const first = await db.select().from(postCounts).orderBy(postCounts.authorId);
    await db.refreshMaterializedView(postCounts).withNoData();
    const empty = await db.execute(sql`select ispopulated from pg_matviews
      where matviewname = 'post_counts'`).then(plain);
    await db.refreshMaterializedView(postCounts);
    return [first, empty];
  });
  await step("enum", async () => [
    mood.enumValues,
    await db.select({ mood: users.mood, n: count() }).from(users).groupBy(users.mood)
      .orderBy(users.mood),
    await db.execute(sql`select enum_range(null::${sql.identifier(SCHEMA)}.mood)::text[] as values`)
      .then(plain),
  ]);

  // --- errors -------------------------------------------------------------------------------
  const failure = (p: PromiseLike<unknown>) =>
    Promise.resolve(p).then((v) => ({ unexpected: v }), describeError);
  await step("unique violation", () => failure(db.insert(users).values(ada)));
  await step(
    "not null violation",
    () => failure(db.insert(users).values({ name: null as unknown as string, email: "n@x" })),
  );
  await step(
    "foreign key violation",
    () => failure(db.insert(posts).values({ authorId: 9999, title: "orphan" })),
  );
  await step(
    "check violation",
    () => failure(db.update(posts).set({ views: -1 }).where(eq(posts.id, 1))),
  );
  await step("enum violation", () =>
    failure(db.execute(sql`insert into ${users} (name, email, mood)
      values ('E', 'e@x', ${"angry"})`)));
  await step("syntax error", () => failure(db.execute(sql.raw("selec 1"))));
  await step(
    "division by zero",
    () => failure(db.select({ x: sql`1 / (${users.id} - ${users.id})` }).from(users)),
  );
  await step("bad input syntax", () => failure(db.execute(sql`select ${"abc"}::int`)));
  await step("prepared error", () =>
    failure(
      db.insert(users).values({ name: "P", email: sql.placeholder("email") }).prepare("ins")
        .execute({ email: "ada@example.com" }),
    ));

  // --- many concurrent queries ----------------------------------------------------------------
  await step("50 concurrent selects", () =>
    Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        db.select({ id: users.id, name: users.name, createdAt: users.createdAt }).from(users)
          .where(eq(users.id, (i % 4) + 1))),
    ));
  await step("final state", async () => [
    await db.select().from(users).orderBy(users.id),
    await db.select().from(posts).orderBy(posts.id),
    // Not the ids: concurrent inserts over postgres.js run on several connections, in any order.
    await db.select({ ...getTableColumns(comments), id: sql`0` }).from(comments)
      .orderBy(comments.createdAt, comments.text),
  ]);
  return out;
}
