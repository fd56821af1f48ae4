// deno-lint-ignore-file no-import-prefix -- Drizzle and postgres.js are bench-only imports, pinned
// Suite: PGlite, PostgreSQL inside the process. pgpipe over PGlite (`postgres(pglite(db))`, one
// execProtocolRawStream call per flush) against PGlite's own `query()` (which runs concurrent
// queries one by one) on the same instance, case by case: concurrent selects, concurrent inserts,
// one large typed result, and Drizzle's relational findMany through each (`@pgpipe/pgpipe/drizzle`
// over pgpipe, drizzle-orm/pglite over PGlite). Rounds rotate which side goes first; the medians
// are reported, with how many raw protocol calls each side made for one run of the case. No
// server: the suite ignores the bench's cluster.
import { PGlite } from "@electric-sql/pglite";
import { relations } from "npm:drizzle-orm@0.45.4";
import { integer, pgTable, serial, text } from "npm:drizzle-orm@0.45.4/pg-core";
import { drizzle as drizzleOverPGlite } from "npm:drizzle-orm@0.45.4/pglite";
import postgres from "../../mod.ts";
import { drizzle as drizzleOverPgpipe } from "../../drizzle.ts";
import { pglite } from "../../pglite.ts";
import { isQuick } from "../shared/env.ts";
import { fmt, formatRatio, Report } from "../shared/report.ts";
import { median, rotated } from "../shared/stats.ts";

const rounds = isQuick() ? 5 : 41;
const warmup = isQuick() ? 2 : 20;

const users = pgTable("bench_users", { id: serial("id").primaryKey(), name: text("name") });
const posts = pgTable("bench_posts", {
  id: serial("id").primaryKey(),
  userId: integer("user_id").notNull(),
  title: text("title"),
});
const schema = {
  users,
  posts,
  usersRelations: relations(users, ({ many }) => ({ posts: many(posts) })),
  postsRelations: relations(posts, ({ one }) => ({
    user: one(users, { fields: [posts.userId], references: [users.id] }),
  })),
};

const db = new PGlite();
await db.waitReady;
// Every raw protocol call of either side goes through execProtocolRawSync: count them.
let calls = 0;
const rawSync = db.execProtocolRawSync.bind(db);
db.execProtocolRawSync = (message: Uint8Array) => (calls++, rawSync(message));

await db.exec(`
  create table inserted (id serial primary key, name text not null, n int4 not null);
  create table typed as select i::int4 as id, 'name ' || i as name, i * 1.5::float8 as score,
    (i * 0.01)::numeric(12, 2) as amount, timestamptz '2025-01-01' + i * interval '1 minute' as at,
    i % 2 = 0 as flag from generate_series(1, 10000) i;
  create table bench_users (id serial primary key, name text);
  create table bench_posts (id serial primary key, user_id int4 not null, title text);
  insert into bench_users (name) select 'user ' || i from generate_series(1, 100) i;
  insert into bench_posts (user_id, title)
    select 1 + i % 100, 'post ' || i from generate_series(1, 500) i;
`);

const sql = postgres(pglite(db, { onnotice: () => {} }));
const overPgpipe = drizzleOverPgpipe(sql, { schema });
const overPGlite = drizzleOverPGlite({ client: db, schema });
const findMany = (orm: typeof overPGlite | typeof overPgpipe) =>
  orm.query.users.findMany({ with: { posts: true }, orderBy: (u, { asc }) => asc(u.id) });

/** A case: what each side runs, `repeat` times per round (a sample is their mean). */
interface Case {
  label: string;
  /** Runs per sample: the short cases repeat, so one scheduling blip of a shared machine does not make a sample. */
  repeat: number;
  pgpipe: () => Promise<unknown>;
  pglite: () => Promise<unknown>;
}

/** `n` queries issued at once (`i`: 0 to n - 1), all awaited. */
const all = (n: number, query: (i: number) => PromiseLike<unknown>) =>
  Promise.all(Array.from({ length: n }, (_, i) => query(i)));
let next = 0; // distinct inserted values
const cases: Case[] = [
  {
    label: "50 concurrent selects",
    repeat: 10,
    pgpipe: () => all(50, (i) => sql`select ${i}::int4 as x, ${"v"}::text as y`),
    pglite: () => all(50, (i) => db.query("select $1::int4 as x, $2::text as y", [i, "v"])),
  },
  {
    label: "200 concurrent inserts",
    repeat: 4,
    pgpipe: () => all(200, () => sql`insert into inserted (name, n) values (${"x"}, ${next++})`),
    pglite: () =>
      all(200, () => db.query("insert into inserted (name, n) values ($1, $2)", ["x", next++])),
  },
  {
    label: "10,000 typed rows (int4, text, float8, numeric, timestamptz, bool), one query",
    repeat: 1,
    pgpipe: () => sql`select * from typed`,
    pglite: () => db.query("select * from typed"),
  },
  {
    label: "Drizzle findMany: 100 users with their 500 posts",
    repeat: 4,
    pgpipe: () => findMany(overPgpipe),
    pglite: () => findMany(overPGlite),
  },
  {
    label: "Drizzle findMany, 10 concurrent",
    repeat: 1,
    pgpipe: () => all(10, () => findMany(overPgpipe)),
    pglite: () => all(10, () => findMany(overPGlite)),
  },
];

const sides = ["pgpipe", "pglite"] as const;
/** Per case, each side's ms per run (one a round) and the raw calls one run made. */
const times = new Map(cases.map((c) => [c, { pgpipe: [] as number[], pglite: [] as number[] }]));
const callsPerRun = new Map(cases.map((c) => [c, { pgpipe: 0, pglite: 0 }]));
for (const c of cases) {
  for (let i = 0; i < warmup; i++) for (const side of sides) await c[side]();
  // One counted run of each side: the calls it made.
  for (const side of sides) {
    calls = 0;
    await c[side]();
    callsPerRun.get(c)![side] = calls;
  }
  await rotated(rounds, sides, async (side) => {
    const t0 = performance.now();
    for (let i = 0; i < c.repeat; i++) await c[side]();
    times.get(c)![side].push((performance.now() - t0) / c.repeat);
  });
}
await sql.end();
await db.close();

const report = new Report("pglite");
const rows: string[][] = [];
for (const c of cases) {
  const [ours, theirs] = sides.map((side) => median(times.get(c)![side]));
  const n = callsPerRun.get(c)!;
  report.ratio(c.label, "PGlite query()", theirs / ours);
  const calls = `${n.pgpipe} / ${n.pglite}`;
  rows.push([c.label, fmt(ours, 2), fmt(theirs, 2), formatRatio(theirs / ours), calls]);
}
report.table(
  `pgpipe over PGlite (postgres(pglite(db))) against PGlite's own query() on the same instance, ` +
    `in process (median ms of ${rounds} rotated rounds)`,
  "case | pgpipe ms | PGlite query() ms | pgpipe faster by | raw calls per run (pgpipe / query())",
  rows,
);
report.note(
  "Drizzle runs @pgpipe/pgpipe/drizzle over pgpipe and drizzle-orm/pglite over PGlite, one " +
    "relational query (users with their posts as JSON) per findMany.",
  "Raw calls: PGlite's execProtocolRawSync, for one run of the case; pgpipe makes one per flush.",
  "A sample is the mean of several runs for the short cases (10 for the selects, 4 for the " +
    "inserts and the single findMany).",
);
await report.emit();
